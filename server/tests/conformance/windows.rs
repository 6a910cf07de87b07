//! Scenarios for windows of several units (`unit_multiplier`): 30 seconds, 5 minutes and
//! 90 minutes, on every algorithm. The window is the whole `unit × unit_multiplier`:
//! fixed windows start at the Unix epoch's multiples of it (a 90-minute window at 00:00,
//! 01:30, 03:00 UTC, as the reference aligns its windows, `now - now % length`), the
//! other algorithms refill or slide over the whole length, and every denial's duration
//! is exact: one hit is over 1 µs before it and admitted at it.

use super::{bucket, limit, Harness, S, US, W};
use crate::one_hit::one_hit_is_over_exactly_until;
use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::store::{Check, Store};
use std::num::NonZeroU16;

/// The windows the scenarios run on: 30 s, 5 min, 90 min.
pub const WINDOWS: [(u16, Unit); 3] = [(30, Unit::Second), (5, Unit::Minute), (90, Unit::Minute)];

/// `rpu` per `m` × `unit`.
pub fn limit_per(rpu: u32, m: u16, unit: Unit, algorithm: Algorithm) -> Limit {
    Limit {
        unit_multiplier: NonZeroU16::new(m).unwrap(),
        ..limit(rpu, unit, algorithm)
    }
}

/// The first instant at or after `W` where a window of `p` ns starts.
fn aligned(p: u64) -> u64 {
    W.div_ceil(p) * p
}

pub async fn a_fixed_window_of_several_units_is_one_aligned_window<St: Store>(h: &Harness<St>) {
    for (m, unit) in WINDOWS {
        let l = limit_per(3, m, unit, Algorithm::FixedWindow);
        let p = l.period_ns();
        let start = aligned(p);
        let c = h.check(&format!("fw-{m}-{}", unit.name()), l);
        let quarter = start + p / 4;
        h.at(quarter);
        for left in [2, 1, 0] {
            let ok = h.one(&c).await;
            assert!(ok.allowed, "{m} {unit:?}");
            assert_eq!(
                (ok.remaining, ok.reset_in_ns),
                (left, p - p / 4),
                "{m} {unit:?}"
            );
        }
        // One unit later it is still the same window (a one-unit window would have reset).
        h.at(quarter + unit.period_ns());
        assert!(
            !h.one(&c).await.allowed,
            "{m} {unit:?}: one window, not {m}"
        );
        // Over until the whole window ends, exactly.
        one_hit_is_over_exactly_until(h, &c, quarter, p - p / 4).await;
        h.at(start + p);
        let fresh = h.one(&c).await;
        assert_eq!(
            (fresh.allowed, fresh.remaining),
            (true, 1),
            "{m} {unit:?}: a new window"
        );
    }
}

pub async fn token_bucket_and_log_refill_over_the_whole_window<St: Store>(h: &Harness<St>) {
    if !h.needs(&[bucket(3), Algorithm::SlidingWindowLog]) {
        return;
    }
    for (m, unit) in WINDOWS {
        // A bucket of 3 refilled at 3 per window: one token every third of it.
        let l = limit_per(3, m, unit, bucket(3));
        let p = l.period_ns();
        let t = aligned(p) + 7 * US;
        let c = h.check(&format!("tb-{m}-{}", unit.name()), l);
        h.at(t);
        for left in [2, 1, 0] {
            let ok = h.one(&c).await;
            assert!(ok.allowed, "{m} {unit:?}");
            assert_eq!(ok.remaining, left, "{m} {unit:?}");
        }
        one_hit_is_over_exactly_until(h, &c, t, p / 3).await;

        // A log of 3 per window: the oldest entry leaves one whole window after it.
        let l = limit_per(3, m, unit, Algorithm::SlidingWindowLog);
        let c = h.check(&format!("swl-{m}-{}", unit.name()), l);
        h.at(t);
        for left in [2, 1, 0] {
            assert_eq!(h.one(&c).await.remaining, left, "{m} {unit:?}");
        }
        h.at(t + p - US);
        assert!(!h.one(&c).await.allowed, "{m} {unit:?}");
        one_hit_is_over_exactly_until(h, &c, t + S, p - S).await;
    }
}

pub async fn a_sliding_counter_of_several_units_weighs_the_whole_window<St: Store>(
    h: &Harness<St>,
) {
    for (m, unit) in WINDOWS {
        let l = limit_per(3, m, unit, Algorithm::SlidingWindowCounter);
        let p = l.period_ns();
        let start = aligned(p);
        let c = h.check(&format!("swc-{m}-{}", unit.name()), l);
        let quarter = start + p / 4;
        h.at(quarter);
        let three = Check {
            hits: 3,
            ..c.clone()
        };
        assert!(h.one(&three).await.allowed, "{m} {unit:?}");
        // The window is full: one hit fits in the next one once the 3 weigh ≤ 2, a third
        // of the way in.
        one_hit_is_over_exactly_until(h, &c, quarter, p - p / 4 + p / 3).await;
    }
}
