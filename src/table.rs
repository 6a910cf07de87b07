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
//! Format (version 1, pinned by tests): key `floodgate/v1/<max_buckets>/<index>`; value
//! empty (free) or 40 bytes little-endian: fingerprint u128, TAT u128, rate u64.

use crate::bucket::{self, Tat};
use crate::shared::{SetError, SharedData, StoreError};

/// Slots looked at for one bucket, starting at its home slot.
pub const PROBE_WINDOW: u32 = 8;

/// Size in bytes of an occupied slot's value.
const SLOT_LEN: usize = 40;

/// What one slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Identity of the bucket (see [`crate::descriptor::fingerprint`]).
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

/// A slot's shared-data key, on the stack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SlotKey {
    buf: [u8; SlotKey::CAPACITY],
    len: usize,
}

impl SlotKey {
    /// "floodgate/v1/" + two u32 in decimal + "/" fit with room to spare.
    const CAPACITY: usize = 40;

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn push_number(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[start..]);
    }
}

impl std::fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::ops::Deref for SlotKey {
    type Target = str;

    fn deref(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
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

/// The table's shape: how many slots, and so which keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    size: u32,
}

impl Table {
    /// A table of `size` slots (at least one).
    pub fn new(size: std::num::NonZeroU32) -> Table {
        Table { size: size.get() }
    }

    /// Number of slots.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The shared-data key of slot `index`, built without allocating: this runs twice
    /// per request.
    pub fn key(&self, index: u32) -> SlotKey {
        let mut key = SlotKey {
            buf: [0; SlotKey::CAPACITY],
            len: 0,
        };
        key.push(b"floodgate/v1/");
        key.push_number(self.size);
        key.push(b"/");
        key.push_number(index);
        key
    }

    /// The key marking that every slot key exists.
    fn ready_key(&self) -> String {
        format!("floodgate/v1/{}/ready", self.size)
    }

    /// Creates every slot key that does not exist yet, so that all later writes can be
    /// compare-and-swap. Idempotent, and cheap once done (one read of the ready marker).
    /// Returns the number of keys created.
    ///
    /// Run it when the plugin is configured, before traffic: Envoy configures the main
    /// thread's VM first, which creates the keys; workers then only see the marker.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        let ready = self.ready_key();
        if store.get(&ready)?.is_some() {
            return Ok(0);
        }
        let mut created = 0;
        for index in 0..self.size {
            let key = self.key(index);
            if store.get(&key)?.is_none() {
                store.create(&key, &[])?;
                created += 1;
            }
        }
        store.create(&ready, b"1")?;
        Ok(created)
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
            match Slot::decode(&read.value) {
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
        store.set(&self.key(index), &slot.encode(), cas)
    }

    /// Stores `slot` where `found` was read, if nobody wrote it since.
    pub fn write_found(
        &self,
        store: &impl SharedData,
        found: &Found,
        slot: &Slot,
    ) -> Result<(), SetError> {
        store.set(&found.key, &slot.encode(), found.cas)
    }

