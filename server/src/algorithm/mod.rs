//! The five limiting algorithms (four rates, and concurrency: see [`concurrency`]) as pure math: `(state, now, limit, hits) -> (decision, update)`.
//!
//! Nothing here reads a clock or touches storage. A store reads its own clock (the memory
//! store an injected [`crate::clock::Clock`], the Redis store Redis's `TIME`), loads the state,
//! calls [`decide`], and writes the state back with [`State::apply`] only when the whole request
//! is admitted. Time is nanoseconds since the Unix epoch, so fixed windows line up across
//! replicas and restarts. All arithmetic saturates: a clock that jumps backwards makes a limit
//! look fuller for a while, never panics.
//!
//! Every decision reports `remaining` (whole requests still admissible) and `reset_in_ns`:
//! when admitted, the time until the limit is fully available again; when denied, the exact
//! time until a request of **one hit** would be admitted, whatever this request's cost: 0
//! when one hit fits now (only the cost was too much). A filter may reject every request of
//! the descriptor for that long without asking (floodgate's over-limit cache), so it must
//! never be longer than the truth: each algorithm solves for the first nanosecond at which
//! one hit fits, rounding up only where that instant falls between two nanoseconds (one ns
//! earlier is then still over). `proptests` checks both edges for every denial.
//!
//! [`concurrency`] is the exception: a slot may come back sooner than its hold's deadline (a
//! release), so its denial's reset is an upper bound, and the filter never caches it.

pub mod concurrency;
pub mod fixed_window;
pub mod lease;
pub mod sliding_counter;
pub mod sliding_log;
pub mod token_bucket;
mod window;

#[cfg(test)]
mod charge_proptests;
#[cfg(test)]
mod proptests;

use std::num::{NonZeroU16, NonZeroU32};
pub use window::{Window, MAX_WINDOW_SECONDS};

/// The units a limit is counted in and their lengths, shared with the filter (which reads
/// a service's limit as a window in seconds). The RLS response enum has no week; see
/// [`crate::rls`].
pub use floodgate_common::unit::{Unit, NANOS_PER_SECOND};

/// The most hits one [`charge`] counts: more than any limit or burst (both `u32`), so a
/// larger charge puts the limit in debt all the same. The Redis script clamps alike.
pub const MAX_CHARGE_HITS: u64 = 1 << 32;

/// Which algorithm enforces a limit, with its own parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Counts per calendar-aligned window; may admit up to twice the limit across a boundary.
    FixedWindow,
    /// GCRA token bucket holding `burst` tokens, refilled at `requests_per_unit` per unit.
    TokenBucket {
        /// Bucket capacity in requests.
        burst: NonZeroU32,
    },
    /// Remembers each admitted request's time: exact over any window of one unit.
    SlidingWindowLog,
    /// Weighs the previous window's count by its overlap: approximate, constant memory.
    SlidingWindowCounter,
    /// At most `requests_per_unit` slots held at once, each hold lasting at most one
    /// window (see [`concurrency`]).
    Concurrency,
}

impl Algorithm {
    /// The name used in configuration and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::TokenBucket { .. } => "token_bucket",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::Concurrency => "concurrency",
        }
    }
}

/// A validated limit: `requests_per_unit` per `unit_multiplier` × `unit`, enforced by
/// `algorithm`.
///
/// Zero limits cannot be expressed; "no limit" and "unlimited" are decided before a limit
/// ever reaches an algorithm. The window is at most [`MAX_WINDOW_SECONDS`] (the
/// configuration refuses longer ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    /// Requests admitted per window.
    pub requests_per_unit: NonZeroU32,
    /// The unit of time.
    pub unit: Unit,
    /// How many units make the window (the `unit_multiplier`; 1 for a plain unit). At
    /// most 65,535, which keeps a limit in 16 bytes (the memory store holds one per
    /// counter): a longer window in a small unit is a window in the next unit.
    pub unit_multiplier: NonZeroU16,
    /// The algorithm and its parameters.
    pub algorithm: Algorithm,
}

impl Limit {
    /// The limit as a plain number.
    pub fn rpu(&self) -> u64 {
        u64::from(self.requests_per_unit.get())
    }

    /// The window: `unit_multiplier` × `unit`.
    pub fn window(&self) -> Window {
        Window {
            unit: self.unit,
            multiplier: self.unit_multiplier,
        }
    }

    /// The period (the window's length) in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.window().period_ns()
    }

    /// The most a window (fixed window, sliding counter, sliding log) ever counts: its
    /// limit plus one limit of debt, however much is charged past it (see [`charge`]).
    pub fn max_count(&self) -> u64 {
        2 * self.rpu()
    }
}

