//! The token bucket as GCRA (generic cell rate algorithm), written once for the filter's
//! local buckets and floodgate-server's `token_bucket`: pure, exact, no clock.
//!
//! A bucket holds `capacity` tokens and earns tokens at a fixed rate. GCRA keeps that state
//! as one number, the *theoretical arrival time* (TAT): the instant at which the bucket
//! would be full again. Taking `n` tokens pushes the TAT `n` token-intervals into the
//! future; it is allowed while the TAT stays within `capacity` token-intervals of now.
//!
//! To stay exact when a token-interval is not a whole number of nanoseconds (3 per second
//! is 333,333,333.3 ns), time is counted in *scaled units*: one nanosecond is worth
//! [`Shape::per_ns`] units and one token is worth [`Shape::token`] units, two integers
//! chosen by each side so that their ratio is its rate. Nothing is rounded: no interval of
//! length `t` admits more than `capacity + rate × t` tokens, and a client that waits one
//! token-interval (rounded up to the nanosecond) between requests is never rejected. Only
//! an answer in nanoseconds is rounded, and always up, so that waiting that long is enough.
//!
//! - The filter: `per_ns` is the rate in millionths of a token per second and a token is
//!   10^15 units (10^6 × 10^9): fractional rates per second, and a rate of 0 (time stops,
//!   the bucket is a counter that never refills).
//! - floodgate-server: `per_ns` is `requests_per_unit` and a token is the window's length
//!   in nanoseconds: `requests_per_unit` tokens per window, exactly.
//!
//! What the two sides do differently is a value, not a second copy: a take is of at least
//! one token, and a check-only [`probe`] is its own call (the server's `hits` of 0; the
//! filter counts a cost of 0 as 1 and never probes), and a TAT found more than the debt
//! cap ahead is read as it is or as the cap ([`PastCap`]).
//!
//! **Debt.** A [`charge`] takes tokens whether they are there or not (a cost known only
//! after the response): the bucket goes below zero, but never below `−capacity`. The TAT
//! is then at most two bursts ahead of now, so one charge, however large, blocks a bucket
//! for at most the time to refill two bursts.
//!
//! All arithmetic saturates: a clock that jumps backwards only makes a bucket look emptier
//! for a while, never panics.

use std::num::{NonZeroU32, NonZeroU64};

/// The stored state of one bucket: its theoretical arrival time in scaled units.
///
/// A missing state and `Tat(0)` both mean "full".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Tat(pub u128);

/// How a bucket reads a TAT found further ahead than the debt cap (two bursts ahead of
/// now): written before the cap existed, by a clock that went back, or under a slower rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PastCap {
    /// As it is: the bucket stays in that debt, and a charge moves it neither further
    /// nor back (the filter).
    Kept,
    /// As exactly the cap, by every take and charge: one hit fits again within
    /// `capacity + 1` token-intervals whatever the state says (floodgate-server, and its
    /// Redis script alike).
    Clamped,
}

/// A bucket's shape in scaled units: how many tokens it holds, what a nanosecond and a
/// token are worth, and how it reads a TAT past the debt cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    capacity: NonZeroU32,
    per_ns: u64,
    token: NonZeroU64,
    past_cap: PastCap,
}

impl Shape {
    /// A bucket of `capacity` tokens earning `per_ns` units each nanosecond (0: never
    /// refills), one token being `token` units. Every value is usable: the rate is
    /// `per_ns / token` tokens per nanosecond. Products stay exact in `u128` as long as
    /// `per_ns` and `token` are 64-bit, whatever the clock says.
    #[inline]
    pub const fn new(
        capacity: NonZeroU32,
        per_ns: u64,
        token: NonZeroU64,
        past_cap: PastCap,
    ) -> Shape {
        Shape {
            capacity,
            per_ns,
            token,
            past_cap,
        }
    }

