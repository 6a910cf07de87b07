//! Fixed window: one counter per window of one unit, windows aligned to the Unix epoch.
//!
//! This is what envoyproxy/ratelimit and Limitador do. Within one window it is exact; a
//! client that spends its limit at the end of one window and again at the start of the next
//! gets up to twice the limit within one unit of time. Memory: one window index and one count.
//!
//! A charge ([`charge`]) may count past the limit, up to one limit of debt (a count of at
//! most twice the limit). The debt carries into the next window, which starts with what
//! was counted beyond the limit: a charge is paid for, up to one limit, whenever in the
//! window it comes, instead of being forgotten at the window's end. So a charge blocks at
//! most until the end of the next window, and admissions alone never carry anything (they
//! never pass the limit).

use super::{clamp_u32, Decision, Limit};

/// The window a count belongs to and the hits admitted in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// Window index: `now / period`.
    pub window: u64,
    /// Hits admitted in that window.
    pub count: u64,
}

impl State {
    /// When the window ends the count means nothing any more, or when the next one ends if
    /// it carries debt into it.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        let windows = if self.count > limit.rpu() { 2 } else { 1 };
        self.window
            .saturating_add(windows)
            .saturating_mul(limit.period_ns())
    }

    /// The state seen from window `window`: the next window starts with the debt (what was
    /// counted beyond the limit, at most one limit), a later one empty. A state from a
    /// later window means the clock went back: keep counting in that window rather than
    /// forgetting what was admitted.
    fn at_window(&self, window: u64, limit: &Limit) -> State {
        if self.window >= window {
            *self
        } else if self.window.saturating_add(1) == window {
            State {
                window,
                count: carried(self.count, limit),
            }
        } else {
            State { window, count: 0 }
        }
    }
}

/// What a window's `count` carries into the next one: its debt, at most one limit.
fn carried(count: u64, limit: &Limit) -> u64 {
    count.saturating_sub(limit.rpu()).min(limit.rpu())
}

/// Admits `hits` when they fit in what is left of the current window. `hits` of 0 is a
/// check-only probe: admitted when one hit would fit, counting nothing.
pub fn decide(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let period = limit.period_ns();
    let current = state.at_window(now_ns / period, limit);
    let ends_at = current.window.saturating_add(1).saturating_mul(period);
    let reset_in_ns = ends_at.saturating_sub(now_ns);
    let after = current.count.saturating_add(hits);
    if current.count.saturating_add(hits.max(1)) <= limit.rpu() {
        let next = State {
            window: current.window,
            count: after,
        };
        let decision = Decision {
            allowed: true,
            remaining: clamp_u32(limit.rpu() - after),
            reset_in_ns,
            grant: None,
        };
        (decision, next)
    } else {
        // One hit is admitted now if this request only failed on its cost; else when the
        // window ends, if the next one starts with room (every limit admits at least one);
        // else (a whole limit of debt carried into it) when the next one ends.
        let reset_in_ns = if current.count < limit.rpu() {
            0
        } else if carried(current.count, limit) < limit.rpu() {
            reset_in_ns
        } else {
            reset_in_ns.saturating_add(period)
        };
        let decision = Decision {
            allowed: false,
            remaining: clamp_u32(limit.rpu().saturating_sub(current.count)),
            reset_in_ns,
            grant: None,
        };
        (decision, current)
    }
}