    /// Reads the slot at `index` with its CAS token.
    pub fn read(
        &self,
        store: &impl SharedData,
        index: u32,
    ) -> Result<Option<(Slot, u32)>, StoreError> {
        Ok(store
            .get(&self.key(index))?
            .and_then(|read| Slot::decode(&read.value).map(|slot| (slot, read.cas))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::memory::MemoryShared;
    use std::num::NonZeroU32;

    fn table(size: u32) -> Table {
        Table::new(NonZeroU32::new(size).unwrap())
    }

    #[test]
    fn key_format_is_pinned() {
        assert_eq!(&*table(10_000).key(42), "floodgate/v1/10000/42");
        assert_eq!(&*table(1).key(0), "floodgate/v1/1/0");
        assert_eq!(
            &*table(u32::MAX).key(u32::MAX),
            "floodgate/v1/4294967295/4294967295"
        );
        assert_eq!(table(10_000).ready_key(), "floodgate/v1/10000/ready");
    }

    #[test]
    fn slot_format_is_pinned() {
        let slot = Slot {
            fingerprint: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            tat: Tat(0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00),
            rate_micro: 0x0a0b_0c0d_0e0f_1011,
        };
        let bytes = slot.encode();
        assert_eq!(
            bytes.to_vec(),
            [
                0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03,
                0x02, 0x01, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55,
                0x44, 0x33, 0x22, 0x11, 0x11, 0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a
            ]
        );
        assert_eq!(Slot::decode(&bytes), Some(slot));
        assert_eq!(Slot::decode(&[]), None);
        assert_eq!(Slot::decode(&bytes[..39]), None);
    }

    #[test]
    fn prepare_creates_every_slot_once() {
        let store = MemoryShared::default();
        let t = table(50);
        assert_eq!(t.prepare(&store).unwrap(), 50);
        assert_eq!(store.keys(), 51);
        let writes = store.writes();
        assert_eq!(t.prepare(&store).unwrap(), 0);
        assert_eq!(
            store.writes(),
            writes,
            "a prepared table is not written again"
        );
    }

    fn occupy(store: &MemoryShared, t: &Table, index: u32, fp: u128, tat: u128, rate: u64) {
        let cas = store.get(&t.key(index)).unwrap().unwrap().cas;
        let slot = Slot {
            fingerprint: fp,
            tat: Tat(tat),
            rate_micro: rate,
        };
        t.write(store, index, &slot, cas).unwrap();
    }

    #[test]
    fn a_new_bucket_takes_its_home_slot_when_free() {
        let store = MemoryShared::default();
        let t = table(16);
        t.prepare(&store).unwrap();
        let found = t.find(&store, 35, 0).unwrap();
        assert_eq!((found.index, found.origin), (3, Origin::Empty));
        assert_eq!(found.state, Tat::default());
    }

    #[test]
    fn an_existing_bucket_is_found_past_others() {
        let store = MemoryShared::default();
        let t = table(16);
        t.prepare(&store).unwrap();
        occupy(&store, &t, 3, 99, u128::MAX, 0);
        occupy(&store, &t, 4, 35, 777, 0);
        let found = t.find(&store, 35, 0).unwrap();
        assert_eq!(
            (found.index, found.origin, found.state),
            (4, Origin::Existing, Tat(777))
        );
    }

    #[test]
    fn idle_slots_are_reused_but_only_after_checking_the_window() {
        let store = MemoryShared::default();
        let t = table(16);
        t.prepare(&store).unwrap();
        // Slot 3: someone else's full bucket (tat in the past at rate 1 token/s).
        occupy(&store, &t, 3, 99, 1_000_000, 1_000_000);
        let found = t.find(&store, 35, 10).unwrap();
        assert_eq!((found.index, found.origin), (3, Origin::Idle));
        // Our own bucket further on is preferred over the idle slot.
        occupy(&store, &t, 4, 35, 5, 0);
        let found = t.find(&store, 35, 10).unwrap();
        assert_eq!((found.index, found.origin), (4, Origin::Existing));
    }

    #[test]
    fn a_full_window_evicts_the_bucket_closest_to_full() {
        let store = MemoryShared::default();
        let t = table(8);
        t.prepare(&store).unwrap();
        let now = 1_000_000_000u64;
        let rate = 1_000_000u64; // 1 token/s: one token of debt is one second.
        let scaled_now = u128::from(now) * u128::from(rate);
        for index in 0..8u32 {
            let debt_tokens = 10 - u128::from(index % 5);
            occupy(
                &store,
                &t,
                index,
                1000 + u128::from(index),
                scaled_now + debt_tokens * bucket::UNITS_PER_TOKEN,
                rate,
            );
        }
        let found = t.find(&store, 7, now).unwrap();
        assert_eq!((found.index, found.origin), (4, Origin::Evicted));
    }

    #[test]
    fn never_refilling_buckets_are_evicted_last() {
        let store = MemoryShared::default();
        let t = table(2);
        t.prepare(&store).unwrap();
        occupy(&store, &t, 0, 10, 5 * bucket::UNITS_PER_TOKEN, 0);
        occupy(&store, &t, 1, 11, 100 * bucket::UNITS_PER_TOKEN, 1_000_000);
        let found = t.find(&store, 12, 0).unwrap();
        assert_eq!((found.index, found.origin), (1, Origin::Evicted));
    }
}