    /// The burst size in tokens.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.capacity.get()
    }

    /// Scaled units one nanosecond earns (0: the bucket never refills).
    #[inline]
    pub fn per_ns(&self) -> u64 {
        self.per_ns
    }

    /// Scaled units one token is worth.
    #[inline]
    pub fn token(&self) -> u64 {
        self.token.get()
    }

    /// `now_ns` in scaled units. With no refill, time does not move.
    #[inline]
    pub fn scaled(&self, now_ns: u64) -> u128 {
        wide_mul(now_ns, self.per_ns)
    }

    /// `tokens` as scaled units (exact: two 64-bit factors).
    #[inline]
    pub fn units(&self, tokens: u64) -> u128 {
        wide_mul(tokens, self.token.get())
    }

    /// The burst as scaled units: how far the TAT may run ahead of now.
    #[inline]
    pub fn burst(&self) -> u128 {
        self.units(u64::from(self.capacity.get()))
    }

    /// Scaled units as whole nanoseconds, rounded up so that waiting that long is always
    /// enough (and clamped to `u64`). `None` when the bucket never refills.
    #[inline]
    pub fn nanos_ceil(&self, units: u128) -> Option<u64> {
        nanos_ceil(units, self.per_ns)
    }

    /// Scaled units as whole tokens, rounded down, clamped to `u32`.
    #[inline]
    pub fn whole_tokens(&self, units: u128) -> u32 {
        u32::try_from(units / u128::from(self.token.get())).unwrap_or(u32::MAX)
    }

    /// Nanoseconds until a bucket `debt` units short of full can take `hits` tokens:
    /// `Some(0)` when they fit now, `None` when they never will (more than the capacity,
    /// or no refill). Exact: at that instant they fit, one nanosecond earlier they do not.
    #[inline]
    pub fn wait_ns(&self, debt: u128, hits: u64) -> Option<u64> {
        let short = debt
            .saturating_add(self.units(hits))
            .saturating_sub(self.burst());
        if short == 0 && hits <= u64::from(self.capacity.get()) {
            return Some(0);
        }
        self.retry_ns(short, hits)
    }

    /// Nanoseconds until a take of `hits` refused `short` units short ([`Refusal`]) fits: `None` when it never will (more than the capacity, or no refill). Exact, as
    /// [`Shape::wait_ns`], without its additions: the take computed them already.
    #[inline]
    pub fn retry_ns(&self, short: u128, hits: u64) -> Option<u64> {
        if hits > u64::from(self.capacity.get()) {
            return None;
        }
        self.nanos_ceil(short)
    }

    /// Scaled units a bucket `debt` units short of full, holding `remaining` whole tokens,
    /// must earn to hold `remaining + 1`; 0 when it is full. No division.
    #[inline]
    pub fn to_next_token(&self, debt: u128, remaining: u32) -> u128 {
        if remaining >= self.capacity.get() {
            return 0;
        }
        // Tokens now, in units: burst - debt (below zero in debt). One more whole token is
        // (remaining + 1) tokens, so the bucket must earn (remaining + 1) tokens + debt - burst.
        let target = self.units(u64::from(remaining) + 1).saturating_add(debt);
        target.saturating_sub(self.burst())
    }

    /// Where a take or a charge starts from at scaled `now`: the TAT, or now if it has
    /// passed (the bucket has been full since then); with [`PastCap::Clamped`], at most the
    /// debt cap.
    #[inline]
    fn start(&self, state: Tat, now: u128) -> u128 {
        let start = state.0.max(now);
        match self.past_cap {
            PastCap::Kept => start,
            PastCap::Clamped => start.min(self.deepest(now)),
        }
    }

    /// The furthest a charge may put the TAT: two bursts ahead of `now` (an empty bucket
    /// owing one more burst), or with [`PastCap::Kept`] where the TAT already is.
    #[inline]
    fn cap(&self, state: Tat, now: u128) -> u128 {
        match self.past_cap {
            PastCap::Kept => self.deepest(now).max(state.0),
            PastCap::Clamped => self.deepest(now),
        }
    }

    /// Two bursts ahead of `now`.
    #[inline]
    fn deepest(&self, now: u128) -> u128 {
        now.saturating_add(self.burst().saturating_mul(2))
    }
}

/// What a bucket says to a take at one instant, in scaled units: the caller turns them
/// into tokens and nanoseconds only where it shows them (each is a 128-bit division).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// The tokens were there; store `tat`.
    Admitted {
        /// The state to write back.
        tat: Tat,
        /// Scaled units the bucket is short of full after the take: it holds
        /// `burst - ahead` and is full again in `ahead` units.
        ahead: u128,
    },
    /// Not enough tokens; the state is unchanged.
    Refused {
        /// Scaled units the bucket would be short of full after the take: more than the
        /// burst. [`Shape::refusal`] turns it into what the answers need; it is apart so
        /// that an admission pays nothing for a refusal's arithmetic.
        ahead: u128,
    },
}

/// A refused take in the terms its answers need ([`Shape::refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// Scaled units the bucket is short of full now.
    pub debt: u128,
    /// Scaled units the bucket must earn before the take fits; more than 0
    /// ([`Shape::retry_ns`]).
    pub short: u128,
}

impl Shape {
    /// What a take of `hits` refused `ahead` units short of full ([`Take::Refused`]; a
    /// [`probe`] is a take of one) says: what the bucket owes now, and what it must earn.
    #[inline]
    pub fn refusal(&self, ahead: u128, hits: NonZeroU64) -> Refusal {
        Refusal {
            debt: ahead.saturating_sub(self.units(hits.get())),
            short: ahead.saturating_sub(self.burst()),
        }
    }
}

