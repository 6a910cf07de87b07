//! The store interface: where counters live and how one request is decided atomically.
//!
//! A store receives every limited descriptor of one request as one batch and answers one
//! [`Decision`] per item, in order. The store owns the clock (the memory store an injected
//! [`crate::clock::Clock`]; the Redis store Redis's `TIME` inside its script), so
//! replicas never disagree about time. The batch shape is what lets Redis check several
//! descriptors in one round trip.
//!
//! # The batch's rules
//! All or nothing (no counter pollution), check-only and blocked items, charges and
//! grants are written once, as pure code, in [`batch`]: a store loads its counters'
//! states, calls [`batch::decide`] and applies what it says (the Redis store runs the
//! same rules in its Lua script). envoyproxy/ratelimit increments every counter; under
//! [`Counting::PerDescriptor`] (`--counting per-descriptor`) so do we.

pub mod batch;
pub mod gossip;
pub mod health;
pub mod memory;
pub mod redis;
pub mod shards;

use crate::algorithm::concurrency::HoldOp;
use crate::algorithm::lease::Quota;
use crate::algorithm::{Decision, Limit};
pub use batch::Counting;
use sha2::{Digest, Sha256};
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
    /// Hits to add. 0 is a **check-only** item (a descriptor's own `hits_addend` of 0):
    /// decided as whether one hit would fit, `remaining` as it stands, nothing counted.
    pub hits: u64,
    /// Shadow mode: never blocks the request, so never blocks the other items' consumption.
    pub shadow: bool,
    /// A lease to take for the caller if the request is admitted (quota leases, see
    /// [`crate::algorithm::lease`]): set only when the caller asked for this descriptor, its
    /// rule has a `quota` and is enforced (not shadow). A store grants only to an item whose
    /// counter appears once in the batch.
    pub quota: Option<Quota>,
    /// Quota mode: blocks the request only together with every other quota item (see
    /// [`admits`]). Shadow mode wins when both are set.
    pub quota_mode: bool,
    /// `requests_per_unit: 0`: always over, without reading or writing a counter; only
    /// `limit.unit` is read (its window's end is the reported reset, as the reference).
    pub blocked: bool,
    /// What the call does with its hold id on a concurrency limit (acquire or release, see
    /// [`crate::algorithm::concurrency`]); `None` elsewhere, and on a concurrency limit a
    /// check-only item (a charge never takes a hold). The RLS layer always sets it for a
    /// concurrency item of an admission.
    pub hold: Option<HoldOp>,
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
    /// Too many calls to the backend are in flight already (a slow or unreachable Redis);
    /// new ones fail at once rather than queue.
    #[error("store overloaded: {0} calls already in flight")]
    Overloaded(usize),
}

