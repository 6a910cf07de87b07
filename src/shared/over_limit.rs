//! The over-limit cache: denials of the rate limit service, remembered in shared data so
//! that every worker of an Envoy rejects a matching request without asking again.
//!
//! **What is remembered.** The service decides a request from all of its descriptors
//! together: a limit another descriptor's limit `replaces` is dropped, a `quota_mode`
//! limit rejects only when every quota-mode limit of the request is over. So a denial
//! says something about the set of descriptors it was given, and nothing about any one of
//! them on its own. When the service answers OVER_LIMIT, the call's whole set of global
//! descriptors (rules and values, in order) is remembered as one entry ([`Denial`]), with
//! the hits each was asked for, until the earliest `duration_until_reset` among the
//! descriptors said to be over (and no longer than a configured trust cap). A later
//! request is rejected from it only if it brings the same set, asks each descriptor for
//! at least the hits denied, and the instant has not passed ([`Denial::covers`]).
//!
//! This is sound for any service whose answer is a monotone function of its descriptors'
//! states, as the RLS v3 rules are (over when an enforced limit is over, or when every
//! quota-mode limit is): until the earliest reset, every descriptor said to be over is
//! still over (`duration_until_reset` is no later than the instant one would be admitted
//! again), more hits on a descriptor never turn it from over to within its limit, and so
//! the same set, asking as much or more, gets the same answer.
//!
//! Memory is fixed like the bucket table's ([`crate::shared::table`]): `sets` shared-data keys
//! created before traffic, each holding at most [`WAYS`] entries of at most
//! [`ENTRY_MAX`] bytes. An entry is keyed by a 128-bit fingerprint of the domain and the
//! set, never the client's bytes. Looking a request up is one read of its set. An expired
//! entry is free; when a set is full of live entries, the one that expires first is
//! evicted (counted). The service's `raw_body` and response headers (only those
//! [`crate::wire::service_headers`] let through) are kept in the entry so that the cached reply
//! is the service's; a denial whose body and headers do not fit is not cached (counted).
//!
//! Format (version 3, pinned by tests): key `floodgate/v3/olc/<index>`; key
//! `floodgate/v3/olc/sets` holds how many set keys exist (u32 little-endian). A set's
//! value is its entries one after the other, each little-endian: fingerprint u128, until
//! (host clock, ns) u64, cost count u8 and each cost u32, over count u8 and each over
//! descriptor as position u8, limit u32, reset instant (host clock, ns) u64, body length
//! u16 and body, header count u8 and each header as name length u16, name, value length
//! u16, value. (An Envoy that ran a version-2 module keeps its `floodgate/v2/olc/` keys
//! until it restarts; nothing reads them.)

use crate::shared::sets::{edit, Edit, Sets};
use crate::shared::{SharedData, StoreError};
use std::num::NonZeroU32;

mod entry;
pub use entry::{decode_set, encode_set, find_entry, Costs, Denial, Over, Overs, ENTRY_MAX};

/// Entries one set holds.
pub const WAYS: u32 = 4;

/// Prefix of the cache's set keys.
const PREFIX: &[u8] = b"floodgate/v3/olc/";

/// The key counting how many set keys exist.
pub const SETS_KEY: &[u8] = b"floodgate/v3/olc/sets";

/// Attempts at writing a set when other workers write it at the same time.
const WRITE_ATTEMPTS: u32 = 4;

/// What storing a denial did (gave up: the denial is not remembered).
pub use crate::shared::sets::Stored;

/// The cache's shape: how many sets of [`WAYS`] entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimitCache {
    sets: Sets,
}

impl OverLimitCache {
    /// A cache of at least `slots` entries (rounded up to whole sets).
    pub fn new(slots: NonZeroU32) -> OverLimitCache {
        OverLimitCache {
            sets: Sets::new(PREFIX, SETS_KEY, slots.get().div_ceil(WAYS)),
        }
    }

    /// Number of set keys.
    pub fn sets(&self) -> u32 {
        self.sets.sets()
    }

    fn home(&self, fingerprint: u128) -> crate::shared::table::SlotKey {
        self.sets.home(fingerprint)
    }

    /// Creates the set keys before traffic, as [`crate::shared::table::Table::prepare`] does for
    /// the bucket table. Returns the number of keys created.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        self.sets.prepare(store)
    }

    /// The live denial that rejects a request of the set `fingerprint` asking `costs`, if
    /// there is one. One shared-data read; the clock (`now_ns`) is read only when the set
    /// holds an entry for these descriptors, which most look-ups (those of requests the
    /// service admits) do not find. A clock that fails finds nothing: the call decides.
    pub fn lookup(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        costs: &[u32],
        now_ns: impl FnOnce() -> Option<u64>,
    ) -> Result<Option<Denial>, StoreError> {
        let Some(read) = store.get(&self.home(fingerprint))? else {
            return Ok(None);
        };
        // One entry per set of descriptors ([`OverLimitCache::store`] replaces it).
        match find_entry(&read.value, |d| d.fingerprint == fingerprint) {
            Some(entry) if now_ns().is_some_and(|now| entry.covers(costs, now)) => Ok(Some(entry)),
            _ => Ok(None),
        }
    }

    /// Remembers `denial` (which must [`fit`](Denial::fits)) at `now_ns`: expired entries
    /// of its set are dropped, a live entry for the same set of descriptors is replaced
    /// unless it already says at least as much, and when the set is full the entry
    /// expiring first is evicted.
    pub fn store(
        &self,
        store: &impl SharedData,
        denial: Denial,
        now_ns: u64,
    ) -> Result<Stored, StoreError> {
        let key = self.home(denial.fingerprint);
        let edited = edit(store, &key, WRITE_ATTEMPTS, |value| {
            match merge(decode_set(value), &denial, now_ns) {
                Some((entries, evicted)) => Edit::Write(encode_set(&entries), evicted),
                None => Edit::Keep(false),
            }
        })?;
        Ok(edited.into())
    }
}

/// The set `entries` becomes with `denial` in it at `now_ns`, and whether a live entry
/// was evicted; `None` when nothing needs writing (a live entry already dominates it).
fn merge(entries: Vec<Denial>, denial: &Denial, now_ns: u64) -> Option<(Vec<Denial>, bool)> {
    let mut live: Vec<Denial> = Vec::with_capacity(WAYS as usize);
    for e in entries.into_iter().filter(|e| e.until_ns > now_ns) {
        if e.fingerprint == denial.fingerprint {
            if e.dominates(denial) {
                return None;
            }
        } else {
            live.push(e);
        }
    }
    let mut evicted = false;
    while live.len() >= WAYS as usize {
        let first = live
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.until_ns)
            .map_or(0, |(i, _)| i);
        live.remove(first);
        evicted = true;
    }
    live.push(denial.clone());
    Some((live, evicted))
}

#[cfg(test)]
mod tests;