/// Takes `hits` tokens from a bucket in `state` at `now_ns` when they are all there.
///
/// Pure: the caller stores the new TAT only when admitted.
#[inline]
pub fn take(state: Tat, now_ns: u64, shape: Shape, hits: NonZeroU64) -> Take {
    let now = shape.scaled(now_ns);
    let burst = shape.burst();
    let start = shape.start(state, now);
    let new_tat = start.saturating_add(shape.units(hits.get()));
    let ahead = new_tat - now;
    if ahead <= burst {
        Take::Admitted {
            tat: Tat(new_tat),
            ahead,
        }
    } else {
        Take::Refused { ahead }
    }
}

/// A check-only probe: admitted when one token is there, taking none (the TAT it gives
/// back is where the bucket stands), refused as a take of one token would be.
#[inline]
pub fn probe(state: Tat, now_ns: u64, shape: Shape) -> Take {
    match take(state, now_ns, shape, NonZeroU64::MIN) {
        Take::Admitted { tat, ahead } => {
            let token = u128::from(shape.token());
            Take::Admitted {
                tat: Tat(tat.0 - token),
                ahead: ahead - token,
            }
        }
        refused => refused,
    }
}

/// A bucket's state after [`charge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    /// The state to write back.
    pub tat: Tat,
    /// Scaled units the bucket is short of full after the charge (past the burst: in debt).
    pub ahead: u128,
    /// The charge would have put the bucket more than one burst into debt: the debt
    /// stopped at the cap.
    pub capped: bool,
}

/// Takes `hits` tokens whether they are there or not (a cost known after the response):
/// the TAT moves forward by the whole cost, but never past the debt cap ([`PastCap`]:
/// two bursts ahead of now, or a TAT already further, kept). When the tokens are there,
/// the new TAT is exactly [`take`]'s.
#[inline]
pub fn charge(state: Tat, now_ns: u64, shape: Shape, hits: u64) -> Charged {
    let now = shape.scaled(now_ns);
    let charged = shape.start(state, now).saturating_add(shape.units(hits));
    let cap = shape.cap(state, now);
    let tat = charged.min(cap);
    Charged {
        tat: Tat(tat),
        ahead: tat - now,
        capped: charged > cap,
    }
}

/// Gives back `hits` tokens taken earlier, never making the bucket fuller than full.
/// Applied right after the take, it restores the state exactly.
#[inline]
pub fn refund(state: Tat, now_ns: u64, shape: Shape, hits: u64) -> Tat {
    Tat(state
        .0
        .saturating_sub(shape.units(hits))
        .max(shape.scaled(now_ns)))
}

/// Nanoseconds until a bucket in `state`, earning `per_ns` units a nanosecond, is full
/// again: `Some(0)` when full now, `None` when it never will be (no refill). Needs only
/// the rate, so a table of buckets of any shape can tell which are idle.
#[inline]
pub fn full_in_ns(state: Tat, now_ns: u64, per_ns: u64) -> Option<u64> {
    let debt = state.0.saturating_sub(wide_mul(now_ns, per_ns));
    if debt == 0 {
        Some(0)
    } else {
        nanos_ceil(debt, per_ns)
    }
}

/// The first nanosecond at which a bucket in `state`, earning `per_ns` units a
/// nanosecond, is full (as good as fresh, so a store may forget it); `None`: never.
#[inline]
pub fn full_at_ns(state: Tat, per_ns: u64) -> Option<u64> {
    nanos_ceil(state.0, per_ns)
}

/// Scaled units at `per_ns` as whole nanoseconds, rounded up; `None` at rate 0.
#[inline]
fn nanos_ceil(units: u128, per_ns: u64) -> Option<u64> {
    if per_ns == 0 {
        return None;
    }
    Some(u64::try_from(units.div_ceil(u128::from(per_ns))).unwrap_or(u64::MAX))
}

/// The exact product of two 64-bit numbers. On wasm32 from four 32-bit products
/// ([`wide_mul_by_halves`]); elsewhere the machine's own 64 × 64 → 128-bit multiply.
#[inline]
pub fn wide_mul(a: u64, b: u64) -> u128 {
    #[cfg(target_arch = "wasm32")]
    {
        wide_mul_by_halves(a, b)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        u128::from(a) * u128::from(b)
    }
}

/// The exact product of two 64-bit numbers, from four 32-bit products. Wasm has no
/// 64 × 64 → 128-bit multiply, and the compiler's 128-bit multiply (`__multi3`, a call)
/// does the general 128 × 128 case, although every product here has 64-bit factors: this
/// does a quarter of its work inline. Nothing can overflow: each 32 × 32 product is below
/// 2^64, `mid` below 3 × 2^32, and every partial sum of `hi` is at most the product's
/// high half.
#[cfg(any(target_arch = "wasm32", test))]
#[inline]
fn wide_mul_by_halves(a: u64, b: u64) -> u128 {
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
mod proptests;
#[cfg(test)]
mod tests;
