//! Property tests of the bucket math against its definition, with a fake clock, on the
//! shapes both sides build: the filter's (a token is 10^15 units, rates in millionths of a
//! token per second, 0 included; [`PastCap::Kept`]) and floodgate-server's (a token is a
//! window of 1 s to 90 min, `requests_per_unit` units a nanosecond; [`PastCap::Clamped`]).
//! The filter's and the server's suites merged: every property either had.

use super::*;
use proptest::prelude::*;

use super::tests::{refused, shape, take, S};

const FILTER_TOKEN: u64 = 1_000_000_000_000_000;

/// The filter's bucket: `capacity` tokens, `rate_micro` millionths of a token per second.
fn filter(capacity: u32, rate_micro: u64) -> Shape {
    shape(capacity, rate_micro, FILTER_TOKEN, PastCap::Kept)
}

/// The server's bucket: `burst` tokens, `rpu` per window of `m` seconds.
fn server(burst: u32, rpu: u32, m: u16) -> Shape {
    shape(burst, u64::from(rpu), u64::from(m) * S, PastCap::Clamped)
}

/// Filter rates worth trying, in micro-tokens per second: none, slow, fractional, fast.
fn rate_micro() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..=10_000_000,
        Just(333_333),
        Just(1_500_000),
        1_000_000u64..=1_000_000_000,
    ]
}

/// The server's windows: `unit: second` with `unit_multiplier` 1, 30, 300, 5400, 7.
fn window_multiplier() -> impl Strategy<Value = u16> {
    prop_oneof![Just(1u16), Just(30), Just(300), Just(5400), Just(7)]
}

/// A shape of either side with `capacity` in `caps`.
fn any_shape(caps: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = Shape> {
    prop_oneof![
        (caps.clone(), rate_micro()).prop_map(|(c, r)| filter(c, r)),
        (caps, 1u32..1000, window_multiplier()).prop_map(|(b, rpu, m)| server(b, rpu, m)),
    ]
}

/// A shape of either side that refills, with `capacity` in `caps`.
fn refilling(caps: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = Shape> {
    any_shape(caps).prop_filter("refills", |s| s.per_ns() > 0)
}

/// Gaps between requests: often none (bursts), sometimes long.
fn gap_ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        0u64..2_000_000,
        0u64..3_000_000_000,
        0u64..8_000 * S
    ]
}

/// Requests through one bucket from `start`: (time, hits, admitted) each; 0 hits probe.
fn run(sh: Shape, start: u64, steps: &[(u64, u64)]) -> (Tat, u64, Vec<(u64, u64, bool)>) {
    let (mut state, mut now) = (Tat::default(), start);
    let mut out = Vec::with_capacity(steps.len());
    for &(gap, hits) in steps {
        now += gap;
        let t = take(state, now, sh, hits);
        if let Take::Admitted { tat, .. } = t {
            state = tat;
        }
        out.push((now, hits, matches!(t, Take::Admitted { .. })));
    }
    (state, now, out)
}

fn admits(state: Tat, now: u64, sh: Shape, hits: u64) -> bool {
    matches!(take(state, now, sh, hits), Take::Admitted { .. })
}

/// The wait of a refused take of `hits` is exact: admitted then, refused a ns before.
fn exact_wait(state: Tat, now: u64, sh: Shape, hits: u64) -> Result<(), TestCaseError> {
    if let Some(Refusal { debt, short }) = refused(state, now, sh, hits) {
        prop_assert!(short > 0);
        prop_assert_eq!(sh.retry_ns(short, hits), sh.wait_ns(debt, hits), "{:?}", sh);
        if let Some(wait) = sh.wait_ns(debt, hits).filter(|w| *w < u64::MAX - now) {
            prop_assert!(admits(state, now + wait, sh, hits), "{:?} + {}", sh, wait);
            if wait > 0 {
                prop_assert!(
                    !admits(state, now + wait - 1, sh, hits),
                    "{:?} + {} - 1",
                    sh,
                    wait
                );
            }
        }
    }
    Ok(())
}

