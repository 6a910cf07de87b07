//! Token bucket as GCRA (generic cell rate algorithm), exact with fractional tokens.
//!
//! A bucket holds `burst` tokens and earns `requests_per_unit` tokens per unit, one request
//! costing one token per hit. GCRA keeps a single number, the *theoretical arrival time*
//! (TAT): the instant at which the bucket would be full again. A request pushes the TAT one
//! token-interval per hit into the future and is admitted while the TAT stays within
//! `burst` token-intervals of now.
//!
//! To stay exact when a token-interval is not a whole number of nanoseconds (3 per second is
//! 333,333,333.3 ns), time is counted in *scaled units*: one nanosecond is `requests_per_unit`
//! units, so one token is exactly `period_ns` units. Nothing is rounded: no interval of
//! length `t` admits more than `burst + requests_per_unit × t / unit` hits, and a client that
//! sends request `k` no earlier than `k × unit / requests_per_unit` is never rejected (with a
//! burst of one, only when that interval is a whole number of nanoseconds: a request that
//! comes late by a fraction of a nanosecond finds the bucket already full and loses it).
//! Memory: one `u128`.
//!
//! A charge (a cost known after the response, [`charge`]) may take more tokens than are
//! there: the bucket goes below zero, but never below `−burst`. The TAT is at most
//! `2 × burst` token-intervals ahead of now, whatever was charged, and a state further
//! ahead (written before this cap, or seen from a clock that went back) reads as exactly
//! that far: after any charge one hit fits again within `burst + 1` token-intervals.

use super::{clamp_u32, div_ceil_u128, Decision, Limit};
use std::num::NonZeroU32;

/// The theoretical arrival time in scaled units (`ns × requests_per_unit`); 0 means full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// Theoretical arrival time, scaled.
    pub tat: u128,
}

impl State {
    /// The bucket is full (as good as fresh) once the TAT is reached.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        div_ceil_u128(self.tat, u128::from(limit.rpu()))
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
    let rate = u128::from(limit.rpu());
    let token = u128::from(limit.period_ns());
    let now = u128::from(now_ns) * rate;
    let capacity = u128::from(burst.get()) * token;
    let cost = u128::from(hits).saturating_mul(token);
    let start = start(state, now, capacity);
    let new_tat = start.saturating_add(cost);
    let ahead = new_tat - now;
    let probe = if hits == 0 { ahead + token } else { ahead };
    if probe <= capacity {
        let decision = Decision {
            allowed: true,
            remaining: whole_tokens(capacity - ahead, token),
            reset_in_ns: div_ceil_u128(ahead, rate),
            grant: None,
        };
        (decision, State { tat: new_tat })
    } else {
        let debt = start - now;
        // One hit fits once the debt plus one token is within the capacity: after
        // `debt + token - capacity` scaled units, rounded up to whole ns so that waiting
        // that long is enough (and one ns less is not). 0 when one token is there now.
        let one_hit_over = (debt + token).saturating_sub(capacity);
        let decision = Decision {
            allowed: false,
            remaining: whole_tokens(capacity.saturating_sub(debt), token),
            reset_in_ns: div_ceil_u128(one_hit_over, rate),
            grant: None,
        };
        (decision, *state)
    }
}

/// Takes `hits` tokens whether they are there or not (a stream-end charge, see
/// [`super::charge`]): the bucket goes into debt, the TAT moving forward by the whole cost,
/// and later requests wait until the debt is refilled. When they fit, exactly [`decide`].
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
    let rate = u128::from(limit.rpu());
    let token = u128::from(limit.period_ns());
    let now = u128::from(now_ns) * rate;
    let capacity = u128::from(burst.get()) * token;
    let cost = u128::from(hits).saturating_mul(token);
    // Into debt by the whole cost, but never more than one burst below zero.
    let new_tat = start(state, now, capacity)
        .saturating_add(cost)
        .min(deepest(now, capacity));
    // The debt is now `new_tat - now`, more than the capacity: one hit fits once it has
    // shrunk to `capacity - token`, as in `decide`.
    let one_hit_over = (new_tat - now + token).saturating_sub(capacity);
    let decision = Decision {
        allowed: false,
        remaining: 0,
        reset_in_ns: div_ceil_u128(one_hit_over, rate),
        grant: None,
    };
    (decision, State { tat: new_tat })
}

/// Where a request starts from: the TAT, or now if it has passed (the bucket has been full
/// since then), and at most [`deepest`] (one burst of debt).
fn start(state: &State, now: u128, capacity: u128) -> u128 {
    state.tat.max(now).min(deepest(now, capacity))
}

/// The furthest a TAT may be ahead of `now`: an empty bucket (`capacity` ahead) owing one
/// more burst.
fn deepest(now: u128, capacity: u128) -> u128 {
    now.saturating_add(capacity.saturating_mul(2))
}

fn whole_tokens(units: u128, token: u128) -> u32 {
    clamp_u32(u64::try_from(units / token).unwrap_or(u64::MAX))
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
