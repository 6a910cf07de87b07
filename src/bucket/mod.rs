//! The filter's token buckets: capacity and refill per second, on the GCRA math both
//! sides share ([`floodgate_common::gcra`]).
//!
//! A bucket holds `capacity` tokens and earns `refill_per_second` tokens per second. GCRA
//! stores that state as a single number, the *theoretical arrival time* (TAT): the moment
//! at which the bucket would be full again. What this module adds to the shared math is
//! only the filter's units and habits:
//!
//! - time in *scaled units* where one nanosecond is worth `rate_micro` units (the rate in
//!   millionths of a token per second), so one token is always exactly
//!   [`UNITS_PER_TOKEN`] units whatever the rate. With a rate of zero, time stops (every
//!   instant scales to 0) and the bucket becomes a plain counter of `capacity` tokens;
//! - a cost of 0 counts as 1, as Envoy's own `hits_addend` (the shared math would read it
//!   as a check-only probe, which the filter never sends);
//! - a TAT past the debt cap is kept as it is ([`PastCap::Kept`]);
//! - a denial answers for the same request (`retry-after`), and eagerly: every rejection
//!   shows its fields.
//!
//! Nothing is rounded: a client that waits `k / rate` seconds before its `k`-th request is
//! never rejected, and no interval of length `t` ever admits more than
//! `capacity + rate × t` tokens (`floodgate_common::gcra`'s property tests, on these units).

use floodgate_common::gcra::{self, PastCap, Refusal, Shape, Take};
use std::num::{NonZeroU32, NonZeroU64};

pub use floodgate_common::gcra::Tat;

/// Scaled time units per token: 10^6 (micro-tokens) × 10^9 (nanoseconds per second).
pub const UNITS_PER_TOKEN: u128 = 1_000_000_000_000_000;

/// [`UNITS_PER_TOKEN`] as the shared math's token value (10^15 < 2^50).
const TOKEN: NonZeroU64 = match NonZeroU64::new(1_000_000_000_000_000) {
    Some(token) => token,
    None => NonZeroU64::MIN,
};

/// The largest accepted refill rate in millionths of a token per second (10^9 tokens/s),
/// which keeps every scaled value well inside `u128`.
pub const MAX_RATE_MICRO: u64 = 1_000_000_000_000_000;

/// A bucket's shape: how many tokens it holds and how fast it refills.
///
/// Built only by [`Quota::new`], which rejects a zero capacity, so every quota in the
/// program is usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    capacity: u32,
    rate_micro: u64,
}

impl Quota {
    /// A quota of `capacity` tokens refilled at `rate_micro` millionths of a token per
    /// second. Returns `None` for a zero capacity or a rate above [`MAX_RATE_MICRO`].
    pub fn new(capacity: u32, rate_micro: u64) -> Option<Quota> {
        (capacity > 0 && rate_micro <= MAX_RATE_MICRO).then_some(Quota {
            capacity,
            rate_micro,
        })
    }

    /// The burst size in tokens.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The refill rate in millionths of a token per second (0: never refills).
    pub fn rate_micro(&self) -> u64 {
        self.rate_micro
    }

    /// The bucket in the shared math's terms: a nanosecond is `rate_micro` units, a token
    /// 10^15. Built where it is used, from constants, so it costs nothing to keep.
    #[inline]
    fn shape(&self) -> Shape {
        // Never 0: `Quota::new` refuses it.
        let capacity = NonZeroU32::new(self.capacity).unwrap_or(NonZeroU32::MIN);
        Shape::new(capacity, self.rate_micro, TOKEN, PastCap::Kept)
    }

    /// `now_ns` in scaled units. With no refill, time does not move.
    #[cfg(test)]
    fn scaled(&self, now_ns: u64) -> u128 {
        self.shape().scaled(now_ns)
    }
}

/// The outcome of asking a bucket for tokens at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The tokens were available; store `new_state`. What the bucket has left is kept as
    /// scaled units and turned into tokens and time only when asked
    /// ([`Decision::remaining`], [`Decision::full_in_ns`], [`Decision::next_token_in_ns`]):
    /// each is a 128-bit division, and most admitted requests show none of them.
    Allow {
        /// The state to write back.
        new_state: Tat,
        /// Scaled units the bucket is short of full after this request.
        ahead: u128,
        /// The bucket's shape.
        quota: Quota,
    },
    /// Not enough tokens; the state is unchanged.
    Deny {
        /// Exact nanoseconds after which the same request would be admitted
        /// (`None`: never, the bucket does not refill or the cost exceeds the capacity).
        retry_in_ns: Option<u64>,
        /// Whole tokens available now.
        remaining: u32,
        /// Nanoseconds until the bucket is full again (`None`: never refills).
        full_in_ns: Option<u64>,
        /// Scaled units the bucket must earn for one more whole token (0: it is full).
        to_next_token: u128,
    },
}

impl Decision {
    /// Whether the request was admitted.
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// Whole tokens left (after the request when admitted).
    pub fn remaining(&self) -> u32 {
        match *self {
            Decision::Allow { ahead, quota, .. } => {
                let shape = quota.shape();
                shape.whole_tokens(shape.burst() - ahead)
            }
            Decision::Deny { remaining, .. } => remaining,
        }
    }

