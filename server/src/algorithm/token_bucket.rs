//! Token bucket as GCRA (generic cell rate algorithm), exact with fractional tokens: the
//! math both sides share ([`floodgate_common::gcra`]) in this server's units.
//!
//! A bucket holds `burst` tokens and earns `requests_per_unit` tokens per unit, one request
//! costing one token per hit. GCRA keeps a single number, the *theoretical arrival time*
//! (TAT): the instant at which the bucket would be full again. In the shared math's terms,
//! one nanosecond is `requests_per_unit` units and one token is `period_ns` units, so
//! nothing is rounded: no interval of length `t` admits more than
//! `burst + requests_per_unit × t / unit` hits, and a client that sends request `k` no
//! earlier than `k × unit / requests_per_unit` is never rejected (with a burst of one, only
//! when that interval is a whole number of nanoseconds: a request that comes late by a
//! fraction of a nanosecond finds the bucket already full and loses it). Memory: one `u128`.
//!
//! What this module adds: `hits` of 0 is a check-only probe; a denial answers for one hit
//! (the `OVER_LIMIT` duration an over-limit cache trusts); and a TAT further ahead than the
//! debt cap reads as exactly the cap ([`PastCap::Clamped`]), as the Redis script reads it.
//!
//! A charge (a cost known after the response, [`charge`]) may take more tokens than are
//! there: the bucket goes below zero, but never below `−burst`. The TAT is at most
//! `2 × burst` token-intervals ahead of now, whatever was charged, and a state further
//! ahead (written before this cap, or seen from a clock that went back) reads as exactly
//! that far: after any charge one hit fits again within `burst + 1` token-intervals.

use super::{Decision, Limit};
use floodgate_common::gcra::{self, PastCap, Shape, Take, Tat};
use std::num::{NonZeroU32, NonZeroU64};

/// The theoretical arrival time in scaled units (`ns × requests_per_unit`); 0 means full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// Theoretical arrival time, scaled.
    pub tat: u128,
}

impl State {
    /// The bucket is full (as good as fresh) once the TAT is reached.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        gcra::full_at_ns(Tat(self.tat), limit.rpu()).unwrap_or(u64::MAX)
    }
}

/// A bucket of `burst` under `limit` in the shared math's terms.
#[inline]
fn shape(limit: &Limit, burst: NonZeroU32) -> Shape {
    // A window is at least one second (the unit and its multiplier are never 0).
    let token = NonZeroU64::new(limit.period_ns()).unwrap_or(NonZeroU64::MIN);
    Shape::new(burst, limit.rpu(), token, PastCap::Clamped)
}

/// A denial: what is left, and when one hit fits (0: now; the rate is never 0).
fn denied(shape: Shape, debt: u128) -> Decision {
    Decision {
        allowed: false,
        remaining: shape.whole_tokens(shape.burst().saturating_sub(debt)),
        reset_in_ns: shape.wait_ns(debt, 1).unwrap_or(u64::MAX),
        grant: None,
    }
}

/// Takes `hits` tokens from a bucket of `burst` tokens when they are there. `hits` of 0 is
/// a check-only probe: admitted when one token is there, taking none.
pub fn decide(
    state: &State,
    now_ns: u64,
    limit: &Limit,
    burst: NonZeroU32,
    hits: u64,
) -> (Decision, State) {
    let shape = shape(limit, burst);
    let state_tat = Tat(state.tat);
    // A probe is refused as a take of one hit.
    let (take, asked) = match NonZeroU64::new(hits) {
        Some(hits) => (gcra::take(state_tat, now_ns, shape, hits), hits),
        None => (gcra::probe(state_tat, now_ns, shape), NonZeroU64::MIN),
    };
    match take {
        Take::Admitted { tat, ahead } => {
            let decision = Decision {
                allowed: true,
                remaining: shape.whole_tokens(shape.burst() - ahead),
                reset_in_ns: shape.nanos_ceil(ahead).unwrap_or(u64::MAX),
                grant: None,
            };
            (decision, State { tat: tat.0 })
        }
        Take::Refused { ahead } => (denied(shape, shape.refusal(ahead, asked).debt), *state),
    }
}

