//! Sliding window counter: the current window's count plus the previous window's count
//! weighted by how much of it the sliding window still overlaps.
//!
//! At a fraction `f` into the current window the estimate is
//! `previous × (1 − f) + current`, and a request is admitted while the estimate plus its hits
//! stays within the limit. The weight is kept as an exact fraction (integer arithmetic over
//! nanoseconds), so there is no rounding drift. Memory: three integers.
//!
//! Accuracy: the estimate assumes the previous window's hits were spread evenly. Within one
//! fixed window it never admits more than the limit. Over a sliding window of one unit
//! ending at fraction `f`, it admits at most `limit + previous × f`, which is strictly below
//! twice the limit (at most `2 × limit − 1`) and is only approached when the whole previous
//! window's traffic came in a burst at its very end; for evenly spread traffic it is exact.

use super::{clamp_u32, Decision, Limit};

/// Counts of the current window and the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// Index of the current window (`now / period`).
    pub window: u64,
    /// Hits admitted in the previous window.
    pub previous: u64,
    /// Hits admitted in the current window.
    pub current: u64,
}

impl State {
    /// The estimate reaches zero when the current window's hits have fully slid out.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        let after = if self.current > 0 {
            2
        } else if self.previous > 0 {
            1
        } else {
            return 0;
        };
        self.window
            .saturating_add(after)
            .saturating_mul(limit.period_ns())
    }

    /// The state seen from window `window`: counts shift as windows pass.
    fn at_window(&self, window: u64) -> State {
        if self.window >= window {
            // Same window, or the clock went back: keep what was counted.
            *self
        } else if self.window + 1 == window {
            State {
                window,
                previous: self.current,
                current: 0,
            }
        } else {
            State {
                window,
                previous: 0,
                current: 0,
            }
        }
    }
}

/// Admits `hits` when the weighted estimate leaves room for them. `hits` of 0 is a
/// check-only probe: admitted when one hit would fit, counting nothing.
pub fn decide(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let period = limit.period_ns();
    let p = u128::from(period);
    let rpu = limit.rpu();
    let cur = state.at_window(now_ns / period);
    let start = cur.window.saturating_mul(period);
    let elapsed = now_ns.saturating_sub(start).min(period);
    // Everything below is scaled by the period so the weight stays an exact fraction.
    let weighted_previous = u128::from(cur.previous) * u128::from(period - elapsed);
    let estimate = weighted_previous + u128::from(cur.current) * p;
    let budget = u128::from(rpu) * p;
    let asked = u128::from(hits) * p;
    let remaining =
        |used: u128| clamp_u32(u64::try_from(budget.saturating_sub(used) / p).unwrap_or(0));
    if estimate + asked.max(p) <= budget {
        let next = State {
            current: cur.current.saturating_add(hits),
            ..cur
        };
        let decision = Decision {
            allowed: true,
            remaining: remaining(estimate + asked),
            reset_in_ns: next.idle_at(limit).saturating_sub(now_ns),
            grant: None,
        };
        return (decision, next);
    }
    // When one hit fits again. The estimate only falls as time passes, so this is the
    // first ns at which `estimate + period ≤ budget`, solved in integers: with `previous`
    // weighted by `period − e`, the condition `previous × (period − e) ≤ room` holds from
    // `e = period − ⌊room / previous⌋` on, exactly (`period − e` is a whole number).
    let retry_at = if estimate + p <= budget {
        // Only this request's cost was too much.
        now_ns
    } else if cur.current < rpu {
        // Later in this window. `previous` is not zero, or one hit would fit now.
        let room = u128::from(rpu - cur.current - 1) * p;
        let shrink = u64::try_from(room / u128::from(cur.previous.max(1))).unwrap_or(period);
        start.saturating_add(period - shrink.min(period))
    } else {
        // In the next window the current count becomes the weighted one (with a limit of
        // one, it must slide out entirely: the window after).
        let room = u128::from(rpu - 1) * p;
        let shrink = u64::try_from(room / u128::from(cur.current.max(1))).unwrap_or(period);
        start
            .saturating_add(period)
            .saturating_add(period - shrink.min(period))
    };
    let decision = Decision {
        allowed: false,
        remaining: remaining(estimate),
        reset_in_ns: retry_at.saturating_sub(now_ns),
        grant: None,
    };
    (decision, cur)
}

