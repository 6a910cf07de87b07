//! Concurrency limits: slots held by requests in flight, per descriptor, shared by every
//! worker of an Envoy.
//!
//! Keys live in a table of their own, `floodgate/v2/conc/<index>`, as many slots as the
//! bucket table (`max_buckets`), created before traffic. A key lives in one slot of the
//! probe window ([`PROBE_WINDOW`]) starting at its fingerprint's home slot; the slot
//! stores the key's 128-bit fingerprint (keyed by this Envoy's secret, so a client cannot
//! aim at another tenant's window) and its [`Holds`]. Every update is read → decide →
//! compare-and-swap, deciding again on a conflict, so no interleaving of workers admits
//! more than `max`.
//!
//! **Placing a key.** Its own slot if it has one; else the first slot of the window that
//! holds nothing live: never written, emptied by releases, or holding only expired holds
//! of another key (they are reclaimed then, and counted for that key's rule). A key with
//! holds in flight is **never evicted**: when every slot of the window holds live holds
//! of other keys the request cannot be decided ([`ConcurrencyError::Full`]), and the
//! filter's `failure_mode` decides it. Filling a window takes one request in flight per
//! slot held for as long as the attacker keeps them open, on keys it cannot aim.

mod holds;

pub use holds::{deadline, rule_tag, Acquired, Holds, BUCKETS, MAX_PAIRS, MAX_VALUE_LEN};

use crate::shared::local::MAX_ATTEMPTS;
use crate::shared::table::{prepare_keys, SlotKey};
use crate::shared::{SetError, SharedData, StoreError};

/// Slots looked at for one key, starting at its home slot.
pub const PROBE_WINDOW: u32 = 8;

/// Prefix of the table's slot keys.
const PREFIX: &[u8] = b"floodgate/v2/conc/";

/// The key recording how many slot keys exist.
const COUNT_KEY: &[u8] = b"floodgate/v2/conc/slots";

/// One request's want of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// The key's identity.
    pub fingerprint: u128,
    /// Its rule's tag ([`rule_tag`]).
    pub tag: u32,
    /// The rule's `max`.
    pub max: u32,
    /// The rule's `max_duration`, in milliseconds.
    pub duration_ms: u64,
    /// Slots the request takes (0 counts as 1).
    pub cost: u32,
}

/// Slots a request holds in one key, to give back when its stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The key's identity.
    pub fingerprint: u128,
    /// The slot the key lives in.
    pub index: u32,
    /// The deadline of the pair the slots were added to.
    pub deadline_ms: u64,
    /// Slots held (at least 1).
    pub cost: u32,
}

/// What one acquire came to, with what it reclaimed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    /// Admitted (and where), or full.
    pub outcome: Acquired,
    /// The hold to release, when admitted.
    pub hold: Option<Hold>,
    /// Expired slots dropped from this key.
    pub reclaimed: u64,
    /// Expired slots of another key whose slot this key took: (that key's tag, slots).
    pub reclaimed_other: Option<(u32, u64)>,
    /// Compare-and-swap conflicts met.
    pub conflicts: u32,
}

/// What one release came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Slots freed (0: the hold was reclaimed already, or its key moved on).
    pub freed: u32,
    /// Expired slots of the key dropped on the way.
    pub reclaimed: u64,
    /// Compare-and-swap conflicts met.
    pub conflicts: u32,
}

/// Why a key could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrencyError {
    /// The host failed a shared-data call.
    Store(StoreError),
    /// Too many conflicting writers on one key.
    Contention,
    /// Every slot of the key's window holds live holds of other keys.
    Full,
}

impl From<StoreError> for ConcurrencyError {
    fn from(e: StoreError) -> ConcurrencyError {
        ConcurrencyError::Store(e)
    }
}

/// The table's shape: how many slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencyTable {
    size: u32,
}

/// A slot read for a key: where, its token, and the key's holds there.
struct Found {
    index: u32,
    key: SlotKey,
    cas: u32,
    holds: Holds,
    /// Another key's expired slots this slot held: (its tag, slots).
    taken_over: Option<(u32, u64)>,
}

impl ConcurrencyTable {
    /// A table of `size` slots (at least one).
    pub fn new(size: std::num::NonZeroU32) -> ConcurrencyTable {
        ConcurrencyTable { size: size.get() }
    }

    /// Number of slots.
    pub fn size(&self) -> u32 {
        self.size
    }

    fn key(index: u32) -> SlotKey {
        SlotKey::with_prefix(PREFIX, index)
    }

