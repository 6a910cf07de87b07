//! Property tests of [`charge`]: random traffic mixing admissions and stream-end charges
//! (some far past the limit), on every algorithm, with a fake clock.

use super::test_support::limit;
use super::{charge, decide, Algorithm, Decision, Limit, State, Unit};
use proptest::prelude::*;
use std::num::NonZeroU32;

const S: u64 = 1_000_000_000;

/// Steps: (gap before it, hits, whether it is a charge); sometimes a cost of `u32::MAX`.
fn steps() -> impl Strategy<Value = Vec<(u64, u64, bool)>> {
    let hits = prop_oneof![9 => 1u64..=40, 1 => Just(u64::from(u32::MAX))];
    prop::collection::vec((0u64..(3 * S / 2), hits, any::<bool>()), 1..60)
}

/// The longest any charge may keep one hit out (debt is capped at one limit): a token
/// bucket until `burst + 1` tokens are back, a fixed window or a sliding counter until the
/// end of the next window, a sliding log one unit.
fn longest_block(l: &Limit) -> u64 {
    let p = l.period_ns();
    match l.algorithm {
        Algorithm::TokenBucket { burst } => (u64::from(burst.get()) + 1) * p.div_ceil(l.rpu()),
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => 2 * p,
        // Never charged (a hold's slot comes back at its deadline); not generated here.
        Algorithm::SlidingWindowLog | Algorithm::Concurrency => p,
    }
}

fn algorithms(burst: u32) -> [Algorithm; 4] {
    [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket {
            burst: NonZeroU32::new(burst).unwrap(),
        },
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
    ]
}

/// One hit fits at `now + d` and (for `d` > 0) not a nanosecond before.
fn exact_retry(state: &State, now: u64, l: &Limit, d: &Decision) -> Result<(), TestCaseError> {
    let fits = |t: u64| decide(state, t, l, 1).0.allowed;
    prop_assert!(
        fits(now + d.reset_in_ns),
        "{:?} at {} + {}",
        l,
        now,
        d.reset_in_ns
    );
    if d.reset_in_ns > 0 {
        prop_assert!(
            !fits(now + d.reset_in_ns - 1),
            "{:?} at {} + {} - 1",
            l,
            now,
            d.reset_in_ns
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn charges_count_past_the_limit_and_report_the_exact_retry(
        rpu in 1u32..20, burst in 1u32..20, which in 0usize..4, run in steps(),
    ) {
        let l = limit(rpu, Unit::Second, algorithms(burst)[which]);
        let mut state = State::fresh(&l);
        let mut now = 1_000 * S + 987_654_321;
        for (gap, hits, is_charge) in run {
            now += if gap > S { gap } else { gap / 50 };
            let (admission, _) = decide(&state, now, &l, hits);
            let (d, u) = if is_charge { charge(&state, now, &l, hits) } else { decide(&state, now, &l, hits) };
            let before = state.clone();
            state.apply(u);
            if d.allowed {
                prop_assert!(admission.allowed, "a charge is admitted exactly when it fits");
                continue;
            }
            if is_charge {
                prop_assert!(!admission.allowed);
                prop_assert_eq!(d.remaining, 0);
                prop_assert!(!decide(&state, now, &l, 1).0.allowed, "in debt after it");
                prop_assert!(d.reset_in_ns > 0);
                prop_assert!(d.reset_in_ns <= longest_block(&l), "{:?}: {} ns", l, d.reset_in_ns);
                exact_retry(&state, now, &l, &d)?;
            } else {
                exact_retry(&before, now, &l, &d)?;
            }
            // However much is charged, a log never holds more entries than its limit.
            prop_assert!(state.cells() <= 1 + rpu as usize, "{} cells", state.cells());
        }
    }

    #[test]
    fn a_fixed_window_charge_loses_nothing_up_to_one_limit_of_debt(rpu in 1u32..20, charges in prop::collection::vec(1u64..50, 1..20)) {
        let l = limit(rpu, Unit::Minute, Algorithm::FixedWindow);
        let mut state = State::fresh(&l);
        for &h in &charges {
            let (_, u) = charge(&state, 60 * S, &l, h);
            state.apply(u);
        }
        let count = match state {
            State::FixedWindow(s) => s.count,
            _ => 0,
        };
        prop_assert_eq!(count, charges.iter().sum::<u64>().min(2 * u64::from(rpu)));
    }
}
