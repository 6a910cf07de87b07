//! The in-process store: exact under concurrency, bounded in memory.
//!
//! Counters live in 64 shards, each a `HashMap` behind a mutex (SipHash with a random key,
//! because counter keys come from clients). A batch locks the shards it touches in
//! ascending order (no deadlock), reads the clock, decides every item, and either applies
//! every update or none. No `.await` happens under a lock, and the critical section is a few
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

use super::{admits, blocked_decision, report_unconsumed, Check, Counting, Store, StoreError};
use crate::algorithm::{charge, decide, lease, Decision, Limit, State, Update};
use crate::clock::{Clock, SystemClock};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Number of shards; a power of two.
const SHARDS: usize = 64;

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
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: C,
    cells: AtomicUsize,
    capacity: usize,
    counting: Counting,
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
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            clock,
            cells: AtomicUsize::new(0),
            capacity,
            counting: Counting::default(),
        }
    }

    /// The same store counting as `counting` says (default: all or nothing).
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.counting = counting;
        self
    }

    /// Cells in use.
    pub fn cells(&self) -> usize {
        self.cells.load(Ordering::Relaxed)
    }

    /// The most cells this store will hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of counters held.
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).len()).sum()
    }

    /// Whether the store holds no counter.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every counter whose state is as good as fresh; returns how many.
    pub fn sweep(&self) -> usize {
        let now = self.clock.now_ns();
        let mut removed = 0;
        for i in 0..SHARDS {
            let mut shard = self.lock(i);
            let mut freed = 0;
            shard.retain(|_, slot| {
                let keep = slot.idle_at > now;
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
            self.cells.fetch_sub(freed, Ordering::Relaxed);
        }
        removed
    }

    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        // Nothing panics under these locks; if something ever did, the maps are still
        // structurally sound, so keep serving rather than fail every request.
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn shard_of(&self, c: &Check) -> usize {
        (self.hasher.hash_one(c.key) as usize) & (SHARDS - 1)
    }

    /// The synchronous heart of [`Store::check`].
    pub fn check_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, false)
    }

    /// The synchronous heart of [`Store::charge`].
    pub fn charge_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, true)
    }

    /// Decides `batch` all or nothing, or with `charging` counts every item whatever it
    /// finds (see [`Store::charge`]).
    fn decide_now(&self, batch: &[Check], charging: bool) -> Result<Vec<Decision>, StoreError> {
        let count = if charging { charge } else { decide };
        let shard_of: Vec<usize> = batch.iter().map(|c| self.shard_of(c)).collect();
        let mut order = shard_of.clone();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<MutexGuard<'_, Shard>> = order.iter().map(|&i| self.lock(i)).collect();
        let guard_of = |i: usize| order.binary_search(&shard_of[i]).unwrap_or(0);
        // The clock is read under the locks, so decisions on a key happen in time order.
        let now = self.clock.now_ns();

        // Phase 1: decide everything against current state, changing nothing.
        let mut decisions = Vec::with_capacity(batch.len());
        // `None` for a blocked item, which has no counter (and a charge counts nothing on it).
        let mut updates: Vec<Option<Update>> = Vec::with_capacity(batch.len());
        for (i, c) in batch.iter().enumerate() {
            if c.blocked {
                decisions.push(blocked_decision(&c.limit, now));
                updates.push(None);
                continue;
            }
            let stored = stored(&guards[guard_of(i)], c, now);
            // The same counter twice in one request: the later item sees the earlier's hits.
            let earlier: Vec<usize> = (0..i).filter(|&j| same_counter(&batch[j], c)).collect();
            let (d, u) = if earlier.is_empty() {
                match stored {
                    Some(s) => count(s, now, &c.limit, c.hits),
                    None => count(&State::fresh(&c.limit), now, &c.limit, c.hits),
                }
            } else {
                let mut s = stored.cloned().unwrap_or_else(|| State::fresh(&c.limit));
                for &j in &earlier {
                    if let Some(u) = updates[j].clone() {
                        s.apply(u);
                    }
                }
                count(&s, now, &c.limit, c.hits)
            };
            decisions.push(d);
            updates.push(Some(u));
        }
        // A charge is counted whatever it finds, so it never blocks (not even for quota mode).
        let blocked = !charging && !admits(batch, |i| decisions[i].allowed);
        if blocked && !self.counting.consumes_rejected() {
            // Over the limit somewhere: the request is rejected and consumes nothing.
            report_unconsumed(batch, &mut decisions);
            return Ok(decisions);
        }

        // Admitted (a request blocked under per-descriptor counting, or a charge, gets no grant): the
        // grants, in the same step (under the same locks, at the same
        // instant). An item that asked takes up to its quota of what its admission left,
        // by deciding it again with its own hits plus the grant (which fits: `remaining`
        // is what fits). Only on a counter used once in the batch, so no other item's
        // decision depends on it.
        let mut hits: Vec<u64> = batch.iter().map(|c| c.hits).collect();
        for (i, c) in batch.iter().enumerate() {
            let Some(quota) = c.quota.filter(|_| {
                !blocked && !charging && !c.shadow && !c.quota_mode && decisions[i].allowed
            }) else {
                continue;
            };
            if batch.iter().filter(|b| same_counter(b, c)).count() > 1 {
                continue;
            }
            let Some(grant) = lease::grant(&c.limit, &quota, decisions[i].remaining, now) else {
                continue;
            };
            let fresh = State::fresh(&c.limit);
            let base = stored(&guards[guard_of(i)], c, now).unwrap_or(&fresh);
            let with_grant = c.hits.saturating_add(u64::from(grant.hits));
            let (d, u) = decide(base, now, &c.limit, with_grant);
            if d.allowed {
                decisions[i] = Decision {
                    grant: Some(grant),
                    ..d
                };
                updates[i] = Some(u);
                hits[i] = with_grant;
            }
        }

        // Cells the admitted items will add, counted once per counter (its first item).
        let mut growth = 0isize;
        for (i, c) in batch.iter().enumerate() {
            if !(decisions[i].allowed || charging) || (0..i).any(|j| same_counter(&batch[j], c)) {
                continue;
            }
            let Some(update) = &updates[i] else { continue };
            let shard = &guards[guard_of(i)];
            // Whether this counter records anything in this request: a check-only item
            // without a grant does not, a later item on the same counter may.
            let records = (i..batch.len()).any(|j| same_counter(&batch[j], c) && hits[j] > 0);
            let live = stored(shard, c, now).is_some();
            growth += cell_growth(shard.get(&c.key), live, update, records);
        }

        // Phase 2: reserve room, then apply every update in order.
        let reserved = growth.max(0) as usize;
        let before = self.cells.fetch_add(reserved, Ordering::Relaxed);
        if reserved > 0 && before + reserved > self.capacity {
            self.cells.fetch_sub(reserved, Ordering::Relaxed);
            return Err(StoreError::Full(before));
        }
        let mut delta: isize = 0;
        for (i, (c, u)) in batch.iter().zip(updates).enumerate() {
            let Some(u) = u else { continue };
            let shard = &mut guards[guard_of(i)];
            if ((!decisions[i].allowed && !charging) || hits[i] == 0) && !shard.contains_key(&c.key)
            {
                // A denied shadow item or a check-only one on a fresh counter changes
                // nothing: no cell for it (a charge is always recorded).
                continue;
            }
            let slot = shard.entry(c.key).or_insert_with(|| Slot {
                limit: c.limit,
                state: State::fresh(&c.limit),
                idle_at: 0,
                cells: 0,
            });
            if slot.limit != c.limit || slot.idle_at <= now {
                slot.limit = c.limit;
                slot.state = State::fresh(&c.limit);
            }
            slot.state.apply(u);
            slot.idle_at = slot.state.idle_at(&c.limit);
            let cells = slot.state.cells();
            delta += cells as isize - slot.cells as isize;
            slot.cells = cells;
        }
        drop(guards);
        let correction = delta - reserved as isize;
        if correction >= 0 {
            self.cells.fetch_add(correction as usize, Ordering::Relaxed);
        } else {
            self.cells
                .fetch_sub(correction.unsigned_abs(), Ordering::Relaxed);
        }
        Ok(decisions)
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

/// Whether two items of a batch count on the same counter.
/// A blocked item has no counter, so it shares none.
fn same_counter(a: &Check, b: &Check) -> bool {
    a.key == b.key && a.limit == b.limit && !a.blocked && !b.blocked
}

/// Cells an admitted item will add (negative: free): a new or reset counter costs one cell
/// plus its state; a live log gains at most one entry and loses those it trims. A counter
/// that `records` nothing (check-only items alone) gains no entry and no new counter.
fn cell_growth(slot: Option<&Slot>, live: bool, update: &Update, records: bool) -> isize {
    let records = isize::from(records);
    let log_entry = records * isize::from(matches!(update, Update::SlidingWindowLog(_)));
    match slot {
        Some(_) if live => match update {
            Update::SlidingWindowLog(l) => log_entry - l.expired() as isize,
            _ => 0,
        },
        // A stale slot (idle, or from another limit) is replaced.
        Some(slot) => 1 + log_entry - slot.cells as isize,
        None => records * (1 + log_entry),
    }
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

#[cfg(test)]
mod tests;
