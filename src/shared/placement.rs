//! Where an entry lives in the shared-data tables, and the per-Envoy secret that makes it
//! impossible to predict from outside.
//!
//! Every table in shared data (local and fallback buckets in [`crate::shared::table`], quota
//! leases in [`crate::shared::lease`], the over-limit cache in [`crate::shared::over_limit`]) finds an
//! entry by a 128-bit fingerprint of what identifies it, and keeps it in the slot or set
//! the fingerprint picks (`fingerprint % size`). Were the hash keyed by constants, anyone
//! with the source could compute offline which descriptor values land beside a victim's
//! entry, and send exactly those to have it evicted: a drained bucket replaced by a full
//! one, a lease whose hits the service already counted thrown away. So every fingerprint
//! is SipHash-1-3 (a keyed pseudo-random function) under a [`PlacementKey`]: 128 random
//! bits drawn once per Envoy and kept in its shared data under [`KEY`], so that every
//! worker's VM, a VM reloaded after a crash and the VMs of a listener update use the same
//! key and find the same entries. Each kind of entry hashes its own 8-byte purpose tag
//! first, so entries of different tables never share an identity.
//!
//! # Creating the key
//!
//! The host draws the bytes from WASI `random_get`, which Envoy's proxy-wasm host
//! implements with BoringSSL's `RAND_bytes`. [`PlacementKey::load_or_create`] then agrees
//! on one key with every other VM of the shared data, although the first write of a key
//! cannot be conditional (see [`crate::shared`]):
//!
//! 1. Read [`KEY`]. Sixteen bytes: that is the key.
//! 2. Missing: create it empty (unconditionally), and read again.
//! 3. Empty (or unreadable): write the drawn key with the token the empty value was read
//!    with. A conflict means another VM wrote first: read again, and take its key.
//!
//! A stored key is only ever replaced by a compare-and-swap on an empty value, and the
//! value is empty only right after creation. One race is left: two VMs both find the key
//! missing, one creates it and stores its key, and the other's creation, decided before,
//! lands after and empties it again; the second VM then stores its own key. Envoy
//! configures the main thread's VM before the workers', so workers normally only read;
//! should VMs race anyway, every root context compares its key with the stored one once
//! a tick ([`PlacementKey::reconcile`]) and takes the stored one (or stores its own into
//! an emptied value), so all converge within a second. Until then, entries written under
//! the two keys never meet: a fingerprint under one key is not one under the other (two
//! keyed 128-bit hashes), so no entry is ever taken for another's. The cost is that a
//! descriptor seen by both VMs in that second had two entries, one of which is abandoned
//! and reused once idle like any other.

use crate::bucket::Quota;
use crate::config::Concurrency;
use crate::shared::{SetError, SharedData, StoreError};
use siphasher::sip128::{Hasher128, SipHasher13};
use std::hash::Hasher;

/// The shared-data key holding the placement key (16 bytes, two little-endian u64).
pub const KEY: &[u8] = b"floodgate/placement-key/v1";

/// Size of the stored key.
const KEY_LEN: usize = 16;

/// Reads and writes one agreement may take when other VMs write at the same time.
const ATTEMPTS: u32 = 8;

/// The secret that keys every fingerprint of this Envoy's shared data. Its `Debug` does
/// not print it: it is what keeps placement unpredictable.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PlacementKey {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for PlacementKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlacementKey(..)")
    }
}

/// Why no key could be agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementError {
    /// Shared data failed.
    Store(StoreError),
    /// The host could not draw random bytes (its status).
    Random(u32),
    /// Every attempt met another VM's write.
    Contention,
}

/// What [`PlacementKey::load_or_create`] agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreed {
    /// The key every VM of the shared data uses.
    pub key: PlacementKey,
    /// Whether it is the one this call drew (it created the key).
    pub drawn: bool,
}

