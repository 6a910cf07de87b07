//! The gossip store: every floodgate-server of a fleet counts what it admits and tells its
//! peers, with no central store; each decides on its own count plus the latest it heard.
//!
//! Per counter (a key under a limit) each node owns a [`part::Part`]: the hits it counted
//! in the current window (and, for a sliding counter, the previous one), which only it
//! writes and which only grows within a window. It publishes the part as one key of its
//! own chitchat node state ([`wire`]), and takes in every peer's (live, or dead but not yet
//! forgotten) as chitchat applies it ([`node`]). A decision is the memory store's, in one
//! atomic step under the same shard locks and by the same batch rules ([`super::batch`]),
//! on the fleet's counter: own part + Σ peers' latest parts. So everything the batch rules
//! promise (all or nothing, check-only, charges, grants) holds per node exactly, and with
//! one node the store answers exactly as the memory store does.
//!
//! # What the fleet gets
//! A node's admissions reach the others about one gossip round per hop later; meanwhile
//! they admit without knowing. Over-admission per window is at most Σ over nodes of their
//! admitted rate × propagation time; a network partition lets each side admit up to the
//! whole limit. See `docs/server/gossip.md` for the bound and its measurement. A dead
//! node's parts keep counting until their windows end (they are kept in the cluster state
//! for chitchat's dead-node grace period, a day), so its death hands no one a fresh limit.
//!
//! # Algorithms
//! Only counts add up across nodes: fixed window and sliding window counter. A token
//! bucket's or a sliding log's state is not a sum of per-node states, so a configuration
//! with either is refused at load under `--store gossip` (see
//! [`crate::config::LoadOptions::supported`]).
//!
//! # Leases
//! A quota grant (see [`crate::algorithm::lease`]) takes at most the node's share of what
//! remains, `remaining / live nodes` ([`GossipStore::set_fleet`]), so that the nodes
//! granting on their views at once take no more than remains between them.
//!
//! # Bounds
//! One cell per counter a node has counted on and not yet seen go idle (`--memory-capacity`
//! bounds them; at capacity a new counter is refused, as in the memory store), and per
//! peer part heard, an entry of the peers' view. [`GossipStore::sweep`] drops idle parts and
//! deletes their gossip keys, [`GossipStore::forget_idle_peers`] the peers' idle parts, so
//! only live windows are held and gossiped.

pub mod node;
pub mod part;
pub mod wire;

use super::batch::{self, Call, Counters, PerItem, Rules, Share};
use super::shards::{Cells, Locked, Shards, SHARDS};
use super::{Check, CounterKey, Counting, Store, StoreError};
use crate::algorithm::{Decision, Limit, State};
use crate::clock::{Clock, SystemClock};
use part::{Fleet, Part};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};
use wire::Tag;

/// This node's parts, one shard.
type Shard = HashMap<CounterKey, Slot>;

/// This node's part of one counter.
#[derive(Debug)]
struct Slot {
    /// The limit it was counted under; another (after a reload) starts afresh.
    limit: Limit,
    part: Part,
    /// From this instant it counts nothing and may be dropped.
    idle_at: u64,
}

/// What peers last published, per counter: each peer's part (the peer by a hash of its
/// chitchat id) with its limit's tag.
pub type Peers = HashMap<CounterKey, SmallVec<[(u64, Tag, Part); 4]>>;

/// What this node must publish since the last gossip round: per counter, its part's new
/// value, or `None` to delete the key (its part went idle).
pub type Outbox = HashMap<CounterKey, Option<String>>;

/// The gossip store. See the module documentation.
#[derive(Debug)]
pub struct GossipStore<C: Clock = SystemClock> {
    shards: Shards<Shard>,
    peers: RwLock<Peers>,
    outbox: Mutex<Outbox>,
    clock: C,
    cells: Cells,
    rules: Rules,
    /// Nodes live in the fleet, this one included: a grant takes at most its share.
    fleet: AtomicU32,
}

impl GossipStore<SystemClock> {
    /// A store of at most `capacity` own parts on the system clock.
    pub fn new(capacity: usize) -> Self {
        GossipStore::with_clock(capacity, SystemClock::new())
    }
}