/// Takes `hits` tokens whether they are there or not (a stream-end charge, see
/// [`super::charge`]): the bucket goes into debt, the TAT moving forward by the whole cost
/// (never more than one burst below zero), and later requests wait until the debt is
/// refilled. When they fit, exactly [`decide`].
pub fn charge(
    state: &State,
    now_ns: u64,
    limit: &Limit,
    burst: NonZeroU32,
    hits: u64,
) -> (Decision, State) {
    let (decision, next) = decide(state, now_ns, limit, burst, hits);
    if decision.allowed {
        return (decision, next);
    }
    let shape = shape(limit, burst);
    let charged = gcra::charge(Tat(state.tat), now_ns, shape, hits);
    let decision = Decision {
        remaining: 0,
        ..denied(shape, charged.ahead)
    };
    (decision, State { tat: charged.tat.0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::test_support::limit;
    use crate::algorithm::{Algorithm, Unit};

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn bucket(rpu: u32, burst: u32) -> (Limit, NonZeroU32) {
        let burst = NonZeroU32::new(burst).unwrap();
        (
            limit(rpu, Unit::Second, Algorithm::TokenBucket { burst }),
            burst,
        )
    }

    #[test]
    fn a_full_bucket_gives_its_burst_then_refills_at_the_rate() {
        let (l, b) = bucket(2, 4);
        let mut s = State::default();
        let t0 = 100 * S;
        for left in [3, 2, 1, 0] {
            let (d, n) = decide(&s, t0, &l, b, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
            s = n;
        }
        let (d, _) = decide(&s, t0, &l, b, 1);
        assert!(!d.allowed);
        assert_eq!(
            d.reset_in_ns,
            S / 2,
            "one token comes back in half a second"
        );
        let (d, _) = decide(&s, t0 + S / 2 - 1, &l, b, 1);
        assert!(!d.allowed, "not a nanosecond early");
        let (d, _) = decide(&s, t0 + S / 2, &l, b, 1);
        assert!(d.allowed);
        assert_eq!(d.reset_in_ns, 2 * S, "four tokens short of full at 2/s");
    }

    #[test]
    fn fractional_intervals_are_exact() {
        // 3 per second: tokens come back every 333,333,333.33 ns.
        let (l, b) = bucket(3, 1);
        let (_, s) = decide(&State::default(), 0, &l, b, 1);
        let (d, _) = decide(&s, 333_333_333, &l, b, 1);
        assert!(!d.allowed);
        assert_eq!(d.reset_in_ns, 1, "rounded up: waiting that long is enough");
        let (d, s) = decide(&s, 333_333_334, &l, b, 1);
        assert!(d.allowed);
        // With one token of room, the 0.67 ns this request came late are not credited.
        let (d, _) = decide(&s, 666_666_667, &l, b, 1);
        assert!(!d.allowed);
        assert_eq!(d.reset_in_ns, 1);
        // With two, a client at exactly the rate is never turned away.
        let (l, b) = bucket(3, 2);
        let mut s = State::default();
        for now in [0, 333_333_334, 666_666_667, S, S + 333_333_334] {
            let (d, n) = decide(&s, now, &l, b, 1);
            assert!(d.allowed, "at {now}");
            s = n;
        }
    }

    #[test]
    fn a_cost_above_the_burst_never_fits() {
        let (l, b) = bucket(10, 5);
        let (d, s) = decide(&State::default(), S, &l, b, 6);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 5);
        assert_eq!(d.reset_in_ns, 0, "already full");
        assert_eq!(s, State::default());
    }

    #[test]
    fn a_charge_puts_the_bucket_in_debt_until_it_refills() {
        // 10 per second, burst 10: 3 tokens left, a charge of 8 leaves a debt of 5.
        let (l, b) = bucket(10, 10);
        let (_, s) = decide(&State::default(), S, &l, b, 7);
        let (d, s) = charge(&s, S, &l, b, 8);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_in_ns, 600 * MS, "5 tokens of debt and one to spend");
        assert!(!decide(&s, S + 600 * MS - 1, &l, b, 1).0.allowed);
        assert!(decide(&s, S + 600 * MS, &l, b, 1).0.allowed);
        assert_eq!(
            s.idle_at(&l),
            S + 1_500 * MS,
            "full once 15 tokens came back"
        );
        let (d, _) = charge(&s, S, &l, b, 1);
        assert_eq!(d.reset_in_ns, 700 * MS, "more debt, later");
        let (d, _) = charge(&State::default(), S, &l, b, 10);
        assert!(d.allowed, "a charge that fits is an admission");
    }

    #[test]
    fn a_charge_owes_at_most_one_burst() {
        // 10 per second, burst 10: a charge of u32::MAX tokens owes 10, so one hit fits
        // once 11 tokens have come back, and a second charge at once changes nothing.
        let (l, b) = bucket(10, 10);
        let (d, s) = charge(&State::default(), S, &l, b, u64::from(u32::MAX));
        assert_eq!((d.allowed, d.remaining), (false, 0));
        assert_eq!(d.reset_in_ns, 1_100 * MS);
        assert_eq!(s.idle_at(&l), S + 2 * S, "full once 20 tokens came back");
        let (again, s2) = charge(&s, S, &l, b, u64::from(u32::MAX));
        assert_eq!((again, s2), (d, s));
        // Half a second later 5 tokens are owed: a charge of 1 owes 6, a huge one 10 again.
        let (d, _) = charge(&s, S + S / 2, &l, b, 1);
        assert_eq!(d.reset_in_ns, 700 * MS);
        let (d, _) = charge(&s, S + S / 2, &l, b, u64::from(u32::MAX));
        assert_eq!(d.reset_in_ns, 1_100 * MS);
        assert!(!decide(&s, S + 1_100 * MS - 1, &l, b, 1).0.allowed);
        assert!(decide(&s, S + 1_100 * MS, &l, b, 1).0.allowed);
        // A state deeper in debt (from before the cap, or a clock gone back) reads as one
        // burst of debt.
        let deep = State {
            tat: u128::from(1_000 * S) * 10,
        };
        let (d, _) = decide(&deep, S, &l, b, 1);
        assert_eq!((d.allowed, d.reset_in_ns), (false, 1_100 * MS));
    }

    #[test]
    fn idle_once_full_again() {
        let (l, b) = bucket(1, 1);
        let (_, s) = decide(&State::default(), 10 * S, &l, b, 1);
        assert_eq!(s.idle_at(&l), 11 * S);
    }
}
