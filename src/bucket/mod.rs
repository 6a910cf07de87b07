//! Token-bucket math as GCRA (generic cell rate algorithm): pure, exact, no clock.
//!
//! A bucket holds `capacity` tokens and earns `refill_per_second` tokens per second. GCRA
//! stores that state as a single number, the *theoretical arrival time* (TAT): the moment
//! at which the bucket would be full again. A request costing `n` tokens pushes the TAT
//! `n` token-intervals into the future; it is admitted while the TAT stays within
//! `capacity` token-intervals of now.
//!
//! To stay exact with fractional rates, time is kept in *scaled units*: one nanosecond is
//! worth `rate_micro` units (the rate in millionths of a token per second), so one token
//! is always exactly [`UNITS_PER_TOKEN`] units whatever the rate. Nothing is rounded: a
//! client that waits `k / rate` seconds before its `k`-th request is never rejected, and
//! no interval of length `t` ever admits more than `capacity + rate × t` tokens.
//! With a rate of zero, time stops (every instant scales to 0) and the bucket becomes a
//! plain counter of `capacity` tokens that never refills.
//!
//! All arithmetic saturates: a host clock that jumps backwards only makes the bucket look
//! emptier for a while, never panics.

/// Scaled time units per token: 10^6 (micro-tokens) × 10^9 (nanoseconds per second).
pub const UNITS_PER_TOKEN: u128 = 1_000_000_000_000_000;

/// [`UNITS_PER_TOKEN`] as the 64-bit factor [`wide_mul`] takes (10^15 < 2^50).
const UNITS_PER_TOKEN_64: u64 = 1_000_000_000_000_000;

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

    /// `now_ns` in scaled units. With no refill, time does not move.
    fn scaled(&self, now_ns: u64) -> u128 {
        wide_mul(now_ns, self.rate_micro)
    }

    /// The burst as scaled units: how far the TAT may run ahead of now.
    fn burst_units(&self) -> u128 {
        tokens_to_units(u64::from(self.capacity))
    }

    /// Scaled units turned back into whole nanoseconds, rounded up so that waiting that
    /// long is always enough. `None` when the bucket never refills.
    fn units_to_nanos_ceil(&self, units: u128) -> Option<u64> {
        units_to_nanos_ceil(units, self.rate_micro)
    }
}

/// Scaled units at `rate_micro` as whole nanoseconds, rounded up; `None` at rate 0.
fn units_to_nanos_ceil(units: u128, rate_micro: u64) -> Option<u64> {
    if rate_micro == 0 {
        return None;
    }
    let nanos = units.div_ceil(u128::from(rate_micro));
    Some(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The stored state of one bucket: its theoretical arrival time in scaled units.
///
/// A missing state and `Tat(0)` both mean "full".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Tat(pub u128);

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
            Decision::Allow { ahead, quota, .. } => whole_tokens(quota.burst_units() - ahead),
            Decision::Deny { remaining, .. } => remaining,
        }
    }

    /// Nanoseconds until the bucket is full again (`None`: never refills).
    pub fn full_in_ns(&self) -> Option<u64> {
        match *self {
            Decision::Allow { ahead, quota, .. } => quota.units_to_nanos_ceil(ahead),
            Decision::Deny { full_in_ns, .. } => full_in_ns,
        }
    }

    /// Nanoseconds until one more whole token is available in a bucket of `quota`: the
    /// draft-10 `t` ("time until additional quota is made available"). `None`: never (no
    /// refill, or full). Computed here, not in [`decide`], so that the division it takes
    /// is paid only by replies that show it.
    pub fn next_token_in_ns(&self, quota: Quota) -> Option<u64> {
        let to_next_token = match *self {
            Decision::Allow { ahead, quota, .. } => to_next_token(quota, ahead, self.remaining()),
            Decision::Deny { to_next_token, .. } => to_next_token,
        };
        if to_next_token == 0 {
            return None;
        }
        quota.units_to_nanos_ceil(to_next_token)
    }
}

/// Decides whether `cost` tokens can be taken from a bucket in state `state` at `now_ns`.
///
/// Pure: the caller stores `new_state` only when it gets [`Decision::Allow`].
/// A `cost` of zero is treated as one, as in Envoy's own `hits_addend`.
pub fn decide(state: Tat, now_ns: u64, quota: Quota, cost: u32) -> Decision {
    let now = quota.scaled(now_ns);
    let burst = quota.burst_units();
    let cost_units = tokens_to_units(u64::from(cost.max(1)));
    let start = state.0.max(now);
    let new_tat = start.saturating_add(cost_units);
    let ahead = new_tat - now;
    if ahead <= burst {
        Decision::Allow {
            new_state: Tat(new_tat),
            ahead,
            quota,
        }
    } else {
        let debt = start - now;
        let available = burst.saturating_sub(debt);
        let retry_in_ns = if cost_units > burst {
            None
        } else {
            quota.units_to_nanos_ceil(ahead - burst)
        };
        let remaining = whole_tokens(available);
        Decision::Deny {
            retry_in_ns,
            remaining,
            full_in_ns: quota.units_to_nanos_ceil(debt),
            to_next_token: to_next_token(quota, debt, remaining),
        }
    }
}

