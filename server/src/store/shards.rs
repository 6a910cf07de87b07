//! Counters in shards, and a batch's shards locked together: the atomic step of every
//! in-process store (memory, gossip).
//!
//! A store keeps its counters in [`SHARDS`] maps, each behind a mutex, a counter's shard
//! chosen by hashing its [`CounterKey`] with a random key (counter keys come from
//! clients). [`Shards::lock_batch`] locks the shards a batch's counters live in, in
//! ascending order (so two batches never deadlock), and holds them while the store loads,
//! decides and applies. No `.await` happens under these locks.

use super::batch::{Counters, PerItem};
use super::{Check, CounterKey, StoreError};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Number of shards; a power of two.
pub const SHARDS: usize = 64;

/// A store's shards of `T` (each a map of counters).
#[derive(Debug)]
pub struct Shards<T> {
    shards: Box<[Mutex<T>]>,
    hasher: RandomState,
}

impl<T: Default> Default for Shards<T> {
    fn default() -> Self {
        Shards {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl<T> Shards<T> {
    /// Shard `i` (of [`SHARDS`]), locked.
    pub fn lock(&self, i: usize) -> MutexGuard<'_, T> {
        // Nothing panics under these locks; if something ever did, the maps are still
        // structurally sound, so keep serving rather than fail every request.
        self.shards[i % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The shard `key` lives in.
    pub fn shard_of(&self, key: &CounterKey) -> usize {
        (self.hasher.hash_one(key) as usize) & (SHARDS - 1)
    }

    /// The shard of `key`, locked.
    pub fn lock_key(&self, key: &CounterKey) -> MutexGuard<'_, T> {
        self.lock(self.shard_of(key))
    }

    /// The shards of every counter of `batch`, locked in ascending order.
    pub fn lock_batch(&self, batch: &[Check], counters: &Counters) -> Locked<'_, T> {
        let shard_of: PerItem<usize> = counters
            .iter(batch)
            .map(|(_, c)| self.shard_of(&c.key))
            .collect();
        let mut order = shard_of.clone();
        order.sort_unstable();
        order.dedup();
        let guards = order.iter().map(|&i| self.lock(i)).collect();
        let guard_of = shard_of
            .iter()
            .map(|s| order.binary_search(s).unwrap_or(0))
            .collect();
        Locked { guards, guard_of }
    }
}

/// A batch's shards, locked: each counter's shard by the counter's index.
pub struct Locked<'a, T> {
    guards: PerItem<MutexGuard<'a, T>>,
    /// Per counter: the index of its shard's guard.
    guard_of: PerItem<usize>,
}

impl<T> Locked<'_, T> {
    /// The shard counter `k` lives in.
    pub fn of(&self, k: usize) -> &T {
        &self.guards[self.guard_of[k]]
    }

    /// The shard counter `k` lives in, to change.
    pub fn of_mut(&mut self, k: usize) -> &mut T {
        &mut self.guards[self.guard_of[k]]
    }
}

/// A store's bound on memory, in cells: what is in use and at most how much. A batch
/// reserves what its writes may add before it applies any ([`Cells::reserve`]), so a
/// batch that would pass the capacity changes nothing, then settles on what it really
/// added ([`Cells::settle`]).
#[derive(Debug)]
pub struct Cells {
    used: AtomicUsize,
    capacity: usize,
}

impl Cells {
    /// No cell used of `capacity`.
    pub fn new(capacity: usize) -> Cells {
        Cells {
            used: AtomicUsize::new(0),
            capacity,
        }
    }

    /// Cells in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most cells the store may hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Reserves up to `growth` more cells (none when it frees); [`StoreError::Full`]
    /// when they do not fit. Returns what was reserved.
    pub fn reserve(&self, growth: isize) -> Result<usize, StoreError> {
        let reserved = growth.max(0) as usize;
        let before = self.used.fetch_add(reserved, Ordering::Relaxed);
        if reserved > 0 && before + reserved > self.capacity {
            self.used.fetch_sub(reserved, Ordering::Relaxed);
            return Err(StoreError::Full(before));
        }
        Ok(reserved)
    }

    /// Settles a reservation of `reserved` cells for what the batch really changed,
    /// `delta` (negative: freed).
    pub fn settle(&self, reserved: usize, delta: isize) {
        let correction = delta - reserved as isize;
        if correction >= 0 {
            self.used.fetch_add(correction as usize, Ordering::Relaxed);
        } else {
            self.used
                .fetch_sub(correction.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// Gives back `freed` cells (a sweep).
    pub fn free(&self, freed: usize) {
        self.used.fetch_sub(freed, Ordering::Relaxed);
    }
}
