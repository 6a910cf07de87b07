//! The store interface: where counters live and how one request is decided atomically.
//!
//! A store receives every limited descriptor of one request as one batch and answers one
//! [`Decision`] per item, in order. The store owns the clock (the memory store an injected
//! [`crate::clock::Clock`]; the Redis store will use Redis's `TIME` inside its script), so
//! replicas never disagree about time. The batch shape is what lets Redis check several
//! descriptors in one round trip.
//!
//! # All or nothing (no counter pollution)
//! Within a batch, nothing is consumed unless every *enforced* item (not in shadow mode) is
//! within its limit. When the request is admitted, every item that had room consumes; a
//! shadow item over its limit consumes nothing (it reports what it would have done). When
//! any enforced item is over, no counter changes at all, so a client hammering one exhausted
//! limit does not drain its other limits. (envoyproxy/ratelimit increments every counter.)
//! The memory store implements this under its shard locks; a Redis store does it in one
//! script when a request's keys share a hash slot.

pub mod memory;

use crate::algorithm::{Decision, Limit};
use std::fmt::Write;
use std::future::Future;
use std::sync::Arc;

/// One limited descriptor of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Which counter.
    pub key: CounterKey,
    /// The limit the configuration applies to it.
    pub limit: Limit,
    /// Hits to add (at least 1).
    pub hits: u64,
    /// Shadow mode: never blocks the request, so never blocks the other items' consumption.
    pub shadow: bool,
}

/// Why a store could not decide. The RLS layer answers gRPC UNAVAILABLE for all of these,
/// so Envoy's configured failure mode applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The memory store is at its capacity and the request needs a new counter.
    #[error("store full: {0} cells in use, no room for a new counter")]
    Full(usize),
    /// The backend could not be reached or answered wrongly.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// A store of counters that decides batches atomically.
pub trait Store: Send + Sync + 'static {
    /// Decides every item of one request together, per the all-or-nothing rule above, and
    /// answers one decision per item in order.
    fn check(
        &self,
        batch: &[Check],
    ) -> impl Future<Output = Result<Vec<Decision>, StoreError>> + Send;

    /// A short name for logs and metrics (`memory`, `redis`).
    fn name(&self) -> &'static str;
}

impl<S: Store> Store for Arc<S> {
    fn check(
        &self,
        batch: &[Check],
    ) -> impl Future<Output = Result<Vec<Decision>, StoreError>> + Send {
        (**self).check(batch)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}

/// The identity of a counter: the domain and the request descriptor's entries.
///
/// Encoded once into an unambiguous string: each part is prefixed by its byte length, so no
/// choice of keys or values can make two different descriptors collide
/// (`6:domain|3:key=5:value|...`). A Redis store wraps it in its own versioned key with a
/// hash tag; the memory store hashes it as is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CounterKey(Arc<str>);

impl CounterKey {
    /// The key of `entries` in `domain`.
    pub fn new<'a, I>(domain: &str, entries: I) -> CounterKey
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut s = String::with_capacity(64);
        let _ = write!(s, "{}:{}", domain.len(), domain);
        for (k, v) in entries {
            let _ = write!(s, "|{}:{}={}:{}", k.len(), k, v.len(), v);
        }
        CounterKey(Arc::from(s))
    }

    /// The encoded key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::CounterKey;

    #[test]
    fn key_format_is_pinned() {
        let k = CounterKey::new("web", [("tenant", "acme"), ("path", "/a|b")]);
        assert_eq!(k.as_str(), "3:web|6:tenant=4:acme|4:path=4:/a|b");
    }

    #[test]
    fn lookalike_descriptors_do_not_collide() {
        let a = CounterKey::new("d", [("a", "b=c")]);
        let b = CounterKey::new("d", [("a=b", "c")]);
        let c = CounterKey::new("d", [("a", "b"), ("c", "")]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(b, c);
    }
}