    /// Creates the slot keys before traffic (see [`crate::shared::table::Table::prepare`]).
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        prepare_keys(store, COUNT_KEY, self.size, Self::key)
    }

    /// The slot of key `fingerprint` (tagged `tag`), or the one it should take.
    fn find(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        tag: u32,
        now_ms: u64,
    ) -> Result<Option<Found>, StoreError> {
        let home = (fingerprint as u64 % u64::from(self.size)) as u32;
        let mut free: Option<Found> = None;
        for step in 0..PROBE_WINDOW.min(self.size) {
            let index = (home + step) % self.size;
            let key = Self::key(index);
            let read = match store.get(&key)? {
                Some(read) => read,
                None => {
                    store.create(&key, &[])?;
                    store.get(&key)?.ok_or(StoreError { status: 1 })?
                }
            };
            let slot = |holds, taken_over| Found {
                index,
                key,
                cas: read.cas,
                holds,
                taken_over,
            };
            match Holds::decode(&read.value) {
                Some(holds) if holds.fingerprint == fingerprint => {
                    return Ok(Some(slot(holds, None)))
                }
                // Never written: no key was ever placed past it.
                None if read.value.is_empty() => {
                    return Ok(free.or(Some(slot(Holds::empty(fingerprint, tag), None))))
                }
                None => {
                    free.get_or_insert(slot(Holds::empty(fingerprint, tag), None));
                }
                Some(mut other) if free.is_none() => {
                    let reclaimed = other.reclaim(now_ms);
                    if other.pairs().is_empty() {
                        let taken = (reclaimed > 0).then_some((other.tag, reclaimed));
                        free = Some(slot(Holds::empty(fingerprint, tag), taken));
                    }
                }
                Some(_) => {}
            }
        }
        Ok(free)
    }

    /// Takes `want.cost` slots of key `want.fingerprint` at `now_ms` if they fit its
    /// `max`: read, decide, compare-and-swap, decide again on a conflict. A rejected
    /// request takes nothing (its reclaim of expired holds is still written, once).
    pub fn acquire(
        &self,
        store: &impl SharedData,
        want: &Want,
        now_ms: u64,
    ) -> Result<Acquire, ConcurrencyError> {
        let mut conflicts = 0;
        for _ in 0..MAX_ATTEMPTS {
            let Some(found) = self.find(store, want.fingerprint, want.tag, now_ms)? else {
                return Err(ConcurrencyError::Full);
            };
            let mut holds = found.holds;
            let reclaimed = holds.reclaim(now_ms);
            let outcome = holds.acquire(now_ms, want.duration_ms, want.max, want.cost);
            let hold = match outcome {
                Acquired::Held { deadline_ms, .. } => Some(Hold {
                    fingerprint: want.fingerprint,
                    index: found.index,
                    deadline_ms,
                    cost: want.cost.max(1),
                }),
                Acquired::Full { .. } => None,
            };
            let mut done = Acquire {
                outcome,
                hold,
                reclaimed,
                reclaimed_other: found.taken_over,
                conflicts,
            };
            if hold.is_none() && reclaimed == 0 {
                // Nothing to write; a slot taken over for nothing stays as it was.
                done.reclaimed_other = None;
                return Ok(done);
            }
            match store.set(&found.key, &holds.encode(), found.cas) {
                Ok(()) => return Ok(done),
                Err(SetError::Conflict) if hold.is_none() => {
                    // A rejection stands (someone else wrote: they reclaim, or hold
                    // more); the reclaim is theirs to count.
                    done.reclaimed = 0;
                    done.reclaimed_other = None;
                    done.conflicts += 1;
                    return Ok(done);
                }
                Err(SetError::Conflict) => conflicts += 1,
                Err(SetError::Store(e)) => return Err(ConcurrencyError::Store(e)),
            }
        }
        Err(ConcurrencyError::Contention)
    }

    /// Gives back `hold`'s slots at `now_ms`. A key no longer in its slot, or whose pair
    /// is gone, was reclaimed: nothing is freed. Best effort: a host failure leaves the
    /// slots held until their deadline, never longer.
    pub fn release(&self, store: &impl SharedData, hold: &Hold, now_ms: u64) -> Released {
        let mut done = Released::default();
        for _ in 0..MAX_ATTEMPTS {
            let key = Self::key(hold.index);
            let Ok(Some(read)) = store.get(&key) else {
                return done;
            };
            let Some(mut holds) = Holds::decode(&read.value) else {
                return done;
            };
            if holds.fingerprint != hold.fingerprint {
                return done;
            }
            let reclaimed = holds.reclaim(now_ms);
            let freed = holds.release(hold.deadline_ms, hold.cost);
            if reclaimed == 0 && freed == 0 {
                return done;
            }
            match store.set(&key, &holds.encode(), read.cas) {
                Ok(()) => {
                    done.freed = freed;
                    done.reclaimed = reclaimed;
                    return done;
                }
                Err(SetError::Conflict) => done.conflicts += 1,
                Err(SetError::Store(_)) => return done,
            }
        }
        done
    }
}

#[cfg(test)]
mod tests;