impl PlacementKey {
    /// The key made of these bytes (as stored).
    pub const fn from_bytes(b: [u8; KEY_LEN]) -> PlacementKey {
        PlacementKey {
            k0: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            k1: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }

    /// The stored bytes.
    pub fn to_bytes(self) -> [u8; KEY_LEN] {
        let mut out = [0u8; KEY_LEN];
        out[..8].copy_from_slice(&self.k0.to_le_bytes());
        out[8..].copy_from_slice(&self.k1.to_le_bytes());
        out
    }

    /// The key every VM of `store` uses: the stored one, or, when there is none yet,
    /// one drawn with `draw` (called at most once, only then) and stored. See the module
    /// documentation for how this agrees with other VMs doing the same.
    pub fn load_or_create(
        store: &impl SharedData,
        draw: impl FnOnce() -> Result<[u8; KEY_LEN], u32>,
    ) -> Result<Agreed, PlacementError> {
        let mut draw = Some(draw);
        let mut drawn: Option<PlacementKey> = None;
        for _ in 0..ATTEMPTS {
            let Some(read) = store.get(KEY).map_err(PlacementError::Store)? else {
                store.create(KEY, &[]).map_err(PlacementError::Store)?;
                continue;
            };
            if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(read.value.as_slice()) {
                let key = PlacementKey::from_bytes(bytes);
                return Ok(Agreed {
                    key,
                    drawn: drawn == Some(key),
                });
            }
            let candidate = match (drawn, draw.take()) {
                (Some(key), _) => key,
                (None, Some(draw)) => {
                    PlacementKey::from_bytes(draw().map_err(PlacementError::Random)?)
                }
                (None, None) => return Err(PlacementError::Contention),
            };
            drawn = Some(candidate);
            match store.set(KEY, &candidate.to_bytes(), read.cas) {
                Ok(()) => {
                    return Ok(Agreed {
                        key: candidate,
                        drawn: true,
                    })
                }
                // Another VM wrote first: read its key.
                Err(SetError::Conflict) => continue,
                Err(SetError::Store(e)) => return Err(PlacementError::Store(e)),
            }
        }
        Err(PlacementError::Contention)
    }

    /// The key to use from now on, given that this VM uses `self`: the stored one if it
    /// differs (another VM's, after the startup race the module documentation describes),
    /// `None` if it is ours. An emptied value gets ours back. One read when they agree.
    pub fn reconcile(
        self,
        store: &impl SharedData,
    ) -> Result<Option<PlacementKey>, PlacementError> {
        let agreed = PlacementKey::load_or_create(store, || Ok(self.to_bytes()))?;
        Ok((agreed.key != self).then_some(agreed.key))
    }

    /// A hasher for one kind of entry, told apart by its 8-byte `purpose`.
    fn hasher(&self, purpose: &[u8; 8]) -> SipHasher13 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write(purpose);
        h
    }

    /// The identity of a local bucket: the rule (name and quota, so that a changed limit
    /// starts afresh) and its descriptor values. Stored instead of the values, so that a
    /// bucket's size never depends on what clients send; 128 bits make an accidental
    /// collision negligible at any table size.
    pub fn bucket(&self, rule: &str, quota: Quota, values: &[Vec<u8>]) -> u128 {
        self.bucket_prefix(rule, quota).values(values)
    }

    /// What [`PlacementKey::bucket`] hashes before the values, hashed once: a rule's
    /// buckets all start with it.
    pub fn bucket_prefix(&self, rule: &str, quota: Quota) -> Prefix {
        self.rule_prefix(b"bucketv1", rule, quota)
    }

    /// The identity of a global rule's fallback bucket: as [`PlacementKey::bucket`], with
    /// its own purpose, so a fallback bucket never shares an identity with a local one.
    pub fn fallback(&self, rule: &str, quota: Quota, values: &[Vec<u8>]) -> u128 {
        self.fallback_prefix(rule, quota).values(values)
    }

    /// What [`PlacementKey::fallback`] hashes before the values, hashed once.
    pub fn fallback_prefix(&self, rule: &str, quota: Quota) -> Prefix {
        self.rule_prefix(b"fallbk01", rule, quota)
    }