    /// Nanoseconds until the bucket is full again (`None`: never refills).
    pub fn full_in_ns(&self) -> Option<u64> {
        match *self {
            Decision::Allow { ahead, quota, .. } => quota.shape().nanos_ceil(ahead),
            Decision::Deny { full_in_ns, .. } => full_in_ns,
        }
    }

    /// Nanoseconds until one more whole token is available in a bucket of `quota`: the
    /// draft-10 `t` ("time until additional quota is made available"). `None`: never (no
    /// refill, or full). Computed here, not in [`decide`], so that the division it takes
    /// is paid only by replies that show it.
    pub fn next_token_in_ns(&self, quota: Quota) -> Option<u64> {
        let to_next_token = match *self {
            Decision::Allow { ahead, quota, .. } => {
                quota.shape().to_next_token(ahead, self.remaining())
            }
            Decision::Deny { to_next_token, .. } => to_next_token,
        };
        if to_next_token == 0 {
            return None;
        }
        quota.shape().nanos_ceil(to_next_token)
    }
}

/// Decides whether `cost` tokens can be taken from a bucket in state `state` at `now_ns`.
///
/// Pure: the caller stores `new_state` only when it gets [`Decision::Allow`].
/// A `cost` of zero is treated as one, as in Envoy's own `hits_addend`.
pub fn decide(state: Tat, now_ns: u64, quota: Quota, cost: u32) -> Decision {
    let shape = quota.shape();
    let hits = NonZeroU64::from(NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN));
    match gcra::take(state, now_ns, shape, hits) {
        Take::Admitted { tat, ahead } => Decision::Allow {
            new_state: tat,
            ahead,
            quota,
        },
        Take::Refused { ahead } => {
            let Refusal { debt, short } = shape.refusal(ahead, hits);
            let remaining = shape.whole_tokens(shape.burst().saturating_sub(debt));
            Decision::Deny {
                retry_in_ns: shape.retry_ns(short, hits.get()),
                remaining,
                full_in_ns: shape.nanos_ceil(debt),
                to_next_token: shape.to_next_token(debt, remaining),
            }
        }
    }
}

/// Nanoseconds until a bucket in `state`, refilling at `rate_micro`, is full again:
/// `Some(0)` when full now, `None` when it never will be (no refill). Needs only the rate,
/// so the bucket table can tell, for a bucket of any rule, whether its slot is idle (a
/// full bucket carries no information) and which one is closest to full.
pub fn full_in_ns(state: Tat, now_ns: u64, rate_micro: u64) -> Option<u64> {
    gcra::full_in_ns(state, now_ns, rate_micro)
}

/// Gives back `cost` tokens taken earlier, never making the bucket fuller than full.
///
/// Used when a request admitted by one rule is rejected by another: the request must
/// not consume anything. Applied right after the take, it restores the state exactly.
pub fn refund(state: Tat, now_ns: u64, quota: Quota, cost: u32) -> Tat {
    gcra::refund(state, now_ns, quota.shape(), u64::from(cost.max(1)))
}

/// Settles a request that took `held` tokens at admission and turned out to cost `cost`
/// (a cost the response reports): the difference is charged, or given back.
///
/// A charge is never refused: the bucket may go into debt, its TAT running more than
/// the burst ahead of now. [`decide`] then denies every request until the debt is
/// refilled, with the exact wait, because it measures from the TAT whatever its
/// distance. The debt is capped at one burst (the TAT at most two bursts ahead of now):
/// whatever one response reports, the bucket owes at most `capacity` tokens, so the
/// longest lockout a charge causes is the time to refill two bursts
/// (`2 × capacity / rate`), and another tenant's answer or a buggy upstream can never
/// lock a budget out for years. A TAT already past the cap (set before it, or by a clock
/// that jumped) is left as it is ([`PastCap::Kept`]). A give-back never makes the bucket
/// fuller than full ([`refund`]).
pub fn settle(state: Tat, now_ns: u64, quota: Quota, held: u32, cost: u32) -> Settled {
    match cost.cmp(&held) {
        std::cmp::Ordering::Equal => Settled {
            state,
            debt_capped: false,
        },
        std::cmp::Ordering::Greater => {
            let charged = gcra::charge(state, now_ns, quota.shape(), u64::from(cost - held));
            Settled {
                state: charged.tat,
                debt_capped: charged.capped,
            }
        }
        std::cmp::Ordering::Less => Settled {
            state: refund(state, now_ns, quota, held - cost),
            debt_capped: false,
        },
    }
}

/// A bucket's state after [`settle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// The state to write back.
    pub state: Tat,
    /// The charge would have put the bucket more than one burst into debt: the debt
    /// stopped at one burst.
    pub debt_capped: bool,
}

/// Nanoseconds to whole seconds, rounded up: the form of `retry-after` and
/// `x-ratelimit-reset`, so that a client waiting that long is always admitted. The one
/// the draft-03 fields the server shares use, so both round the same way.
pub use floodgate_common::draft03::seconds_ceil;

#[cfg(test)]
mod tests;