/// Counts `hits` whether they fit or not (a stream-end charge, see [`super::charge`]):
/// the current count may pass the limit, by at most one limit ([`Limit::max_count`]), and
/// the estimate stays over until enough of it has slid out: with a whole limit of debt,
/// about half way into the next window (with a limit of 1, to its end). When they fit,
/// exactly [`decide`].
pub fn charge(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let (decision, cur) = decide(state, now_ns, limit, hits);
    if decision.allowed {
        return (decision, cur);
    }
    // Denied, `decide` answered the state as of the current window, unchanged.
    let next = State {
        current: cur.current.saturating_add(hits).min(limit.max_count()),
        ..cur
    };
    // Over now: the time until one hit fits is what a one-hit request would be told.
    let (one_hit, _) = decide(&next, now_ns, limit, 1);
    let decision = Decision {
        allowed: false,
        remaining: 0,
        reset_in_ns: one_hit.reset_in_ns,
        grant: None,
    };
    (decision, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::test_support::limit;
    use crate::algorithm::{Algorithm, Unit};

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn step(s: &mut State, now: u64, l: &Limit, hits: u64) -> Decision {
        let (d, n) = decide(s, now, l, hits);
        *s = n;
        d
    }

    #[test]
    fn the_previous_window_weighs_by_overlap() {
        let l = limit(10, Unit::Second, Algorithm::SlidingWindowCounter);
        let mut s = State::default();
        assert!(step(&mut s, 5 * S, &l, 10).allowed);
        // A quarter into the next window, 7.5 of the 10 still count: 2 more fit, not 3.
        let d = step(&mut s, 6 * S + S / 4, &l, 3);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 2);
        assert_eq!(
            d.reset_in_ns, 0,
            "one hit fits now: only a cost of 3 is too much"
        );
        let d = step(&mut s, 6 * S + S / 4, &l, 2);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_in_ns, 8 * S - (6 * S + S / 4));
        // 7.5 + 2 + 1 > 10: one more hit fits once the weight is 7/10, 0.3 s in.
        let d = step(&mut s, 6 * S + S / 4, &l, 1);
        assert!(!d.allowed);
        assert_eq!(d.reset_in_ns, S * 3 / 10 - S / 4);
        assert!(!step(&mut s, 6 * S + S * 3 / 10 - 1, &l, 1).allowed);
        assert!(step(&mut s, 6 * S + S * 3 / 10, &l, 1).allowed);
    }

    #[test]
    fn retry_in_the_next_window_when_the_current_is_full() {
        let l = limit(4, Unit::Second, Algorithm::SlidingWindowCounter);
        let mut s = State::default();
        assert!(step(&mut s, 0, &l, 4).allowed);
        let d = step(&mut s, S / 2, &l, 1);
        assert!(!d.allowed);
        // Next window: 4 × (1 − e) ≤ 3 ⇒ e ≥ 0.25 s.
        assert_eq!(d.reset_in_ns, S + S / 4 - S / 2);
        assert!(!step(&mut s, S + S / 4 - 1, &l, 1).allowed);
        assert!(step(&mut s, S + S / 4, &l, 1).allowed);
    }

    #[test]
    fn a_charge_passes_the_limit_and_weighs_on_the_next_window() {
        let l = limit(10, Unit::Second, Algorithm::SlidingWindowCounter);
        let mut s = State::default();
        assert!(step(&mut s, 5 * S, &l, 6).allowed);
        let (d, n) = charge(&s, 5 * S + S / 2, &l, 9);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(n.current, 15, "counted though it did not fit");
        // Next window: 15 weighted by what is left of it; one hit fits once 15 x (1 - f)
        // <= 9, at f = 0.4.
        assert_eq!(d.reset_in_ns, S / 2 + 2 * S / 5);
        s = n;
        assert!(!step(&mut s, 6 * S + 2 * S / 5 - 1, &l, 1).allowed);
        assert!(step(&mut s, 6 * S + 2 * S / 5, &l, 1).allowed);
    }

    #[test]
    fn a_charge_owes_at_most_one_limit() {
        let l = limit(10, Unit::Second, Algorithm::SlidingWindowCounter);
        let (d, n) = charge(&State::default(), 5 * S, &l, u64::from(u32::MAX));
        assert_eq!(n.current, 20, "the limit and one limit of debt");
        // Next window: 20 x (1 - e) <= 9 from e = 0.55 s on.
        assert_eq!(d.reset_in_ns, S + 550 * MS);
        assert!(!decide(&n, 6 * S + 550 * MS - 1, &l, 1).0.allowed);
        assert!(decide(&n, 6 * S + 550 * MS, &l, 1).0.allowed);
        // A limit of one: the doubled count must slide out entirely, at the next end.
        let one = limit(1, Unit::Second, Algorithm::SlidingWindowCounter);
        let (d, n) = charge(&State::default(), 5 * S, &one, u64::from(u32::MAX));
        assert_eq!((n.current, d.reset_in_ns), (2, 2 * S));
    }

    #[test]
    fn old_windows_are_forgotten() {
        let l = limit(1, Unit::Second, Algorithm::SlidingWindowCounter);
        let mut s = State::default();
        assert!(step(&mut s, 0, &l, 1).allowed);
        assert_eq!(s.idle_at(&l), 2 * S);
        assert!(step(&mut s, 2 * S, &l, 1).allowed);
    }
}
