//! The draft-03 rate-limit header fields (`draft-polli-ratelimit-headers-03`), chosen and
//! written by one rule for the filter and for floodgate-server.
//!
//! A response shows one limit, the most constraining of the enforced limits that applied:
//!
//! 1. the fewest requests remaining;
//! 2. of those, the longest until it resets (a limit that never resets is the longest):
//!    with nothing left on either, that is the one a client waits for;
//! 3. of those, the first in request (or rule) order.
//!
//! and three fields for it:
//!
//! - `x-ratelimit-limit`: its limit, the number alone. The draft allows a list of quota
//!   policies after it (`10, 10;w=60`); it is left out because Envoy's own `ratelimit`
//!   filter writes that list itself when its `enable_x_ratelimit_headers` is on, and the
//!   draft-10 fields carry each limit's window for clients that want it;
//! - `x-ratelimit-remaining`: the whole requests it has left;
//! - `x-ratelimit-reset`: the seconds until it is fully available again, rounded up, so a
//!   client that waits that long is never early; left out when it never resets.
//!
//! The filter describes local buckets and the service's statuses this way, the server its
//! statuses: for the same limits both write the same bytes.

use std::cmp::Reverse;

/// The limit's field.
pub const LIMIT: &str = "x-ratelimit-limit";
/// The remaining requests' field.
pub const REMAINING: &str = "x-ratelimit-remaining";
/// The reset's field.
pub const RESET: &str = "x-ratelimit-reset";

use crate::decimal::decimal;
use crate::unit::NANOS_PER_SECOND;

/// One enforced limit as the fields describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The limit: a bucket's capacity, or a service limit's requests per unit.
    pub limit: u32,
    /// Whole requests left (after this one when it was admitted).
    pub remaining: u32,
    /// Nanoseconds until the limit is fully available again (`None`: never).
    pub reset_ns: Option<u64>,
}

/// The limit the fields show (the rule above), `None` when no enforced limit applied.
pub fn tightest(standings: impl IntoIterator<Item = Standing>) -> Option<Standing> {
    // `min_by_key` keeps the first of equal keys: rule 3.
    standings
        .into_iter()
        .min_by_key(|s| (s.remaining, Reverse(s.reset_ns.unwrap_or(u64::MAX))))
}

/// Hands each field of the tightest of `standings` to `push`, as name and value, in the
/// order limit, remaining, reset; nothing when no enforced limit applied.
pub fn fields(
    standings: impl IntoIterator<Item = Standing>,
    mut push: impl FnMut(&'static str, String),
) {
    numbers(standings, |name, n| push(name, decimal(n)));
}

/// [`fields`] with each value as its number, for a caller that writes the digits where
/// they go (the filter, straight into its reply's header buffer): the same fields, in the
/// same order, as [`fields`] writes in decimal.
pub fn numbers(
    standings: impl IntoIterator<Item = Standing>,
    mut push: impl FnMut(&'static str, u64),
) {
    let Some(s) = tightest(standings) else {
        return;
    };
    push(LIMIT, u64::from(s.limit));
    push(REMAINING, u64::from(s.remaining));
    if let Some(reset) = s.reset_ns {
        push(RESET, seconds_ceil(reset));
    }
}

/// Nanoseconds as whole seconds, rounded up.
pub fn seconds_ceil(nanos: u64) -> u64 {
    nanos.div_ceil(NANOS_PER_SECOND)
}

#[cfg(test)]
mod tests;
