//! The bucket table: a fixed number of shared-data slots holding every bucket of an Envoy.
//!
//! Shared-data keys can never be deleted, so a key per bucket would let clients that send
//! a million distinct header values create a million keys. Instead the table has exactly
//! `max_buckets` slot keys, all created before traffic (so that every later write can be
//! a compare-and-swap; the first write of a key cannot be). A bucket lives in one slot of
//! a short probe window starting at its fingerprint's home slot; each slot stores the
//! bucket's 128-bit fingerprint, never the client's values, so memory is fixed whatever
//! clients send.
//!
//! A slot is reused when its bucket is *full* (idle long enough to have refilled: it
//! carries no information). When every slot of the window holds a bucket that is still
//! refilling, the one closest to full is evicted; its client gets back at most the tokens
//! it was missing. Evictions are counted.
//!
//! Slot keys do not depend on the table's size (see [`key`]): a table of `n` slots uses
//! keys `0..n`, whatever size came before, so any sequence of `max_buckets` changes costs
//! the shared data of the largest table ever configured, never one table per change. A
//! table mixes its size into the fingerprints it stores ([`key::salt`]), so a change of
//! size restarts every bucket: the buckets of the old size are other tables' buckets,
//! reused when idle like any other.
//!
//! Format (version 2, pinned by tests): key `floodgate/v2/<index>`; key
//! `floodgate/v2/slots` holds how many slot keys exist (u32 little-endian); a slot's
//! value is empty (free) or 40 bytes little-endian: fingerprint u128 XOR the table's salt,
//! TAT u128, rate u64.

mod key;

use crate::bucket::{self, Tat};
use crate::shared::{SetError, SharedData, StoreError};
pub use key::SlotKey;

/// Slots looked at for one bucket, starting at its home slot.
pub const PROBE_WINDOW: u32 = 8;

/// Size in bytes of an occupied slot's value.
const SLOT_LEN: usize = 40;

/// What one slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Identity of the bucket (see [`crate::shared::placement::PlacementKey::bucket`]).
    pub fingerprint: u128,
    /// The bucket's GCRA state.
    pub tat: Tat,
    /// The bucket's refill rate (micro-tokens per second), so that any reader can tell
    /// whether it is full without knowing its rule.
    pub rate_micro: u64,
}

impl Slot {
    /// The stored bytes.
    pub fn encode(&self) -> [u8; SLOT_LEN] {
        let mut out = [0u8; SLOT_LEN];
        out[..16].copy_from_slice(&self.fingerprint.to_le_bytes());
        out[16..32].copy_from_slice(&self.tat.0.to_le_bytes());
        out[32..].copy_from_slice(&self.rate_micro.to_le_bytes());
        out
    }

    /// The slot in `bytes`; `None` for a free slot (anything but a whole slot is free:
    /// a value we cannot read carries nothing we could use).
    pub fn decode(bytes: &[u8]) -> Option<Slot> {
        let bytes: &[u8; SLOT_LEN] = bytes.try_into().ok()?;
        let (fp, rest) = bytes.split_at(16);
        let (tat, rate) = rest.split_at(16);
        Some(Slot {
            fingerprint: u128::from_le_bytes(fp.try_into().ok()?),
            tat: Tat(u128::from_le_bytes(tat.try_into().ok()?)),
            rate_micro: u64::from_le_bytes(rate.try_into().ok()?),
        })
    }

    /// Nanoseconds until this bucket is full (0: full now; `u64::MAX`: never).
    fn full_in_ns(&self, now_ns: u64) -> u64 {
        bucket::full_in_ns(self.tat, now_ns, self.rate_micro).unwrap_or(u64::MAX)
    }
}

/// How the slot of a found bucket came to be its.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The bucket was already there.
    Existing,
    /// A never-used slot: the table holds one more bucket.
    Empty,
    /// The slot of a full (idle) bucket, reused.
    Idle,
    /// The slot of a bucket that was still refilling, evicted.
    Evicted,
}

/// Where a bucket lives (or will live) and its state as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Slot index.
    pub index: u32,
    /// The slot's key, kept for the write that follows the read.
    pub key: SlotKey,
    /// CAS token the slot was read with.
    pub cas: u32,
    /// The bucket's state: as stored for an existing bucket, full for a new one.
    pub state: Tat,
    /// Whether the slot is the bucket's already.
    pub origin: Origin,
}

/// Attempts at recording the number of slot keys when other preparers race us. Losing
/// every one only leaves the record behind, so that a later [`Table::prepare`] checks
/// some keys again.
const RECORD_ATTEMPTS: u32 = 8;

/// The table's shape: how many slots, and the salt its size gives its fingerprints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    size: u32,
    salt: u128,
}

impl Table {
    /// A table of `size` slots (at least one).
    pub fn new(size: std::num::NonZeroU32) -> Table {
        Table {
            size: size.get(),
            salt: key::salt(size.get()),
        }
    }

    /// Number of slots.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The shared-data key of slot `index`, built without allocating: this runs twice
    /// per request.
    pub fn key(&self, index: u32) -> SlotKey {
        SlotKey::new(index)
    }

