use super::*;

const SECOND: u64 = 1_000_000_000;

fn quota(capacity: u32, rate: f64) -> Quota {
    Quota::new(capacity, (rate * 1e6).round() as u64).unwrap()
}

#[test]
fn a_new_bucket_admits_its_capacity_then_denies() {
    let q = quota(3, 1.0);
    let now = 1_000 * SECOND;
    let mut state = Tat::default();
    for expected_left in [2, 1, 0] {
        match decide(state, now, q, 1) {
            d @ Decision::Allow { new_state, .. } => {
                assert_eq!(d.remaining(), expected_left);
                state = new_state;
            }
            other => panic!("expected allow, got {other:?}"),
        }
    }
    assert_eq!(
        decide(state, now, q, 1),
        Decision::Deny {
            retry_in_ns: Some(SECOND),
            remaining: 0,
            full_in_ns: Some(3 * SECOND),
            to_next_token: UNITS_PER_TOKEN,
        }
    );
}

#[test]
fn zero_refill_is_a_counter_that_never_resets() {
    let q = quota(2, 0.0);
    let mut state = Tat::default();
    for _ in 0..2 {
        if let Decision::Allow { new_state, .. } = decide(state, 5, q, 1) {
            state = new_state;
        }
    }
    let later = decide(state, u64::MAX, q, 1);
    assert_eq!(
        later,
        Decision::Deny {
            retry_in_ns: None,
            remaining: 0,
            full_in_ns: None,
            to_next_token: UNITS_PER_TOKEN,
        }
    );
}

#[test]
fn a_cost_above_capacity_can_never_be_admitted() {
    let q = quota(5, 10.0);
    match decide(Tat::default(), SECOND, q, 6) {
        Decision::Deny {
            retry_in_ns,
            remaining,
            ..
        } => {
            assert_eq!(retry_in_ns, None);
            assert_eq!(remaining, 5);
        }
        other => panic!("expected deny, got {other:?}"),
    }
}

#[test]
fn zero_cost_counts_as_one() {
    let q = quota(1, 1.0);
    let first = decide(Tat::default(), SECOND, q, 0);
    assert!(first.is_allow());
    if let Decision::Allow { new_state, .. } = first {
        assert!(!decide(new_state, SECOND, q, 0).is_allow());
    }
}

#[test]
fn fractional_rates_refill_exactly() {
    // 1/3 token per second is not representable in micro-tokens; 0.5 is.
    let q = quota(1, 0.5);
    let start = 10 * SECOND;
    let Decision::Allow { new_state, .. } = decide(Tat::default(), start, q, 1) else {
        panic!("first request must pass");
    };
    assert!(!decide(new_state, start + 2 * SECOND - 1, q, 1).is_allow());
    assert!(decide(new_state, start + 2 * SECOND, q, 1).is_allow());
}

#[test]
fn refund_right_after_take_restores_the_state() {
    let q = quota(4, 2.0);
    let state = Tat(q.scaled(SECOND) + UNITS_PER_TOKEN);
    let Decision::Allow { new_state, .. } = decide(state, SECOND, q, 2) else {
        panic!("must pass");
    };
    assert_eq!(refund(new_state, SECOND, q, 2), state);
}

#[test]
fn refund_never_overfills() {
    let q = quota(4, 2.0);
    let now = 100 * SECOND;
    assert_eq!(refund(Tat::default(), now, q, 3), Tat(q.scaled(now)));
    let refunded = refund(Tat::default(), now, q, 3);
    assert_eq!(full_in_ns(refunded, now, q.rate_micro()), Some(0));
}

#[test]
fn clock_going_backwards_does_not_panic() {
    let q = quota(2, 1.0);
    let Decision::Allow { new_state, .. } = decide(Tat::default(), 50 * SECOND, q, 1) else {
        panic!("must pass");
    };
    let d = decide(new_state, 0, q, 1);
    assert!(!d.is_allow());
    // Seen from time 0 the whole state is debt: the bucket looks empty, not broken.
    let all_debt = u64::try_from(new_state.0.div_ceil(u128::from(q.rate_micro()))).unwrap();
    assert_eq!(full_in_ns(new_state, 0, q.rate_micro()), Some(all_debt));
}

#[test]
fn seconds_round_up() {
    assert_eq!(seconds_ceil(0), 0);
    assert_eq!(seconds_ceil(1), 1);
    assert_eq!(seconds_ceil(SECOND), 1);
    assert_eq!(seconds_ceil(SECOND + 1), 2);
    assert_eq!(seconds_ceil(u64::MAX), 18_446_744_074);
}

#[test]
fn quota_rejects_zero_capacity_and_absurd_rates() {
    assert!(Quota::new(0, 1).is_none());
    assert!(Quota::new(1, MAX_RATE_MICRO + 1).is_none());
    assert!(Quota::new(u32::MAX, MAX_RATE_MICRO).is_some());
}

#[test]
fn the_next_token_comes_one_token_interval_after_the_fraction_earned_so_far() {
    // 2 tokens per second: a token every 500 ms.
    let q = quota(4, 2.0);
    let now = 1_000 * SECOND;
    let mut state = Tat::default();
    for _ in 0..4 {
        if let Decision::Allow { new_state, .. } = decide(state, now, q, 1) {
            state = new_state;
        }
    }
    // Empty at `now`; 200 ms later 0.4 of a token is earned: the next whole one is 300 ms off.
    let later = decide(state, now + SECOND / 5, q, 1);
    assert_eq!(later.remaining(), 0);
    assert_eq!(later.next_token_in_ns(q), Some(3 * SECOND / 10));
    // Allowed with 1.4 tokens: 0.4 left, the next whole token in 300 ms as well.
    let allowed = decide(state, now + 7 * SECOND / 10, q, 1);
    assert!(allowed.is_allow());
    assert_eq!(allowed.remaining(), 0);
    assert_eq!(allowed.next_token_in_ns(q), Some(3 * SECOND / 10));
    // A full bucket earns nothing more.
    let full = decide(Tat::default(), now, q, 5);
    assert_eq!(full.remaining(), 4);
    assert_eq!(full.next_token_in_ns(q), None);
}