proptest! {
    /// Against an independent model (tokens scaled, refilled per ns, capped at the burst;
    /// a probe fits when one token is there and takes none), and no interval
    /// [t1, t2] ever admits more than capacity + rate × (t2 − t1).
    #[test]
    fn matches_a_token_count_and_never_admits_more_than_capacity_plus_refill(
        sh in any_shape(1..=50),
        start in 0u64..4_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 0u64..=3), 1..100),
    ) {
        let (_, _, out) = run(sh, start, &steps);
        let (cap, token) = (sh.burst(), u128::from(sh.token()));
        let (mut tokens, mut last) = (cap, out[0].0);
        for &(t, hits, admitted) in &out {
            tokens = (tokens + u128::from(t - last) * u128::from(sh.per_ns())).min(cap);
            last = t;
            let cost = u128::from(hits) * token;
            prop_assert_eq!(admitted, tokens >= cost.max(token), "at {}", t);
            if admitted { tokens -= cost; }
        }
        let admitted: Vec<_> = out.iter().filter(|s| s.2).collect();
        for i in 0..admitted.len() {
            let mut sum = 0u128;
            for later in &admitted[i..] {
                sum += u128::from(later.1);
                let elapsed = u128::from(later.0 - admitted[i].0);
                prop_assert!(sum * token <= cap + elapsed * u128::from(sh.per_ns()));
            }
        }
    }

    /// A refusal's wait is exact, for the same take (the filter's `retry-after`) and for
    /// one hit (the server's `OVER_LIMIT` duration, which an over-limit cache trusts):
    /// admitted at that instant, refused a nanosecond before; 0 when it fits now.
    #[test]
    fn a_refusal_s_wait_is_exact(
        sh in any_shape(1..=50),
        start in 0u64..1_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 0u64..=3), 1..60),
        hits in 1u64..=3,
    ) {
        let (state, now, _) = run(sh, start, &steps);
        exact_wait(state, now, sh, hits)?;
        exact_wait(state, now, sh, 1)?;
        if let Some(Refusal { debt, .. }) = refused(state, now, sh, hits) {
            prop_assert_eq!(sh.wait_ns(debt, hits).is_none(), hits > u64::from(sh.capacity()) || sh.per_ns() == 0);
        }
    }

    /// A client that waits one token-interval (rounded up to the ns) between requests is
    /// never rejected, whatever the capacity.
    #[test]
    fn a_client_at_the_rate_is_never_rejected(
        sh in refilling(1..=5), start in 0u64..1_000_000_000_000_000_000, n in 1u64..300,
    ) {
        let period = u64::try_from(u128::from(sh.token()).div_ceil(u128::from(sh.per_ns()))).unwrap();
        let mut state = Tat::default();
        for k in 0..n {
            match take(state, start + k * period, sh, 1) {
                Take::Admitted { tat, .. } => state = tat,
                t => prop_assert!(false, "request {} denied: {:?}", k, t),
            }
        }
    }

    /// With room for one spare token, a client on the exact schedule k / rate (rounded up
    /// to the clock's nanosecond) is never rejected: fractional intervals lose nothing.
    #[test]
    fn a_client_on_the_exact_schedule_is_never_rejected(
        sh in refilling(2..=5), start in 0u64..1_000_000_000_000_000_000, n in 1u64..300,
    ) {
        on_schedule(sh, start, n)?;
    }

    /// With a burst of one, the exact schedule holds when a token-interval is a whole
    /// number of nanoseconds (a request late by a fraction of one finds the bucket full).
    #[test]
    fn a_burst_of_one_never_rejects_a_client_at_a_whole_ns_rate(
        i in 0usize..8, m in window_multiplier(), start in 0u64..S, n in 1u64..200,
    ) {
        let rpu = [1, 2, 4, 5, 8, 10, 100, 1000][i];
        on_schedule(server(1, rpu, m), 1_000 * S + start, n)?;
    }

    /// What a take reports tells the truth: exactly `remaining` more single takes pass
    /// now; the bucket is full again after its full-in time and not a ns before; a probe
    /// (0 hits) changes nothing, passes exactly when one hit would, and sees one more left.
    #[test]
    fn remaining_full_in_and_probes_are_exact(
        sh in any_shape(1..=50),
        start in 0u64..1_000_000_000_000_000_000,
        steps in prop::collection::vec((gap_ns(), 1u64..=2), 1..40),
    ) {
        let (mut state, now, _) = run(sh, start, &steps);
        let remaining = match (take(state, now, sh, 0), take(state, now, sh, 1)) {
            (Take::Admitted { tat, ahead: probe }, Take::Admitted { tat: after, ahead }) => {
                prop_assert_eq!(tat.0, state.0.max(sh.scaled(now)), "a probe takes nothing");
                let left = sh.whole_tokens(sh.burst() - ahead);
                prop_assert_eq!(sh.whole_tokens(sh.burst() - probe), left + 1);
                if let Some(full) = sh.nanos_ceil(ahead).filter(|f| *f < u64::MAX - now) {
                    prop_assert_eq!(full_in_ns(after, now + full, sh.per_ns()), Some(0));
                    prop_assert!(full == 0 || full_in_ns(after, now + full - 1, sh.per_ns()) != Some(0));
                }
                left + 1
            }
            (Take::Refused { ahead }, Take::Refused { .. }) => {
                let debt = sh.refusal(ahead, NonZeroU64::MIN).debt;
                sh.whole_tokens(sh.burst().saturating_sub(debt))
            }
            (probe, one) => {
                prop_assert!(false, "a probe passes exactly when one hit does: {:?} {:?}", probe, one);
                0
            }
        };
        prop_assert_eq!(remaining > 0, admits(state, now, sh, 1));
        for _ in 0..remaining {
            match take(state, now, sh, 1) {
                Take::Admitted { tat, .. } => state = tat,
                t => prop_assert!(false, "remaining overstated: {:?}", t),
            }
        }
        prop_assert!(!admits(state, now, sh, 1));
    }

    /// Holding an estimate, then charging what the response really cost, leaves the bucket
    /// exactly as taking the real cost at once would have, up to one burst of debt; the
    /// debt is refilled with an exact wait; and giving back right after a take restores it.
    #[test]
    fn a_charge_equals_taking_the_real_cost_up_to_one_burst_of_debt(
        sh in any_shape(1..=50),
        estimate_frac in 0.0f64..=1.0,
        extra in 0u64..=200,
        start in 0u64..1_000_000_000_000,
    ) {
        let estimate = ((f64::from(sh.capacity()) * estimate_frac) as u64).clamp(1, u64::from(sh.capacity()));
        let Take::Admitted { tat: held, .. } = take(Tat::default(), start, sh, estimate) else {
            panic!("a full bucket admits its estimate");
        };
        prop_assert_eq!(refund(held, start, sh, estimate), Tat(sh.scaled(start)));
        let charged = charge(held, start, sh, extra);
        let total = (estimate + extra).min(2 * u64::from(sh.capacity()));
        prop_assert_eq!(charged.tat.0, sh.scaled(start) + sh.units(total));
        prop_assert_eq!(charged.ahead, sh.units(total));
        prop_assert_eq!(charged.capped, estimate + extra > 2 * u64::from(sh.capacity()));
        exact_wait(charged.tat, start, sh, estimate)?;
        exact_wait(charged.tat, start, sh, 1)?;
    }

    /// Whatever is charged, however often and whenever, a bucket never owes more than one
    /// burst: its TAT stays within two bursts of now, so `n` tokens fit again at most
    /// `(capacity + n) / rate` after the last charge, and one hit within
    /// `capacity + 1` whole token-intervals (the server's longest block).
    #[test]
    fn no_charge_puts_a_bucket_more_than_one_burst_into_debt(
        sh in prop_oneof![
            (1u32..=u32::MAX, 1u64..=1_000_000_000).prop_map(|(c, r)| filter(c, r)),
            (1u32..20, 1u32..20, window_multiplier()).prop_map(|(b, r, m)| server(b, r, m)),
        ],
        charges in prop::collection::vec((gap_ns(), prop_oneof![9 => 1u64..=40, 1 => Just(1u64 << 32)]), 1..12),
        start in 0u64..1_000_000_000_000_000,
        n_frac in 0.0f64..=1.0,
    ) {
        let (mut state, mut now) = (Tat::default(), start);
        for (gap, hits) in charges {
            now += gap;
            let fits = admits(state, now, sh, hits);
            let c = charge(state, now, sh, hits);
            prop_assert!(c.ahead <= 2 * sh.burst(), "{} bursts ahead", c.ahead / sh.burst());
            prop_assert_eq!(c.ahead <= sh.burst(), fits, "a charge that fits is a take");
            state = c.tat;
        }
        let n = ((f64::from(sh.capacity()) * n_frac) as u64).clamp(1, u64::from(sh.capacity()));
        let wait = sh.nanos_ceil(sh.burst() + sh.units(n)).unwrap();
        // A wait past the end of u64 nanoseconds (a huge burst refilled at millionths of a
        // token per second) saturates; no instant is left to check.
        let at = now.checked_add(wait).filter(|_| wait < u64::MAX);
        prop_assume!(at.is_some());
        prop_assert!(admits(state, at.unwrap_or(u64::MAX), sh, n));
        let interval = u128::from(sh.token()).div_ceil(u128::from(sh.per_ns()));
        if let Some(Refusal { debt, .. }) = refused(state, now, sh, 1) {
            let one = u128::from(sh.wait_ns(debt, 1).unwrap());
            prop_assert!(one <= (u128::from(sh.capacity()) + 1) * interval);
        }
    }

    /// A TAT past the cap (written before it existed, or by a clock that jumped back): the
    /// filter's bucket keeps it, a charge moving it neither further nor back; the server's
    /// reads it as exactly the cap, by a take and by a charge.
    #[test]
    fn a_bucket_past_the_cap_is_kept_or_clamped(
        capacity in 1u32..=50,
        per_ns in 1u64..=1_000_000_000,
        token in prop_oneof![Just(FILTER_TOKEN), (1u64..=5400).prop_map(|m| m * S)],
        past in 1u128..=1_000_000_000_000_000_000,
        hits in 1u64..=u64::from(u32::MAX),
        now in 0u64..1_000_000_000_000,
    ) {
        let kept = shape(capacity, per_ns, token, PastCap::Kept);
        let cap = kept.scaled(now) + 2 * kept.burst();
        let old = Tat(cap + past);
        let c = charge(old, now, kept, hits);
        prop_assert_eq!((c.tat, c.capped), (old, true));
        let clamped = shape(capacity, per_ns, token, PastCap::Clamped);
        prop_assert_eq!(take(old, now, clamped, hits), take(Tat(cap), now, clamped, hits));
        prop_assert_eq!(take(old, now, clamped, 0), take(Tat(cap), now, clamped, 0));
        let c = charge(old, now, clamped, hits);
        prop_assert_eq!((c.tat, c.capped), (Tat(cap), true));
    }

    /// The inline 64 × 64-bit multiply is the exact product, up to the largest factors.
    #[test]
    fn the_wide_multiply_is_exact(a in any::<u64>(), b in any::<u64>()) {
        prop_assert_eq!(wide_mul_by_halves(a, b), u128::from(a) * u128::from(b));
        prop_assert_eq!(wide_mul_by_halves(u64::MAX, b), u128::from(u64::MAX) * u128::from(b));
        prop_assert_eq!(wide_mul_by_halves(a, u64::MAX), u128::from(a) * u128::from(u64::MAX));
        prop_assert_eq!(wide_mul(a, b), u128::from(a) * u128::from(b));
    }
}

/// Request `k` at the first nanosecond at or after `k` token-intervals from `start`.
fn on_schedule(sh: Shape, start: u64, n: u64) -> Result<(), TestCaseError> {
    let mut state = Tat::default();
    for k in 0..n {
        let offset = (u128::from(k) * u128::from(sh.token())).div_ceil(u128::from(sh.per_ns()));
        let now = start + u64::try_from(offset).unwrap();
        match take(state, now, sh, 1) {
            Take::Admitted { tat, .. } => state = tat,
            t => prop_assert!(false, "request {} at {} denied: {:?}", k, now, t),
        }
    }
    Ok(())
}