    /// Creates every slot key this table uses that does not exist yet, so that all later
    /// writes can be compare-and-swap. Idempotent, and cheap once done (one read of the
    /// record of how many keys exist). Returns the number of keys created: 0 for a table
    /// no larger than the largest one prepared before in this shared data.
    ///
    /// Run it when the plugin is configured, before traffic: Envoy configures the main
    /// thread's VM first, which creates the keys; workers then only read the record. Keys
    /// past the old record are not in any running table's reach (a table of `n` slots
    /// only touches keys `0..n`), so creating them cannot overwrite a bucket.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        prepare_keys(store, key::SLOTS_KEY, self.size, |index| self.key(index))
    }

    /// The bytes of `slot` as this table stores them (its salt mixed in).
    fn encode(&self, slot: &Slot) -> [u8; SLOT_LEN] {
        Slot {
            fingerprint: slot.fingerprint ^ self.salt,
            ..*slot
        }
        .encode()
    }

    /// The slot in `bytes` as this table sees it (its salt taken out); `None` if free.
    fn decode(&self, bytes: &[u8]) -> Option<Slot> {
        Slot::decode(bytes).map(|slot| Slot {
            fingerprint: slot.fingerprint ^ self.salt,
            ..slot
        })
    }

    /// The slot of bucket `fingerprint`, or the slot it should take: the first free or
    /// idle slot of its probe window, else the one whose bucket is closest to full.
    pub fn find(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        now_ns: u64,
    ) -> Result<Found, StoreError> {
        let home = (fingerprint as u64 % u64::from(self.size)) as u32;
        let window = PROBE_WINDOW.min(self.size);
        let mut reusable: Option<Found> = None;
        let mut evictable: Option<(u64, Found)> = None;
        for step in 0..window {
            let index = (home + step) % self.size;
            let key = self.key(index);
            let read = match store.get(&key)? {
                Some(read) => read,
                // Not prepared (should not happen): create it, then read its token.
                None => {
                    store.create(&key, &[])?;
                    store.get(&key)?.ok_or(StoreError { status: 1 })?
                }
            };
            let new = |origin| Found {
                index,
                key,
                cas: read.cas,
                state: Tat::default(),
                origin,
            };
            match self.decode(&read.value) {
                Some(slot) if slot.fingerprint == fingerprint => {
                    return Ok(Found {
                        index,
                        key,
                        cas: read.cas,
                        state: slot.tat,
                        origin: Origin::Existing,
                    })
                }
                // Slots are never emptied, so no bucket lives past a free one.
                None => return Ok(reusable.unwrap_or(new(Origin::Empty))),
                Some(slot) => {
                    let full_in = slot.full_in_ns(now_ns);
                    if full_in == 0 {
                        reusable.get_or_insert(new(Origin::Idle));
                    } else if evictable.as_ref().is_none_or(|(best, _)| full_in < *best) {
                        evictable = Some((full_in, new(Origin::Evicted)));
                    }
                }
            }
        }
        reusable
            .or(evictable.map(|(_, found)| found))
            .ok_or(StoreError { status: 1 })
    }

    /// Stores `slot` at `index` if the slot still carries `cas`.
    pub fn write(
        &self,
        store: &impl SharedData,
        index: u32,
        slot: &Slot,
        cas: u32,
    ) -> Result<(), SetError> {
        store.set(&self.key(index), &self.encode(slot), cas)
    }

    /// Stores `slot` where `found` was read, if nobody wrote it since.
    pub fn write_found(
        &self,
        store: &impl SharedData,
        found: &Found,
        slot: &Slot,
    ) -> Result<(), SetError> {
        store.set(&found.key, &self.encode(slot), found.cas)
    }

    /// Reads the slot at `index` with its CAS token.
    pub fn read(
        &self,
        store: &impl SharedData,
        index: u32,
    ) -> Result<Option<(Slot, u32)>, StoreError> {
        Ok(store
            .get(&self.key(index))?
            .and_then(|read| self.decode(&read.value).map(|slot| (slot, read.cas))))
    }
}

/// Creates the keys `key(0..size)` that do not exist yet, and records in `count_key` how
/// many exist, so that a later call only reads that record (see [`Table::prepare`]).
/// Returns the number of keys created.
pub fn prepare_keys(
    store: &impl SharedData,
    count_key: &[u8],
    size: u32,
    key: impl Fn(u32) -> SlotKey,
) -> Result<u32, StoreError> {
    let mut created = 0;
    for _ in 0..RECORD_ATTEMPTS {
        let record = store.get(count_key)?;
        let existing = record.as_ref().map_or(0, |r| key::decode_count(&r.value));
        if existing >= size {
            return Ok(created);
        }
        for index in existing..size {
            let slot_key = key(index);
            if store.get(&slot_key)?.is_none() {
                store.create(&slot_key, &[])?;
                created += 1;
            }
        }
        let count = key::encode_count(size);
        let recorded = match record {
            Some(r) => store.set(count_key, &count, r.cas),
            None => store.create(count_key, &count).map_err(SetError::Store),
        };
        match recorded {
            Ok(()) => return Ok(created),
            // Someone else recorded meanwhile: read their record and compare again.
            Err(SetError::Conflict) => continue,
            Err(SetError::Store(e)) => return Err(e),
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests;