impl<C: Clock> GossipStore<C> {
    /// A store of at most `capacity` own parts reading `clock`, with no peer heard yet.
    pub fn with_clock(capacity: usize, clock: C) -> Self {
        GossipStore {
            shards: Shards::default(),
            peers: RwLock::default(),
            outbox: Mutex::default(),
            clock,
            cells: Cells::new(capacity),
            rules: Rules::default(),
            fleet: AtomicU32::new(1),
        }
    }

    /// The same store counting as `counting` says (default: all or nothing).
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.rules.counting = counting;
        self
    }

    /// Own parts held (cells in use).
    pub fn cells(&self) -> usize {
        self.cells.used()
    }

    /// Sets how many nodes are live, this one included (the gossip loop, every round).
    /// A quota grant takes at most `remaining / nodes` ([`Share::OneIn`]): every node
    /// grants on its own view of what remains, so `n` nodes granting at once take at most
    /// what remains between them, and leases do not multiply the over-admission.
    pub fn set_fleet(&self, nodes: u32) {
        self.fleet.store(nodes.max(1), Ordering::Relaxed);
    }

    /// Replaces everything peers are known to have published.
    pub fn set_peers(&self, peers: Peers) {
        *self.peers.write().unwrap_or_else(PoisonError::into_inner) = peers;
    }

    /// Takes in what peer `node` published for `key`: its latest part replaces the one
    /// held for that node (chitchat calls this as each key change arrives).
    pub fn hear(&self, node: u64, key: CounterKey, tag: Tag, part: Part) {
        let mut peers = self.peers.write().unwrap_or_else(PoisonError::into_inner);
        let parts = peers.entry(key).or_default();
        match parts.iter_mut().find(|(n, _, _)| *n == node) {
            Some(held) => *held = (node, tag, part),
            None => parts.push((node, tag, part)),
        }
    }

    /// Drops the peers' parts that count nothing any more; returns how many are left.
    pub fn forget_idle_peers(&self) -> usize {
        let now = self.clock.now_ns();
        let mut peers = self.peers.write().unwrap_or_else(PoisonError::into_inner);
        let idle = |tag: &Tag, part: &Part| part.idle_at_period(tag.period_ns()) <= now;
        peers.retain(|_, parts| {
            parts.retain(|(_, tag, part)| !idle(tag, part));
            !parts.is_empty()
        });
        if peers.capacity() > 4 * peers.len().max(128) {
            let len = peers.len();
            peers.shrink_to(2 * len);
        }
        peers.values().map(|p| p.len()).sum()
    }

    /// What changed since the last call, to publish.
    pub fn take_outbox(&self) -> Outbox {
        std::mem::take(&mut *self.outbox.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Drops every own part that counts nothing any more, and queues the deletion of its
    /// gossip key; returns how many.
    pub fn sweep(&self) -> usize {
        let now = self.clock.now_ns();
        let mut gone: Vec<CounterKey> = Vec::new();
        for i in 0..SHARDS {
            let mut shard = self.shards.lock(i);
            shard.retain(|key, slot| {
                let keep = slot.idle_at > now;
                if !keep {
                    gone.push(*key);
                }
                keep
            });
            // Give the memory back, as the memory store does.
            let len = shard.len();
            if shard.capacity() > 4 * len.max(128) {
                shard.shrink_to(2 * len);
            }
        }
        self.cells.free(gone.len());
        let mut outbox = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &gone {
            outbox.insert(*key, None);
        }
        gone.len()
    }

    /// The synchronous heart of [`Store::check`].
    pub fn check_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, Call::Check)
    }

    /// The synchronous heart of [`Store::charge`].
    pub fn charge_now(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.decide_now(batch, Call::Charge)
    }

    /// One atomic step, as the memory store's: lock the batch's shards, read the clock,
    /// load each counter as the fleet has it (own part + peers'), decide by the batch
    /// rules, and apply every write to this node's parts or none.
    fn decide_now(&self, batch: &[Check], call: Call) -> Result<Vec<Decision>, StoreError> {
        // The configuration refuses other algorithms at load; a request's own `limit`
        // override cannot name one, but nothing else may reach the parts' arithmetic.
        if let Some(c) = batch
            .iter()
            .find(|c| !c.blocked && !part::supports(c.limit.algorithm))
        {
            return Err(StoreError::Unavailable(format!(
                "the gossip store cannot hold {} (only {})",
                c.limit.algorithm.name(),
                part::SUPPORTED.join(", ")
            )));
        }
        let peers = self.peers.read().unwrap_or_else(PoisonError::into_inner);
        let counters = Counters::of(batch);
        let mut locked = self.shards.lock_batch(batch, &counters);
        let now = self.clock.now_ns();
        let fleets: PerItem<Option<Fleet>> = counters
            .iter(batch)
            .map(|(k, c)| {
                let own = live(locked.of(k), c);
                let theirs = peers.get(&c.key).into_iter().flatten();
                let tag = Tag::of(&c.limit);
                let theirs = theirs.filter(|(_, t, _)| *t == tag).map(|(_, _, p)| p);
                Fleet::of(own, theirs, &c.limit, now)
            })
            .collect();
        drop(peers);
        let outcome = {
            let loaded: PerItem<Option<&State>> = fleets
                .iter()
                .map(|f| f.as_ref().map(|f| &f.state))
                .collect();
            let nodes =
                NonZeroU32::new(self.fleet.load(Ordering::Relaxed)).unwrap_or(NonZeroU32::MIN);
            let rules = Rules {
                share: Share::OneIn(nodes),
                ..self.rules
            };
            batch::decide(batch, &counters, &loaded, now, call, rules)
        };
        self.apply(batch, &counters, &mut locked, &fleets, &outcome.writes)?;
        Ok(outcome.decisions)
    }

    /// Turns the fleet's new counters into this node's new parts and stores them,
    /// reserving a cell for each new one first (at capacity nothing is applied). A write
    /// that records nothing on a counter this node holds no part of (a check-only item
    /// on a peers' counter) adds none; a part that did not change is not published again.
    fn apply(
        &self,
        batch: &[Check],
        counters: &Counters,
        locked: &mut Locked<'_, Shard>,
        fleets: &[Option<Fleet>],
        writes: &[batch::Write],
    ) -> Result<(), StoreError> {
        let held =
            |locked: &Locked<'_, Shard>, k: usize, c: &Check| locked.of(k).contains_key(&c.key);
        let new = writes
            .iter()
            .filter_map(|w| Some((w, counters.check(batch, w.counter)?)))
            .filter(|(w, c)| w.records && !held(locked, w.counter, c))
            .count();
        let reserved = self.cells.reserve(new as isize)?;
        let mut added = 0isize;
        let mut outbox = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
        for w in writes {
            let Some(c) = counters.check(batch, w.counter) else {
                continue;
            };
            if !w.records && !held(locked, w.counter, c) {
                continue;
            }
            let fleet = fleets.get(w.counter).and_then(Option::as_ref);
            let fresh = State::fresh(&c.limit);
            let before = fleet.map_or(&fresh, |f| &f.state);
            let after = w.applied_to(Some(before), &c.limit);
            let part = Fleet::own_after(fleet.map(|f| &f.own), before, &after, &c.limit);
            let slot = Slot {
                limit: c.limit,
                part,
                idle_at: part.idle_at(&c.limit),
            };
            let old = locked.of_mut(w.counter).insert(c.key, slot);
            added += isize::from(old.is_none());
            if old.is_none_or(|o| o.part != part || o.limit != c.limit) {
                outbox.insert(c.key, Some(wire::value(&c.limit, &part)));
            }
        }
        drop(outbox);
        self.cells.settle(reserved, added);
        Ok(())
    }
}

/// This node's part of `c`'s counter, if it holds one under the same limit (after a reload
/// changed the limit, the old part means something else and is decided as none).
fn live<'s>(shard: &'s Shard, c: &Check) -> Option<&'s Part> {
    shard
        .get(&c.key)
        .filter(|s| s.limit == c.limit)
        .map(|s| &s.part)
}

impl<C: Clock> Store for GossipStore<C> {
    async fn check(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.check_now(batch)
    }

    async fn charge(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.charge_now(batch)
    }

    fn name(&self) -> &'static str {
        "gossip"
    }
}

#[cfg(test)]
mod tests;