/// Counts `hits` whether they fit or not (a stream-end charge, see [`super::charge`]):
/// the count may pass the limit, by at most one limit ([`Limit::max_count`]), and the debt
/// carries into the next window. When they fit, exactly [`decide`].
pub fn charge(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let (decision, current) = decide(state, now_ns, limit, hits);
    if decision.allowed {
        return (decision, current);
    }
    // Denied, `decide` answered the state as of the current window, unchanged.
    let next = State {
        window: current.window,
        count: current.count.saturating_add(hits).min(limit.max_count()),
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

    #[test]
    fn admits_the_limit_then_denies_until_the_window_ends() {
        let l = limit(3, Unit::Second, Algorithm::FixedWindow);
        let mut s = State::default();
        let now = 10 * S + S / 4;
        for left in [2, 1, 0] {
            let (d, n) = decide(&s, now, &l, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
            assert_eq!(d.reset_in_ns, 3 * S / 4);
            s = n;
        }
        let (d, n) = decide(&s, now, &l, 1);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_in_ns, 3 * S / 4);
        assert_eq!(n, s, "a denial consumes nothing");
        let (d, _) = decide(&s, 11 * S, &l, 1);
        assert!(d.allowed, "a new window starts empty");
        assert_eq!(d.remaining, 2);
    }

    #[test]
    fn hits_count_as_a_whole() {
        let l = limit(5, Unit::Minute, Algorithm::FixedWindow);
        let (d, s) = decide(&State::default(), 0, &l, 4);
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
        let (d, _) = decide(&s, 1, &l, 2);
        assert!(!d.allowed, "2 more do not fit in 1");
        assert_eq!(d.remaining, 1);
        let (d, _) = decide(&State::default(), 0, &l, 6);
        assert!(!d.allowed, "more than the limit never fits");
    }

    #[test]
    fn a_charge_passes_the_limit_and_stays_over_until_the_window_ends() {
        let l = limit(10, Unit::Second, Algorithm::FixedWindow);
        let (_, s) = decide(&State::default(), 5 * S, &l, 8);
        let (d, s) = charge(&s, 5 * S + S / 4, &l, 5);
        let over = Decision {
            allowed: false,
            remaining: 0,
            reset_in_ns: 3 * S / 4,
            grant: None,
        };
        assert_eq!(d, over);
        assert_eq!(s.count, 13, "counted though it did not fit");
        let (d, _) = decide(&s, 6 * S - 1, &l, 1);
        assert!(!d.allowed);
        assert_eq!(d.reset_in_ns, 1);
        let (d, _) = decide(&s, 6 * S, &l, 1);
        assert!(d.allowed, "one hit fits when the window ends");
        assert_eq!(d.remaining, 6, "the next window starts with the debt of 3");
        assert_eq!(s.idle_at(&l), 7 * S, "the debt lasts into the next window");
        let (d, _) = charge(&State::default(), 5 * S, &l, 10);
        assert!(d.allowed, "a charge that fits is an admission");
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn a_charge_owes_at_most_one_limit() {
        let l = limit(10, Unit::Second, Algorithm::FixedWindow);
        let (d, s) = charge(&State::default(), 5 * S + S / 4, &l, u64::from(u32::MAX));
        assert_eq!(s.count, 20, "the limit and one limit of debt");
        assert_eq!(
            d.reset_in_ns,
            S + 3 * S / 4,
            "the next window starts full: until it ends"
        );
        assert!(!decide(&s, 7 * S - 1, &l, 1).0.allowed);
        let (d, _) = decide(&s, 7 * S, &l, 1);
        assert_eq!((d.allowed, d.remaining), (true, 9), "nothing carried twice");
        let (d, n) = charge(&s, 6 * S, &l, 1);
        assert_eq!(n.count, 11, "the carried debt and this charge");
        assert_eq!(d.reset_in_ns, S);
        let (d, n) = charge(&s, 6 * S, &l, u64::from(u32::MAX));
        assert_eq!(
            n.count, 20,
            "in the next window, its own debt is capped alike"
        );
        assert_eq!(d.reset_in_ns, 2 * S);
    }

    #[test]
    fn a_clock_going_back_keeps_the_count() {
        let l = limit(1, Unit::Second, Algorithm::FixedWindow);
        let (_, s) = decide(&State::default(), 5 * S, &l, 1);
        let (d, _) = decide(&s, 4 * S, &l, 1);
        assert!(!d.allowed);
    }
}