    /// What the fingerprint of a concurrency rule's key hashes before the values (its
    /// own purpose; the rule's name, `max` and duration, so that a changed limit starts
    /// afresh), hashed once.
    pub fn concurrency_prefix(&self, rule: &str, limit: Concurrency) -> Prefix {
        let mut h = self.hasher(b"concurr1");
        write_field(&mut h, rule.as_bytes());
        h.write_u32(limit.max);
        h.write_u64(limit.max_duration_ms);
        Prefix(h)
    }

    fn rule_prefix(&self, purpose: &[u8; 8], rule: &str, quota: Quota) -> Prefix {
        let mut h = self.hasher(purpose);
        write_field(&mut h, rule.as_bytes());
        h.write_u32(quota.capacity());
        h.write_u64(quota.rate_micro());
        Prefix(h)
    }

    /// The identity of a global rule's descriptor: the service's domain, the rule and its
    /// values. The domain is in it because two plugin configurations of one Envoy share
    /// its shared data. It finds the descriptor's lease, and it is what the over-limit
    /// cache's set identities are made of ([`PlacementKey::denial`]), so a request hashes
    /// its descriptor values once for both.
    pub fn lease(&self, domain: &str, rule: &str, values: &[Vec<u8>]) -> u128 {
        self.lease_prefix(domain, rule).values(values)
    }

    /// What [`PlacementKey::lease`] hashes before the values, hashed once.
    pub fn lease_prefix(&self, domain: &str, rule: &str) -> Prefix {
        let mut h = self.hasher(b"leasev01");
        write_field(&mut h, domain.as_bytes());
        write_field(&mut h, rule.as_bytes());
        Prefix(h)
    }

    /// The identity of a call's whole set of global descriptors in the over-limit cache,
    /// from each descriptor's identity ([`PlacementKey::lease`]) in the order they are
    /// sent. The service decides a request from all of its descriptors together, so a
    /// denial is remembered for the set, never for one of them.
    ///
    /// A set of one descriptor (the common case: one global rule applies) is that
    /// descriptor's identity itself, with no second hash: the lease table and the cache
    /// are separate tables that never compare their fingerprints with each other, and the
    /// identity is as keyed and as unpredictable in one as in the other. A set of several
    /// is the keyed hash of its domain, its size and their identities, under its own
    /// purpose, so it is never a descriptor's identity.
    pub fn denial(&self, domain: &str, identities: &[u128]) -> u128 {
        self.denial_prefix(domain).denial(identities)
    }

    /// What [`PlacementKey::denial`] hashes before the identities of a set of several,
    /// hashed once.
    pub fn denial_prefix(&self, domain: &str) -> Prefix {
        let mut h = self.hasher(b"denyset2");
        write_field(&mut h, domain.as_bytes());
        Prefix(h)
    }
}

/// The fixed fields of one kind of fingerprint (its purpose, rule, quota, domain) already
/// hashed under the key: what every request would otherwise hash again before its own
/// values. Finishing one gives exactly the fingerprint the whole input would (the hash is
/// a stream), so the entries' identities do not change. Its `Debug` does not print the
/// state, which holds the key.
#[derive(Clone, Copy)]
pub struct Prefix(SipHasher13);

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prefix(..)")
    }
}

impl Prefix {
    /// The fingerprint of a rule's entry for these descriptor values
    /// ([`PlacementKey::bucket`], [`PlacementKey::fallback`], [`PlacementKey::lease`]).
    pub fn values(&self, values: &[Vec<u8>]) -> u128 {
        let mut h = self.0;
        for v in values {
            write_field(&mut h, v);
        }
        h.finish128().as_u128()
    }

    /// The fingerprint of a set of descriptors in the over-limit cache from their
    /// identities, from [`PlacementKey::denial_prefix`] (see [`PlacementKey::denial`]).
    pub fn denial(&self, identities: &[u128]) -> u128 {
        if let [identity] = identities {
            return *identity;
        }
        let mut h = self.0;
        h.write_u64(identities.len() as u64);
        for identity in identities {
            h.write(&identity.to_le_bytes());
        }
        h.finish128().as_u128()
    }
}

/// Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
fn write_field(h: &mut SipHasher13, bytes: &[u8]) {
    h.write_u64(bytes.len() as u64);
    h.write(bytes);
}

#[cfg(test)]
mod tests;
