use super::*;

/// One second, in ns.
pub(super) const S: u64 = 1_000_000_000;

/// A take of `hits`, or a probe for 0, as floodgate-server asks (the filter never probes).
pub(super) fn take(state: Tat, now_ns: u64, sh: Shape, hits: u64) -> Take {
    match NonZeroU64::new(hits) {
        Some(hits) => super::take(state, now_ns, sh, hits),
        None => probe(state, now_ns, sh),
    }
}

/// The refusal of a take of `hits` (a probe for 0), if it is refused.
pub(super) fn refused(state: Tat, now_ns: u64, sh: Shape, hits: u64) -> Option<Refusal> {
    match take(state, now_ns, sh, hits) {
        Take::Refused { ahead } => {
            Some(sh.refusal(ahead, NonZeroU64::new(hits).unwrap_or(NonZeroU64::MIN)))
        }
        Take::Admitted { .. } => None,
    }
}

/// A shape from plain numbers (the test's own, never zero).
pub(super) fn shape(capacity: u32, per_ns: u64, token: u64, past_cap: PastCap) -> Shape {
    let capacity = NonZeroU32::new(capacity).unwrap();
    Shape::new(capacity, per_ns, NonZeroU64::new(token).unwrap(), past_cap)
}

#[test]
fn the_same_bucket_in_either_side_s_units_decides_alike() {
    // Two tokens a second, four of burst: the filter's units (2,000,000 micro-tokens a
    // second, a token 10^15 units) and the server's (2 per window of one second).
    let filter = shape(4, 2_000_000, 1_000_000_000_000_000, PastCap::Kept);
    let server = shape(4, 2, S, PastCap::Clamped);
    for sh in [filter, server] {
        let mut state = Tat::default();
        for _ in 0..4 {
            let Take::Admitted { tat, .. } = take(state, 100 * S, sh, 1) else {
                panic!("{sh:?}: the burst is there");
            };
            state = tat;
        }
        let Some(Refusal { debt, .. }) = refused(state, 100 * S, sh, 1) else {
            panic!("{sh:?}: empty");
        };
        assert_eq!(sh.wait_ns(debt, 1), Some(S / 2), "a token every 500 ms");
        assert_eq!(sh.wait_ns(debt, 4), Some(2 * S));
        assert_eq!(sh.wait_ns(debt, 5), None, "more than the burst: never");
        assert_eq!(sh.nanos_ceil(debt), Some(2 * S), "full in 2 s");
        assert!(matches!(
            take(state, 100 * S + S / 2 - 1, sh, 1),
            Take::Refused { .. }
        ));
        assert!(matches!(
            take(state, 100 * S + S / 2, sh, 1),
            Take::Admitted { .. }
        ));
        assert_eq!(full_at_ns(state, sh.per_ns()), Some(102 * S));
    }
}

#[test]
fn fractional_intervals_are_exact() {
    // 3 per second: a token every 333,333,333.3 ns; the wait is rounded up.
    let sh = shape(1, 3, S, PastCap::Clamped);
    let Take::Admitted { tat, .. } = take(Tat::default(), 0, sh, 1) else {
        panic!("full");
    };
    let Some(Refusal { debt, .. }) = refused(tat, 333_333_333, sh, 1) else {
        panic!("a fraction of a ns early");
    };
    assert_eq!(sh.wait_ns(debt, 1), Some(1));
    assert!(matches!(
        take(tat, 333_333_334, sh, 1),
        Take::Admitted { .. }
    ));
}

#[test]
fn no_refill_is_a_counter_that_never_resets() {
    let sh = shape(2, 0, 1_000_000_000_000_000, PastCap::Kept);
    let mut state = Tat::default();
    for _ in 0..2 {
        if let Take::Admitted { tat, .. } = take(state, 5, sh, 1) {
            state = tat;
        }
    }
    let Some(Refusal { debt, .. }) = refused(state, u64::MAX, sh, 1) else {
        panic!("spent for ever");
    };
    assert_eq!((sh.wait_ns(debt, 1), sh.nanos_ceil(debt)), (None, None));
    assert_eq!(full_in_ns(state, u64::MAX, 0), None);
    assert_eq!(sh.to_next_token(debt, 0), sh.units(1));
}

#[test]
fn a_probe_takes_nothing_and_needs_one_token() {
    let sh = shape(1, 1, S, PastCap::Clamped);
    let Take::Admitted { tat, ahead } = take(Tat::default(), S, sh, 0) else {
        panic!("a full bucket passes a probe");
    };
    assert_eq!((tat.0, ahead), (sh.scaled(S), 0));
    let Take::Admitted { tat, .. } = take(tat, S, sh, 1) else {
        panic!("the token is still there");
    };
    assert!(matches!(take(tat, S, sh, 0), Take::Refused { .. }));
}

#[test]
fn a_clock_going_backwards_does_not_panic() {
    let sh = shape(2, 1_000_000, 1_000_000_000_000_000, PastCap::Kept);
    let Take::Admitted { tat, .. } = take(Tat::default(), 50 * S, sh, 1) else {
        panic!("full");
    };
    // Seen from time 0 the whole state is debt: the bucket looks empty, not broken.
    assert!(matches!(take(tat, 0, sh, 1), Take::Refused { .. }));
    let all_debt = u64::try_from(tat.0.div_ceil(1_000_000)).unwrap();
    assert_eq!(full_in_ns(tat, 0, sh.per_ns()), Some(all_debt));
}

#[test]
fn the_next_token_comes_one_token_interval_after_the_fraction_earned_so_far() {
    let sh = shape(4, 2_000_000, 1_000_000_000_000_000, PastCap::Kept);
    // Empty, then 0.4 of a token earned: the bucket must earn 0.6 more for the next one.
    let debt = sh.burst() - sh.units(2) / 5;
    assert_eq!(sh.to_next_token(debt, 0), sh.units(3) / 5);
    assert_eq!(sh.nanos_ceil(sh.to_next_token(debt, 0)), Some(3 * S / 10));
    assert_eq!(
        sh.to_next_token(0, 4),
        0,
        "a full bucket earns nothing more"
    );
}
