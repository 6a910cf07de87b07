//! Fixed window: one counter per window of one unit, windows aligned to the Unix epoch.
//!
//! This is what envoyproxy/ratelimit and Limitador do. Within one window it is exact; a
//! client that spends its limit at the end of one window and again at the start of the next
//! gets up to twice the limit within one unit of time. Memory: one window index and one count.

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
    /// When the window ends, the count means nothing any more.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        self.window
            .saturating_add(1)
            .saturating_mul(limit.period_ns())
    }
}

/// Admits `hits` when they fit in what is left of the current window. `hits` of 0 is a
/// check-only probe: admitted when one hit would fit, counting nothing.
pub fn decide(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let period = limit.period_ns();
    let window = now_ns / period;
    // A state from a later window means the clock went back: keep counting in that window
    // rather than forgetting what was admitted.
    let current = if state.window >= window {
        *state
    } else {
        State { window, count: 0 }
    };
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
        // One hit is admitted again when the window ends (a new window starts empty, and
        // every limit admits at least one), or now if this request only failed on its cost.
        let one_hit_fits = current.count < limit.rpu();
        let decision = Decision {
            allowed: false,
            remaining: clamp_u32(limit.rpu().saturating_sub(current.count)),
            reset_in_ns: if one_hit_fits { 0 } else { reset_in_ns },
            grant: None,
        };
        (decision, current)
    }
}

/// Counts `hits` whether they fit or not (a stream-end charge, see [`super::charge`]):
/// the count may pass the limit, and the window then stays over until it ends. When they
/// fit, exactly [`decide`].
pub fn charge(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, State) {
    let (decision, current) = decide(state, now_ns, limit, hits);
    if decision.allowed {
        return (decision, current);
    }
    // Denied, `decide` answered the state as of the current window, unchanged.
    let next = State {
        window: current.window,
        count: current
            .count
            .saturating_add(hits)
            .min(super::MAX_CHARGED_COUNT),
    };
    // Over the limit now, so one hit fits only once the window ends.
    let decision = Decision {
        allowed: false,
        remaining: 0,
        reset_in_ns: next.idle_at(limit).saturating_sub(now_ns),
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
        assert!(
            decide(&s, 6 * S, &l, 1).0.allowed,
            "the debt ends with the window"
        );
        let (d, _) = charge(&State::default(), 5 * S, &l, 10);
        assert!(d.allowed, "a charge that fits is an admission");
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn a_clock_going_back_keeps_the_count() {
        let l = limit(1, Unit::Second, Algorithm::FixedWindow);
        let (_, s) = decide(&State::default(), 5 * S, &l, 1);
        let (d, _) = decide(&s, 4 * S, &l, 1);
        assert!(!d.allowed);
    }
}
