//! Quota leases: after an admission, hits taken ahead for the caller.
//!
//! A caller that will spend hits on its own (floodgate's filter) may ask, per descriptor,
//! for a grant. When the request is admitted, the store takes up to `quota.requests` more
//! hits for it **in the same atomic step** as the admission, so a grant is counted like any
//! hit and the limit holds whoever spends it. This module is the pure part: how many hits
//! a grant may take ([`grant_hits`]) and until when it may be spent ([`lease_ends_at`]).
//! A store applies a grant of `g` by deciding the admitted item again with its own hits
//! plus `g`, which fits by construction: `remaining` is exactly the whole hits that still
//! fit after the admission, on every algorithm (the token bucket's whole tokens, the log's
//! free entries, the sliding counter's room in its weighted estimate, floored).

use super::{Algorithm, Limit};
use floodgate_common::unit::NANOS_PER_MS;
use std::num::NonZeroU32;

/// A descriptor's lease terms, from its `quota` in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// The most hits one grant takes.
    pub requests: NonZeroU32,
    /// How long a grant may be spent, in milliseconds.
    pub valid_ms: u64,
}

/// Hits taken for a caller in the step that admitted its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Hits granted (at least 1; no grant is `None`, never a grant of 0).
    pub hits: u32,
    /// The instant (ns since the Unix epoch, the store's clock) after which the caller
    /// must not spend the grant.
    pub valid_until_ns: u64,
}

/// How many hits a grant takes after an admission that left `remaining` whole hits:
/// `min(quota.requests, remaining)`, never more than remain.
pub fn grant_hits(quota: &Quota, remaining: u32) -> u32 {
    quota.requests.get().min(remaining)
}

/// Until when a grant made at `now_ns` may be spent: `now + valid_ms`, but never later
/// than the moment the granted hits stop counting in the window they were counted in.
///
/// - Fixed window and sliding window counter: at most the end of the current window. A
///   hit granted in one window and spent in the next would be a hit the next window never
///   counted.
/// - Token bucket and sliding window log: `now + valid_ms`. Their hits count from the
///   moment they were taken (the bucket refills from then; the log entry leaves one unit
///   after), so a grant spent later shifts those hits earlier by up to `valid_ms`: keep
///   `valid_ms` well below the refill period or the window.
pub fn lease_ends_at(limit: &Limit, quota: &Quota, now_ns: u64) -> u64 {
    let by_validity = now_ns.saturating_add(quota.valid_ms.saturating_mul(NANOS_PER_MS));
    match limit.algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => {
            let period = limit.period_ns();
            let window_end = (now_ns / period).saturating_add(1).saturating_mul(period);
            by_validity.min(window_end)
        }
        // A concurrency limit is never granted (see `rls::plan`); its holds end by
        // validity like any other hits taken ahead.
        Algorithm::TokenBucket { .. } | Algorithm::SlidingWindowLog | Algorithm::Concurrency => {
            by_validity
        }
    }
}

/// The grant for an admitted item that asked with `quota` and left `remaining` whole
/// hits at `now_ns` (`None` when nothing is left).
pub fn grant(limit: &Limit, quota: &Quota, remaining: u32, now_ns: u64) -> Option<Grant> {
    let hits = grant_hits(quota, remaining);
    (hits > 0).then(|| Grant {
        hits,
        valid_until_ns: lease_ends_at(limit, quota, now_ns),
    })
}

#[cfg(test)]
mod tests;