/// What an algorithm says about one descriptor at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the hits fit within the limit.
    pub allowed: bool,
    /// Whole requests still admissible now (after this one, when admitted).
    pub remaining: u32,
    /// Admitted: ns until fully available again. Denied: ns until one hit would be
    /// admitted (0 if one fits now), never more: an over-limit cache trusts it.
    pub reset_in_ns: u64,
    /// Hits a store took ahead for the caller with the admission (quota leases, see
    /// [`lease`]); the algorithms never set it, only a store that granted.
    pub grant: Option<lease::Grant>,
}

/// The stored state of one counter, whichever algorithm owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// See [`fixed_window`].
    FixedWindow(fixed_window::State),
    /// See [`token_bucket`].
    TokenBucket(token_bucket::State),
    /// See [`sliding_log`].
    SlidingWindowLog(sliding_log::State),
    /// See [`sliding_counter`].
    SlidingWindowCounter(sliding_counter::State),
    /// See [`concurrency`].
    Concurrency(concurrency::State),
}

/// How to turn a state into the state after a decision: a whole new small state, or for
/// the log a delta so that deciding never copies the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Replace a fixed window state.
    FixedWindow(fixed_window::State),
    /// Replace a token bucket state.
    TokenBucket(token_bucket::State),
    /// Trim and append to a log.
    SlidingWindowLog(sliding_log::Update),
    /// Replace a sliding counter state.
    SlidingWindowCounter(sliding_counter::State),
    /// Drop expired holds, then add or remove one.
    Concurrency(concurrency::Update),
}

impl State {
    /// The state of a counter never used: the limit fully available.
    pub fn fresh(limit: &Limit) -> State {
        match limit.algorithm {
            Algorithm::FixedWindow => State::FixedWindow(fixed_window::State::default()),
            Algorithm::TokenBucket { .. } => State::TokenBucket(token_bucket::State::default()),
            Algorithm::SlidingWindowLog => State::SlidingWindowLog(sliding_log::State::default()),
            Algorithm::SlidingWindowCounter => {
                State::SlidingWindowCounter(sliding_counter::State::default())
            }
            Algorithm::Concurrency => State::Concurrency(concurrency::State::default()),
        }
    }

    /// Applies an update produced by [`decide`] on this same state. A mismatched update
    /// (a bug) leaves the state alone.
    pub fn apply(&mut self, update: Update) {
        match (self, update) {
            (State::FixedWindow(s), Update::FixedWindow(n)) => *s = n,
            (State::TokenBucket(s), Update::TokenBucket(n)) => *s = n,
            (State::SlidingWindowLog(s), Update::SlidingWindowLog(u)) => s.apply(u),
            (State::SlidingWindowCounter(s), Update::SlidingWindowCounter(n)) => *s = n,
            (State::Concurrency(s), Update::Concurrency(u)) => s.apply(&u),
            _ => debug_assert!(false, "update for another algorithm"),
        }
    }

    /// The instant (ns) from which this state means the same as a fresh one, so a store
    /// may forget it.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        match self {
            State::FixedWindow(s) => s.idle_at(limit),
            State::TokenBucket(s) => s.idle_at(limit),
            State::SlidingWindowLog(s) => s.idle_at(limit),
            State::SlidingWindowCounter(s) => s.idle_at(limit),
            State::Concurrency(s) => s.idle_at(),
        }
    }

    /// Memory cells this state occupies: one for the counter, plus one per log entry or
    /// hold.
    pub fn cells(&self) -> usize {
        match self {
            State::SlidingWindowLog(s) => 1 + s.len(),
            State::Concurrency(s) => 1 + s.len(),
            _ => 1,
        }
    }
}

/// Decides `hits` against `state` at `now_ns` under `limit`.
///
/// Pure. `hits` of zero is a **check-only** probe (a descriptor's own `hits_addend` of 0,
/// as envoyproxy/ratelimit defines it): admitted when one hit would fit, denied otherwise,
/// `remaining` as it stands, and its update counts nothing. (The request-level
/// `hits_addend` of 0 means 1; the RLS layer maps that before a store sees it.) A state of
/// another algorithm than the limit's is read as fresh: it happens when a configuration
/// reload changes a limit's algorithm.
pub fn decide(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, Update) {
    decide_holding(state, now_ns, limit, hits, None)
}