/// Scaled units a bucket `debt` units short of full, with `remaining` whole tokens, must
/// earn to hold `remaining + 1`; 0 when it is full. No division: every rejection
/// computes it.
fn to_next_token(quota: Quota, debt: u128, remaining: u32) -> u128 {
    if remaining >= quota.capacity {
        return 0;
    }
    // Tokens now, in units: burst - debt (below zero in debt). One more whole token is
    // (remaining + 1) tokens, so the bucket must earn (remaining + 1) tokens + debt - burst.
    let target = tokens_to_units(u64::from(remaining) + 1) + debt;
    target.saturating_sub(quota.burst_units())
}

/// Nanoseconds until a bucket in `state`, refilling at `rate_micro`, is full again:
/// `Some(0)` when full now, `None` when it never will be (no refill). Needs only the rate,
/// so the bucket table can tell, for a bucket of any rule, whether its slot is idle (a
/// full bucket carries no information) and which one is closest to full.
pub fn full_in_ns(state: Tat, now_ns: u64, rate_micro: u64) -> Option<u64> {
    let debt = state.0.saturating_sub(wide_mul(now_ns, rate_micro));
    if debt == 0 {
        Some(0)
    } else {
        units_to_nanos_ceil(debt, rate_micro)
    }
}

/// Gives back `cost` tokens taken earlier, never making the bucket fuller than full.
///
/// Used when a request admitted by one rule is rejected by another: the request must
/// not consume anything. Applied right after the take, it restores the state exactly.
pub fn refund(state: Tat, now_ns: u64, quota: Quota, cost: u32) -> Tat {
    let cost_units = tokens_to_units(u64::from(cost.max(1)));
    Tat(state.0.saturating_sub(cost_units).max(quota.scaled(now_ns)))
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
/// that jumped) is left as it is. A give-back never makes the bucket fuller than full
/// ([`refund`]).
pub fn settle(state: Tat, now_ns: u64, quota: Quota, held: u32, cost: u32) -> Settled {
    match cost.cmp(&held) {
        std::cmp::Ordering::Equal => Settled {
            state,
            debt_capped: false,
        },
        std::cmp::Ordering::Greater => {
            let extra = tokens_to_units(u64::from(cost - held));
            let now = quota.scaled(now_ns);
            let charged = state.0.max(now).saturating_add(extra);
            let cap = now.saturating_add(2 * quota.burst_units());
            Settled {
                state: Tat(charged.min(cap).max(state.0)),
                debt_capped: charged > cap,
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

/// Scaled units to whole tokens, rounded down, clamped to `u32`.
fn whole_tokens(units: u128) -> u32 {
    u32::try_from(units / UNITS_PER_TOKEN).unwrap_or(u32::MAX)
}

/// Nanoseconds to whole seconds, rounded up: the form of `retry-after` and
/// `x-ratelimit-reset`, so that a client waiting that long is always admitted. The one
/// the draft-03 fields the server shares use, so both round the same way.
pub use floodgate_common::draft03::seconds_ceil;

/// `tokens` whole tokens as scaled units (exact: at most 2^64 × 10^15 < 2^114).
fn tokens_to_units(tokens: u64) -> u128 {
    wide_mul(tokens, UNITS_PER_TOKEN_64)
}

/// The exact product of two 64-bit numbers, from four 32-bit products. Wasm has no
/// 64 × 64 → 128-bit multiply, and the compiler's 128-bit multiply (`__multi3`, a call)
/// does the general 128 × 128 case, although every product here has 64-bit factors: this
/// does a quarter of its work inline. Nothing can overflow: each 32 × 32 product is below
/// 2^64, `mid` below 3 × 2^32, and every partial sum of `hi` is at most the product's
/// high half.
fn wide_mul(a: u64, b: u64) -> u128 {
    const LOW: u64 = 0xffff_ffff;
    let (a1, a0) = (a >> 32, a & LOW);
    let (b1, b0) = (b >> 32, b & LOW);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 32) + (p01 & LOW) + (p10 & LOW);
    let lo = (p00 & LOW) | (mid << 32);
    let hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    (u128::from(hi) << 64) | u128::from(lo)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
