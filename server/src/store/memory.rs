//! The in-process store: exact under concurrency, bounded in memory.
//!
//! Counters live in 64 shards, each a `HashMap` behind a mutex (SipHash with a random key,
//! because counter keys come from clients). A batch locks the shards it touches in
//! ascending order (no deadlock), reads the clock, loads its counters' states, decides by
//! the batch rules ([`super::batch`]), and either applies every write or none. No `.await` happens under a lock, and the critical section is a few
//! hash lookups and the arithmetic of [`crate::algorithm`], so contention stays short.
//!
//! # Bounds
//! Memory is counted in *cells*: one per counter, plus one per entry of a
//! `sliding_window_log`. A counter whose state has gone back to "fresh" (its window ended,
//! its bucket refilled, its log emptied) is dropped by [`MemoryStore::sweep`], which the
//! server runs periodically. When the store is at capacity, a request that needs a *new*
//! cell is answered with [`StoreError::Full`] (gRPC UNAVAILABLE, so Envoy's failure mode
//! decides) while every existing counter keeps working exactly. We refuse rather than evict:
//! evicting would silently reset some client's counter and over-admit it, and a flood of
//! distinct values would then buy a flood of fresh limits. The overflow is counted in the
//! `floodgate_errors_total{kind="store_full"}` metric.