/// [`decide`], with what the call does with its hold id on a concurrency counter (see
/// [`concurrency`]; `None`: check-only there). Other algorithms ignore `hold`.
pub fn decide_holding(
    state: &State,
    now_ns: u64,
    limit: &Limit,
    hits: u64,
    hold: Option<&concurrency::HoldOp>,
) -> (Decision, Update) {
    match (state, limit.algorithm) {
        (State::Concurrency(s), Algorithm::Concurrency) => {
            let (d, u) = concurrency::decide(s, now_ns, limit, hits, hold);
            (d, Update::Concurrency(u))
        }
        (State::FixedWindow(s), Algorithm::FixedWindow) => {
            let (d, n) = fixed_window::decide(s, now_ns, limit, hits);
            (d, Update::FixedWindow(n))
        }
        (State::TokenBucket(s), Algorithm::TokenBucket { burst }) => {
            let (d, n) = token_bucket::decide(s, now_ns, limit, burst, hits);
            (d, Update::TokenBucket(n))
        }
        (State::SlidingWindowLog(s), Algorithm::SlidingWindowLog) => {
            let (d, u) = sliding_log::decide(s, now_ns, limit, hits);
            (d, Update::SlidingWindowLog(u))
        }
        (State::SlidingWindowCounter(s), Algorithm::SlidingWindowCounter) => {
            let (d, n) = sliding_counter::decide(s, now_ns, limit, hits);
            (d, Update::SlidingWindowCounter(n))
        }
        // Another algorithm's state: start afresh (a fresh state always matches, so this
        // recurses once).
        _ => decide_holding(&State::fresh(limit), now_ns, limit, hits, hold),
    }
}

/// Counts `hits` against `state` at `now_ns` under `limit` whether they fit or not.
///
/// This is the stream-end charge of a cost known only once the response is done (an LLM
/// answer's tokens): the request was admitted already, so refusing to count what it cost
/// would leak the budget (990 of 1,000 used, a 500-token answer refused, and the next
/// check sees 10 left). When the hits fit, it is exactly [`decide`]. When they do not,
/// the limit goes into debt: a fixed window or a sliding counter counts past its limit,
/// a token bucket's arrival time moves forward by the whole cost, a sliding log adds them
/// to its newest entry (see [`sliding_log::charge`]). The decision then says
/// `allowed: false`, `remaining: 0`, and `reset_in_ns` the exact time until one hit fits
/// again, so an over-limit cache can trust it as after any denial. Hits are clamped to
/// [`MAX_CHARGE_HITS`]; 0 hits is check-only, as in [`decide`]. A concurrency limit counts
/// nothing in a charge (slots are taken and given back by holds, never charged): it
/// answers check-only.
///
/// **Debt is capped at one limit.** A limit never owes more than it holds: a token
/// bucket at most its burst (tokens down to −burst), a window at most its limit (it counts
/// at most [`Limit::max_count`]); what a charge costs beyond that is forgiven. So one
/// charge, however large (a reported cost of `u32::MAX`), blocks a limit for a bounded
/// time: a token bucket until `burst + 1` tokens have come back; a fixed window until the
/// end of the next window (the debt carries into it, see [`fixed_window`]); a sliding
/// counter until its doubled count has slid out far enough, at most the end of the next
/// window; a sliding log one unit. Without the cap one reported `u32::MAX` locked a
/// tenant out for years.
pub fn charge(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, Update) {
    if hits == 0 || limit.algorithm == Algorithm::Concurrency {
        // Check-only, even in a charge: nothing to count.
        return decide(state, now_ns, limit, 0);
    }
    let hits = hits.min(MAX_CHARGE_HITS);
    match (state, limit.algorithm) {
        (State::FixedWindow(s), Algorithm::FixedWindow) => {
            let (d, n) = fixed_window::charge(s, now_ns, limit, hits);
            (d, Update::FixedWindow(n))
        }
        (State::TokenBucket(s), Algorithm::TokenBucket { burst }) => {
            let (d, n) = token_bucket::charge(s, now_ns, limit, burst, hits);
            (d, Update::TokenBucket(n))
        }
        (State::SlidingWindowLog(s), Algorithm::SlidingWindowLog) => {
            let (d, u) = sliding_log::charge(s, now_ns, limit, hits);
            (d, Update::SlidingWindowLog(u))
        }
        (State::SlidingWindowCounter(s), Algorithm::SlidingWindowCounter) => {
            let (d, n) = sliding_counter::charge(s, now_ns, limit, hits);
            (d, Update::SlidingWindowCounter(n))
        }
        _ => charge(&State::fresh(limit), now_ns, limit, hits),
    }
}

/// Clamps a count to the `u32` of the RLS `limit_remaining` field.
pub(crate) fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A limit for tests.
    pub fn limit(rpu: u32, unit: Unit, algorithm: Algorithm) -> Limit {
        Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap(),
            unit,
            unit_multiplier: NonZeroU16::MIN,
            algorithm,
        }
    }

    /// A limit of `rpu` per `multiplier` × `unit`, for tests.
    pub fn limit_per(rpu: u32, multiplier: u16, unit: Unit, algorithm: Algorithm) -> Limit {
        Limit {
            unit_multiplier: NonZeroU16::new(multiplier).unwrap(),
            ..limit(rpu, unit, algorithm)
        }
    }
}
