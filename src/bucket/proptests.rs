//! Property tests of the bucket math against its definition, with a fake clock.

use super::*;
use proptest::prelude::*;

/// Rates worth trying, in micro-tokens per second: none, slow, fractional, fast.
fn rate_micro() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..=10_000_000,
        Just(333_333),
        Just(1_500_000),
        1_000_000u64..=1_000_000_000,
    ]
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u32..=50, rate_micro()).prop_map(|(capacity, rate)| Quota::new(capacity, rate).unwrap())
}

/// Gaps between requests: often none (bursts), sometimes long.
fn gap_ns() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..3_000_000_000]
}

/// Runs requests through one bucket, returning (time, cost, decision) for each.
fn run(quota: Quota, start_ns: u64, steps: &[(u64, u32)]) -> Vec<(u64, u32, Decision)> {
    let mut state = Tat::default();
    let mut now = start_ns;
    let mut out = Vec::with_capacity(steps.len());
    for &(gap, cost) in steps {
        now += gap;
        let d = decide(state, now, quota, cost);
        if let Decision::Allow { new_state, .. } = d {
            state = new_state;
        }
        out.push((now, cost, d));
    }
    out
}

proptest! {
    /// No interval [t1, t2] ever admits more than capacity + rate × (t2 - t1) tokens.
    #[test]
    fn never_admits_more_than_capacity_plus_refill(
        q in quota(),
        start in 0u64..4_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 1u32..=3), 1..120),
    ) {
        let admitted: Vec<(u64, u32)> = run(q, start, &steps)
            .into_iter()
            .filter(|(_, _, d)| d.is_allow())
            .map(|(t, c, _)| (t, c))
            .collect();
        for i in 0..admitted.len() {
            let mut tokens: u128 = 0;
            for j in i..admitted.len() {
                tokens += u128::from(admitted[j].1);
                let elapsed = u128::from(admitted[j].0 - admitted[i].0);
                let allowed_units = u128::from(q.capacity()) * UNITS_PER_TOKEN
                    + elapsed * u128::from(q.rate_micro());
                prop_assert!(
                    tokens * UNITS_PER_TOKEN <= allowed_units,
                    "{} tokens admitted in {} ns with {:?}", tokens, elapsed, q
                );
            }
        }
    }

    /// A denial's retry time is exact: admitted at that instant, denied a nanosecond before.
    #[test]
    fn retry_after_is_exact(
        q in quota(),
        start in 0u64..1_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 1u32..=3), 1..60),
        cost in 1u32..=3,
    ) {
        let mut state = Tat::default();
        let mut now = start;
        for &(gap, c) in &steps {
            now += gap;
            if let Decision::Allow { new_state, .. } = decide(state, now, q, c) {
                state = new_state;
            }
        }
        if let Decision::Deny { retry_in_ns: Some(wait), .. } = decide(state, now, q, cost) {
            prop_assert!(wait > 0);
            prop_assert!(decide(state, now + wait, q, cost).is_allow());
            prop_assert!(!decide(state, now + wait - 1, q, cost).is_allow());
        }
    }

    /// A client that never sends faster than the refill rate (every request at least
    /// 1 / rate after the previous one) is never rejected, whatever the capacity.
    #[test]
    fn client_at_the_rate_is_never_rejected(
        capacity in 1u32..=5,
        rate in 1u64..=5_000_000_000,
        start in 0u64..1_000_000_000_000_000_000,
        n in 1u64..300,
    ) {
        let q = Quota::new(capacity, rate).unwrap();
        let period = UNITS_PER_TOKEN.div_ceil(u128::from(rate)) as u64;
        let mut state = Tat::default();
        for k in 0..n {
            let now = start + k * period;
            match decide(state, now, q, 1) {
                Decision::Allow { new_state, .. } => state = new_state,
                d => prop_assert!(false, "request {} at {} denied: {:?}", k, now, d),
            }
        }
    }

    /// With room for one spare token, a client on the exact schedule k / rate (rounded
    /// up to the clock's nanosecond) is never rejected: fractional periods lose nothing.
    #[test]
    fn client_on_the_exact_schedule_is_never_rejected(
        capacity in 2u32..=5,
        rate in 1u64..=5_000_000_000,
        start in 0u64..1_000_000_000_000_000_000,
        n in 1u64..300,
    ) {
        let q = Quota::new(capacity, rate).unwrap();
        let mut state = Tat::default();
        for k in 0..n {
            let offset = (u128::from(k) * UNITS_PER_TOKEN).div_ceil(u128::from(rate));
            let now = start + offset as u64;
            match decide(state, now, q, 1) {
                Decision::Allow { new_state, .. } => state = new_state,
                d => prop_assert!(false, "request {} at {} denied: {:?}", k, now, d),
            }
        }
    }

    /// `remaining` tells the truth: exactly that many more requests pass right now.
    #[test]
    fn remaining_is_exact(
        q in quota(),
        start in 0u64..1_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 1u32..=2), 1..40),
    ) {
        let mut state = Tat::default();
        let mut now = start;
        let mut last = None;
        for &(gap, c) in &steps {
            now += gap;
            let d = decide(state, now, q, c);
            if let Decision::Allow { new_state, .. } = d {
                state = new_state;
            }
            last = Some(d);
        }
        let remaining = last.map(|d| d.remaining()).unwrap_or(0);
        for _ in 0..remaining {
            match decide(state, now, q, 1) {
                Decision::Allow { new_state, .. } => state = new_state,
                d => prop_assert!(false, "remaining overstated: {:?}", d),
            }
        }
        prop_assert!(!decide(state, now, q, 1).is_allow());
    }

    /// A bucket left alone for its full-in time is full again.
    #[test]
    fn full_in_is_exact(
        q in quota(),
        start in 0u64..1_000_000_000_000_000_000,
        cost in 1u32..=3,
    ) {
        let d = decide(Tat::default(), start, q, cost);
        if let (Decision::Allow { new_state, .. }, Some(full)) = (d, d.full_in_ns()) {
            prop_assert_eq!(full_in_ns(new_state, start + full, q.rate_micro()), Some(0));
            prop_assert!(full == 0 || full_in_ns(new_state, start + full - 1, q.rate_micro()) != Some(0));
        }
    }

    /// A bucket in debt (a response cost more than was held) denies until the debt is
    /// refilled, and the wait it gives is exact to the nanosecond.
    #[test]
    fn debt_is_refilled_with_an_exact_retry(
        capacity in 1u32..=50,
        rate in 1u64..=10_000_000,
        estimate_frac in 0.0f64..=1.0,
        cost in 0u32..=500,
        start in 0u64..1_000_000_000_000,
    ) {
        let quota = Quota::new(capacity, rate).unwrap();
        let estimate = ((f64::from(capacity) * estimate_frac) as u32).clamp(1, capacity);
        let Decision::Allow { new_state, .. } = decide(Tat::default(), start, quota, estimate) else {
            panic!("a full bucket admits its estimate");
        };
        let state = settle(new_state, start, quota, estimate, cost).state;
        match decide(state, start, quota, estimate) {
            Decision::Allow { .. } => prop_assert!(u64::from(cost) + u64::from(estimate) <= u64::from(capacity)),
            Decision::Deny { retry_in_ns, .. } => {
                let retry = retry_in_ns.unwrap();
                prop_assert!(retry > 0);
                prop_assert!(!decide(state, start + retry - 1, quota, estimate).is_allow());
                prop_assert!(decide(state, start + retry, quota, estimate).is_allow());
            }
        }
    }

    /// Holding an estimate, then settling the real cost, leaves the bucket exactly as
    /// taking the real cost at once would have, up to the debt cap (two bursts taken in
    /// all: one burst of debt).
    #[test]
    fn settling_equals_taking_the_real_cost_up_to_one_burst_of_debt(
        quota in quota(),
        estimate_frac in 0.0f64..=1.0,
        cost in 0u32..=200,
        start in 0u64..1_000_000_000_000,
    ) {
        let estimate = ((f64::from(quota.capacity()) * estimate_frac) as u32).clamp(1, quota.capacity());
        let Decision::Allow { new_state, .. } = decide(Tat::default(), start, quota, estimate) else {
            panic!("a full bucket admits its estimate");
        };
        let settled = settle(new_state, start, quota, estimate, cost);
        let now = quota.scaled(start);
        let taken = cost.min(2 * quota.capacity());
        prop_assert_eq!(settled.state.0, now + u128::from(taken) * UNITS_PER_TOKEN);
        prop_assert_eq!(settled.debt_capped, cost > 2 * quota.capacity());
    }

    /// Whatever is charged, however often and whenever, a bucket never owes more than
    /// one burst: its TAT stays within two bursts of now, so a request of `n` tokens is
    /// admitted again at most `(capacity + n) / rate` after the last charge.
    #[test]
    fn no_charge_puts_a_bucket_more_than_one_burst_into_debt(
        capacity in 1u32..=u32::MAX,
        rate in 1u64..=1_000_000_000,
        charges in proptest::collection::vec((gap_ns(), any::<u32>(), any::<u32>()), 1..12),
        start in 0u64..1_000_000_000_000_000,
        n_frac in 0.0f64..=1.0,
    ) {
        let quota = Quota::new(capacity, rate).unwrap();
        let burst = u128::from(capacity) * UNITS_PER_TOKEN;
        let mut state = Tat::default();
        let mut now = start;
        for (gap, held, cost) in charges {
            now += gap;
            state = settle(state, now, quota, held, cost).state;
            let ahead = state.0.saturating_sub(quota.scaled(now));
            prop_assert!(ahead <= 2 * burst, "{} bursts ahead", ahead / burst);
        }
        let n = ((f64::from(capacity) * n_frac) as u32).clamp(1, capacity);
        let wait = quota.units_to_nanos_ceil(burst + u128::from(n) * UNITS_PER_TOKEN).unwrap();
        // A wait past the end of u64 nanoseconds (584 years: a huge burst refilled at
        // millionths of a token per second) saturates; no instant is left to check.
        let at = now.checked_add(wait).filter(|_| wait < u64::MAX);
        prop_assume!(at.is_some());
        prop_assert!(decide(state, at.unwrap_or(u64::MAX), quota, n).is_allow());
    }

    /// A TAT already past the cap (written before it existed, or by a clock that jumped
    /// back) is never moved by a charge, neither further nor back.
    #[test]
    fn a_bucket_past_the_cap_is_left_as_it_is(
        capacity in 1u32..=50,
        rate in 1u64..=1_000_000_000,
        past in 1u128..=1_000_000,
        held in 0u32..u32::MAX,
        more in 1u32..=u32::MAX,
        now in 0u64..1_000_000_000_000,
    ) {
        let quota = Quota::new(capacity, rate).unwrap();
        let cost = held.saturating_add(more);
        let old = Tat(quota.scaled(now) + 2 * quota.burst_units() + past);
        let settled = settle(old, now, quota, held, cost);
        prop_assert_eq!(settled.state, old);
        prop_assert!(settled.debt_capped);
    }

    /// The inline 64 × 64-bit multiply is the exact product, up to the largest factors.
    #[test]
    fn the_wide_multiply_is_exact(a in any::<u64>(), b in any::<u64>()) {
        prop_assert_eq!(wide_mul(a, b), u128::from(a) * u128::from(b));
        prop_assert_eq!(wide_mul(u64::MAX, b), u128::from(u64::MAX) * u128::from(b));
        prop_assert_eq!(wide_mul(a, u64::MAX), u128::from(a) * u128::from(u64::MAX));
    }
}