use super::batch::{self, Call, Counters, PerItem, Rules, Write};
use super::shards::{Cells, Locked, Shards, SHARDS};
use super::{Check, Counting, Store, StoreError};
use crate::algorithm::{Decision, Limit, State};
use crate::clock::{Clock, SystemClock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shard's map is never shrunk below this many entries' room (shrinking a small map
/// frees nothing worth the reallocation).
const MIN_SHARD_CAPACITY: usize = 128;

/// The default capacity in cells (up to about 220 MB when full, see `docs/server/stores.md`).
pub const DEFAULT_CAPACITY: usize = 1_000_000;

type Shard = HashMap<super::CounterKey, Slot>;

/// One counter.
#[derive(Debug)]
struct Slot {
    /// The limit its state was computed under; a different limit (after a reload) starts
    /// the counter afresh, since the old state means something else.
    limit: Limit,
    state: State,
    /// From this instant the state is as good as fresh and may be dropped.
    idle_at: u64,
    /// Cells this slot is counted for.
    cells: usize,
}

/// The memory store. See the module documentation.
#[derive(Debug)]
pub struct MemoryStore<C: Clock = SystemClock> {
    shards: Shards<Shard>,
    clock: C,
    cells: Cells,
    rules: Rules,
    /// Concurrency slots held at the last sweep.
    in_flight: AtomicU64,
    /// Concurrency holds dropped past their deadline, unreleased, since the start.
    reclaimed: AtomicU64,
}

impl MemoryStore<SystemClock> {
    /// A store of at most `capacity` cells on the system clock.
    pub fn new(capacity: usize) -> Self {
        MemoryStore::with_clock(capacity, SystemClock::new())
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A store of at most `capacity` cells reading `clock`.
    pub fn with_clock(capacity: usize, clock: C) -> Self {
        MemoryStore {
            shards: Shards::default(),
            clock,
            cells: Cells::new(capacity),
            rules: Rules::default(),
            in_flight: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
        }
    }

    /// The same store counting as `counting` says (default: all or nothing).
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.rules.counting = counting;
        self
    }

    /// Cells in use.
    pub fn cells(&self) -> usize {
        self.cells.used()
    }

    /// The most cells this store will hold.
    pub fn capacity(&self) -> usize {
        self.cells.capacity()
    }

    /// Number of counters held.
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.shards.lock(i).len()).sum()
    }

    /// Whether the store holds no counter.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Concurrency slots held across every counter, as of the last [`MemoryStore::sweep`].
    pub fn holds_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Concurrency holds that ended at their deadline without a release, since the start
    /// (dropped by a write of their counter or by a sweep).
    pub fn holds_reclaimed(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
    }

    /// Drops every counter whose state is as good as fresh; returns how many. Also counts
    /// the concurrency slots held (see [`MemoryStore::holds_in_flight`]).
    pub fn sweep(&self) -> usize {
        let now = self.clock.now_ns();
        let mut removed = 0;
        let mut in_flight = 0u64;
        let mut reclaimed = 0u64;
        for i in 0..SHARDS {
            let mut shard = self.shards.lock(i);
            let mut freed = 0;
            shard.retain(|_, slot| {
                let keep = slot.idle_at > now;
                if let State::Concurrency(s) = &slot.state {
                    match keep {
                        true => in_flight = in_flight.saturating_add(s.in_flight(now)),
                        false => reclaimed += s.len() as u64,
                    }
                }
                if !keep {
                    freed += slot.cells;
                    removed += 1;
                }
                keep
            });
            // Give the memory back: a map keeps its largest capacity forever otherwise, so
            // a flood of one-off values would pin its peak. Shrinking only when it is a
            // quarter full keeps a steady population from reallocating every sweep.
            let len = shard.len();
            if shard.capacity() > 4 * len.max(MIN_SHARD_CAPACITY) {
                shard.shrink_to(2 * len);
            }
            drop(shard);
            self.cells.free(freed);
        }
        self.in_flight.store(in_flight, Ordering::Relaxed);
        self.reclaimed.fetch_add(reclaimed, Ordering::Relaxed);
        removed
    }

    /// The synchronous heart of [`Store::check`].
    pub fn check_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, Call::Check)
    }

    /// The synchronous heart of [`Store::charge`].
    pub fn charge_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, Call::Charge)
    }

    /// One atomic step: lock the shards of the batch's counters (in ascending order, so
    /// no deadlock), read the clock, load their states, decide by the batch rules, and
    /// apply every write or none.
    fn decide_now(&self, batch: &[Check], call: Call) -> Result<Vec<Decision>, StoreError> {
        let counters = Counters::of(batch);
        let mut locked = self.shards.lock_batch(batch, &counters);
        // The clock is read under the locks, so decisions on a key happen in time order.
        let now = self.clock.now_ns();
        let outcome = {
            let loaded: PerItem<Option<&State>> = counters
                .iter(batch)
                .map(|(k, c)| stored(locked.of(k), c, now))
                .collect();
            batch::decide(batch, &counters, &loaded, now, call, self.rules)
        };
        self.apply(batch, &counters, &mut locked, &outcome.writes, now)?;
        Ok(outcome.decisions)
    }

    /// Applies `writes`, reserving the cells they may add first: at capacity, nothing is
    /// applied and the batch answers [`StoreError::Full`].
    fn apply(
        &self,
        batch: &[Check],
        counters: &Counters,
        locked: &mut Locked<'_, Shard>,
        writes: &[Write],
        now: u64,
    ) -> Result<(), StoreError> {
        let mut growth = 0isize;
        for w in writes {
            let Some(c) = counters.check(batch, w.counter) else {
                continue;
            };
            let shard = locked.of(w.counter);
            let live = stored(shard, c, now).is_some();
            growth += cells::growth(shard.get(&c.key), live, w);
        }
        let reserved = self.cells.reserve(growth)?;
        let mut delta: isize = 0;
        for w in writes {
            let Some(c) = counters.check(batch, w.counter) else {
                continue;
            };
            let slot = locked
                .of_mut(w.counter)
                .entry(c.key)
                .or_insert_with(|| Slot {
                    limit: c.limit,
                    state: State::fresh(&c.limit),
                    idle_at: 0,
                    cells: 0,
                });
            if let State::Concurrency(s) = &slot.state {
                // Holds past their deadline: dropped by this write (or all of them, below,
                // when the counter is idle or kept under another limit).
                let ended = match slot.limit != c.limit || slot.idle_at <= now {
                    true => s.len(),
                    false => s.expired(now),
                };
                self.reclaimed.fetch_add(ended as u64, Ordering::Relaxed);
            }
            if slot.limit != c.limit || slot.idle_at <= now {
                // Idle or kept under another limit: it was loaded as fresh.
                slot.limit = c.limit;
                slot.state = State::fresh(&c.limit);
            }
            for u in &w.updates {
                slot.state.apply(u.clone());
            }
            slot.idle_at = slot.state.idle_at(&c.limit);
            let cells = slot.state.cells();
            delta += cells as isize - slot.cells as isize;
            slot.cells = cells;
        }
        self.cells.settle(reserved, delta);
        Ok(())
    }
}

/// The live state of `c`'s counter in `shard`: none when absent, idle, or kept under
/// another limit (after a reload), all of which decide as fresh.
fn stored<'s>(shard: &'s Shard, c: &Check, now: u64) -> Option<&'s State> {
    shard
        .get(&c.key)
        .filter(|s| s.limit == c.limit && s.idle_at > now)
        .map(|s| &s.state)
}

impl<C: Clock> Store for MemoryStore<C> {
    async fn check(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.check_now(batch)
    }

    async fn charge(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.charge_now(batch)
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}

mod cells;

#[cfg(test)]
mod tests;