/// A store of counters that decides batches atomically.
pub trait Store: Send + Sync + 'static {
    /// Decides every item of one request together, per the all-or-nothing rule above, and
    /// answers one decision per item in order.
    fn check(
        &self,
        batch: &[Check],
    ) -> impl Future<Output = Result<Vec<Decision>, StoreError>> + Send;

    /// Counts every item of one request unconditionally, and answers one decision per
    /// item in order: as [`Store::check`] for an item its hits fit, else over the limit
    /// with the exact time until one hit fits again (see [`crate::algorithm::charge`]).
    ///
    /// This is the stream-end charge of a cost known only after the response (an LLM
    /// answer's tokens): the request was admitted already, so what it cost must count
    /// even past the limit, or the budget leaks. Shadow items are counted too.
    fn charge(
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

    fn charge(
        &self,
        batch: &[Check],
    ) -> impl Future<Output = Result<Vec<Decision>, StoreError>> + Send {
        (**self).charge(batch)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}

/// The identity of a counter: a 128-bit fingerprint of the domain and the request
/// descriptor's entries, never the client's bytes themselves.
///
/// Why a fingerprint: a descriptor value is whatever a client sent (a 50 KB header, a
/// 1 MiB gRPC field), and a counter lives for as long as its limit's window. Holding the
/// bytes made a cell's size, and so the memory store's and Redis's memory, depend on what
/// clients send; a fingerprint makes every counter the same size.
///
/// It is the first 16 bytes of SHA-256 over an unambiguous encoding: every part is
/// prefixed by its byte length (8 bytes, little-endian), so no choice of keys or values can
/// make two different descriptors encode alike, and finding two descriptors with one
/// fingerprint takes about 2^64 SHA-256 evaluations. It must be the same on every replica
/// and version (Redis keys are built from it, see `redis::key`), so it is a fixed
/// cryptographic hash rather than a randomly keyed one; the memory store still hashes it
/// with a random key for its maps. Golden-tested below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey([u8; 16]);

impl CounterKey {
    /// The key of `entries` in `domain`.
    pub fn new<'a, I>(domain: &str, entries: I) -> CounterKey
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        CounterKey::digest(domain, entries, None)
    }

    /// The key of `entries` in `domain` under a request's own limit override
    /// (`RateLimitDescriptor.limit`): the override's rate and unit are part of the
    /// identity, so overridden and configured counters never share or reset each other,
    /// and each distinct override rate of a descriptor is its own counter (as in Redis,
    /// whose keys carry the limit). An extra part makes the encoding's part count even,
    /// where a plain key's is odd, so the two can never encode alike.
    pub fn overridden<'a, I>(domain: &str, entries: I, limit: &Limit) -> CounterKey
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let tag = format!(
            "override:{}/{}",
            limit.requests_per_unit,
            limit.unit.seconds()
        );
        CounterKey::digest(domain, entries, Some(&tag))
    }

    fn digest<'a, I>(domain: &str, entries: I, tail: Option<&str>) -> CounterKey
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut h = Sha256::new();
        let mut part = |bytes: &str| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes.as_bytes());
        };
        part(domain);
        for (k, v) in entries {
            part(k);
            part(v);
        }
        if let Some(tail) = tail {
            part(tail);
        }
        let digest = h.finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        CounterKey(key)
    }

    /// The fingerprint as 32 lowercase hex digits (for Redis keys and logs).
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(32);
        for b in self.0 {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// The fingerprint [`CounterKey::hex`] wrote; `None` for anything else (the gossip
    /// store reads peers' keys, which are never trusted to be well formed).
    pub fn from_hex(text: &str) -> Option<CounterKey> {
        let bytes = text.as_bytes();
        if bytes.len() != 32 {
            return None;
        }
        let mut key = [0u8; 16];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16);
            key[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
        }
        Some(CounterKey(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Unit};
    use std::num::{NonZeroU16, NonZeroU32};

    #[test]
    fn fingerprint_is_pinned() {
        // Redis keys embed it: a change here orphans every counter in Redis, so it must
        // come with a bump of the Redis key version.
        let k = CounterKey::new("web", [("tenant", "acme"), ("path", "/a|b")]);
        assert_eq!(k.hex(), "7488dcd026b8897b6efd78a0ba89d93f");
        assert_eq!(k.hex().len(), 32);
    }

    #[test]
    fn the_key_is_the_same_size_whatever_the_value() {
        let big = "x".repeat(1 << 20);
        let a = CounterKey::new("web", [("tenant", big.as_str())]);
        let b = CounterKey::new("web", [("tenant", "y")]);
        assert_eq!(std::mem::size_of_val(&a), 16);
        assert_ne!(a, b);
        assert_eq!(a, CounterKey::new("web", [("tenant", big.as_str())]));
    }

    #[test]
    fn an_override_has_its_own_counter_per_rate() {
        let limit = |rpu| Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap_or(NonZeroU32::MIN),
            unit: Unit::Minute,
            unit_multiplier: NonZeroU16::MIN,
            algorithm: Algorithm::FixedWindow,
        };
        let entries = [("user", "a")];
        let plain = CounterKey::new("web", entries);
        let three = CounterKey::overridden("web", entries, &limit(3));
        assert_ne!(plain, three);
        assert_ne!(three, CounterKey::overridden("web", entries, &limit(4)));
        assert_eq!(three, CounterKey::overridden("web", entries, &limit(3)));
        assert_eq!(three.hex(), "aa0959f531d5dd14f122bef34205d12e");
    }

    #[test]
    fn hex_reads_back() {
        let k = CounterKey::new("web", [("tenant", "acme")]);
        assert_eq!(CounterKey::from_hex(&k.hex()), Some(k));
        assert_eq!(CounterKey::from_hex("xyz"), None);
        assert_eq!(CounterKey::from_hex(&"g".repeat(32)), None);
        assert_eq!(CounterKey::from_hex(&"é".repeat(16)), None);
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
