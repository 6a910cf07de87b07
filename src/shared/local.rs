//! Local mode: take tokens from every bucket a request touches, atomically per bucket.
//!
//! Each bucket is updated by read → decide → compare-and-swap; on a conflict (another
//! worker wrote the slot since we read it) we read again and *decide again*. Retrying
//! only the write would admit on a stale decision and over-admit under concurrency.
//!
//! A request that several rules apply to is rejected if any enforced rule rejects it,
//! and a rejected request consumes nothing:
//! 1. every bucket is read and decided without writing;
//! 2. if any enforced rule denies, the request is denied and nothing is written;
//! 3. otherwise each bucket is committed in turn. If a commit conflict turns an enforced
//!    rule's answer into a denial, the buckets already committed are refunded.
//!
//! A shadow rule is decided and written like any other, but its denial never rejects:
//! it is reported so it can be counted, and that bucket is left unchanged.
//!
//! After [`MAX_ATTEMPTS`] conflicting attempts on one bucket the request gets
//! [`LocalError::Contention`], which the caller turns into the configured failure mode.

use crate::bucket::{self, Decision, Quota};
use crate::shared::table::{Found, Origin, Slot, Table};
use crate::shared::{SetError, SharedData, StoreError};
use smallvec::SmallVec;

/// Per-bucket results of one request, inline for up to two buckets (no heap on the
/// common path). Two, not more: these vectors are moved between the steps of every
/// request, and each inline slot is copied whether used or not (a `Held` or a `Decision`
/// is 64 bytes on wasm32); a third local rule costs one allocation.
pub type PerBucket<T> = SmallVec<[T; 2]>;

/// Attempts per bucket before giving up on a request (then: the failure mode).
pub const MAX_ATTEMPTS: u32 = 64;

/// One bucket a request takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The bucket's identity.
    pub fingerprint: u128,
    /// Its shape.
    pub quota: Quota,
    /// A shadow rule's bucket: its denial is reported, never enforced.
    pub shadow: bool,
    /// Tokens the request takes from this bucket (0 counts as 1).
    pub cost: u32,
}

/// Tokens a request holds in one bucket, so that they can be given back if the request
/// is rejected later (by the rate limit service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// What was taken.
    pub take: Take,
    /// The slot the bucket lives in.
    pub index: u32,
}

/// The result of a local check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Whether the request may go on (no enforced rule denied it).
    pub allowed: bool,
    /// The final decision of each [`Take`], in order. When the request is denied, the
    /// decisions of rules that would have allowed it show what they would have left.
    pub decisions: PerBucket<Decision>,
    /// The tokens the request holds (empty when it was denied).
    pub held: PerBucket<Held>,
}

/// What happened to the table during checks, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableEvents {
    /// Buckets placed in never-used slots (the table grew).
    pub new_buckets: u32,
    /// Buckets that were still refilling and were evicted to make room.
    pub evictions: u32,
    /// Compare-and-swap conflicts that made us read and decide again.
    pub conflicts: u32,
}

/// Why the local limiter could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalError {
    /// The host failed a shared-data call.
    Store(StoreError),
    /// Too many conflicting writers on one bucket.
    Contention,
}

impl From<StoreError> for LocalError {
    fn from(e: StoreError) -> LocalError {
        LocalError::Store(e)
    }
}

/// A bucket to take from: a [`Take`] alone, or beside the rule it is for, as the
/// limiter lists them (so that it hands its list over as it is, not a copy of the takes).
pub trait AsTake {
    /// The take.
    fn take(&self) -> &Take;
}

impl AsTake for Take {
    fn take(&self) -> &Take {
        self
    }
}

impl AsTake for (usize, Take) {
    fn take(&self) -> &Take {
        &self.1
    }
}

/// Takes `cost` tokens from every bucket in `takes`, or from none if the request is
/// denied. See the module documentation for the exact guarantees.
pub fn take_all(
    table: &Table,
    store: &impl SharedData,
    takes: &[impl AsTake],
    now_ns: u64,
    events: &mut TableEvents,
) -> Result<Checked, LocalError> {
    match takes {
        [take] => take_one(table, store, take.take(), now_ns, events),
        takes => take_many(table, store, takes, now_ns, events),
    }
}

/// [`take_all`] for any number of buckets.
fn take_many(
    table: &Table,
    store: &impl SharedData,
    takes: &[impl AsTake],
    now_ns: u64,
    events: &mut TableEvents,
) -> Result<Checked, LocalError> {
    // 1. Read and decide everything, write nothing.
    // What was found and what was decided, side by side (the decisions are returned:
    // kept apart, they are not copied out of a list of both).
    let mut found: PerBucket<Found> = PerBucket::new();
    let mut decisions: PerBucket<Decision> = PerBucket::new();
    for take in takes.iter().map(AsTake::take) {
        let slot = table.find(store, take.fingerprint, now_ns)?;
        decisions.push(bucket::decide(slot.state, now_ns, take.quota, take.cost));
        found.push(slot);
    }
    let denied = |decisions: &[Decision]| {
        takes
            .iter()
            .zip(decisions)
            .any(|(take, d)| !take.take().shadow && !d.is_allow())
    };
    // 2. Any enforced denial: the request consumes nothing.
    if denied(&decisions) {
        return Ok(Checked {
            allowed: false,
            decisions,
            held: PerBucket::new(),
        });
    }
    // 3. Commit each bucket, deciding again on conflict.
    let mut held: PerBucket<Held> = PerBucket::new();
    for (i, take) in takes.iter().map(AsTake::take).enumerate() {
        match commit(table, store, take, &found[i], decisions[i], now_ns, events) {
            Ok(Committed::Written { index, decision }) => {
                decisions[i] = decision;
                held.push(Held { take: *take, index });
            }
            Ok(Committed::Denied(decision)) => {
                decisions[i] = decision;
                if !take.shadow {
                    give_back(table, store, &held, now_ns);
                    return Ok(Checked {
                        allowed: false,
                        decisions,
                        held: PerBucket::new(),
                    });
                }
            }
            Err(e) => {
                give_back(table, store, &held, now_ns);
                return Err(e);
            }
        }
    }
    Ok(Checked {
        allowed: true,
        decisions,
        held,
    })
}

/// [`take_all`] for a request that takes from one bucket, the common case, with the same
/// steps (read, decide, nothing written on a denial, commit deciding again on conflict)
/// and none of the lists a request of several buckets needs to decide all before
/// writing any.
fn take_one(
    table: &Table,
    store: &impl SharedData,
    take: &Take,
    now_ns: u64,
    events: &mut TableEvents,
) -> Result<Checked, LocalError> {
    let found = table.find(store, take.fingerprint, now_ns)?;
    let decision = bucket::decide(found.state, now_ns, take.quota, take.cost);
    let (allowed, decision, held) = if !take.shadow && !decision.is_allow() {
        (false, decision, None)
    } else {
        match commit(table, store, take, &found, decision, now_ns, events)? {
            Committed::Written { index, decision } => {
                (true, decision, Some(Held { take: *take, index }))
            }
            // A shadow rule's denial never rejects; an enforced one does.
            Committed::Denied(decision) => (take.shadow, decision, None),
        }
    };
    let mut decisions = PerBucket::new();
    decisions.push(decision);
    Ok(Checked {
        allowed,
        decisions,
        held: held.into_iter().collect(),
    })
}

/// What committing one bucket came to.
enum Committed {
    /// The new state is stored in slot `index`.
    Written { index: u32, decision: Decision },
    /// Read again after a conflict, the bucket denies: nothing was written.
    Denied(Decision),
}

/// Writes one bucket's new state (`found` as read, `decision` made on it), reading and
/// deciding again on each conflict. The slot as read is borrowed, not copied: it is
/// read again only after a conflict.
fn commit(
    table: &Table,
    store: &impl SharedData,
    take: &Take,
    found: &Found,
    mut decision: Decision,
    now_ns: u64,
    events: &mut TableEvents,
) -> Result<Committed, LocalError> {
    let mut read_again: Found;
    let mut found = found;
    for _ in 0..MAX_ATTEMPTS {
        let Decision::Allow { new_state, .. } = decision else {
            return Ok(Committed::Denied(decision));
        };
        let slot = Slot {
            fingerprint: take.fingerprint,
            tat: new_state,
            rate_micro: take.quota.rate_micro(),
        };
        match table.write_found(store, found, &slot) {
            Ok(()) => {
                match found.origin {
                    Origin::Empty => events.new_buckets += 1,
                    Origin::Evicted => events.evictions += 1,
                    Origin::Existing | Origin::Idle => {}
                }
                return Ok(Committed::Written {
                    index: found.index,
                    decision,
                });
            }
            Err(SetError::Conflict) => {
                events.conflicts += 1;
                read_again = table.find(store, take.fingerprint, now_ns)?;
                found = &read_again;
                decision = bucket::decide(found.state, now_ns, take.quota, take.cost);
            }
            Err(SetError::Store(e)) => return Err(LocalError::Store(e)),
        }
    }
    Err(LocalError::Contention)
}

/// Gives back the tokens a request held, for a request rejected after taking them.
/// Best effort: a bucket evicted meanwhile has nothing to give back to, and a host
/// failure leaves the tokens spent. Applied right after the take, it restores the bucket
/// exactly; later, it restores it as if the request had never come (refill included).
pub fn give_back(table: &Table, store: &impl SharedData, held: &[Held], now_ns: u64) {
    for h in held {
        for _ in 0..MAX_ATTEMPTS {
            let Ok(Some((slot, cas))) = table.read(store, h.index) else {
                break;
            };
            if slot.fingerprint != h.take.fingerprint {
                break;
            }
            let back = Slot {
                tat: bucket::refund(slot.tat, now_ns, h.take.quota, h.take.cost),
                ..slot
            };
            if table.write(store, h.index, &back, cas) != Err(SetError::Conflict) {
                break;
            }
        }
    }
}

/// Settles a request whose cost the response reported: `held` tokens were taken at
/// admission, it cost `cost`; the bucket is charged the difference (going into debt if
/// need be) or given it back. Read, settle, compare-and-swap, settle again on conflict,
/// so that no concurrent charge is lost. A bucket no longer in its slot (evicted
/// meanwhile) is looked up again, placed afresh if need be, and charged the whole cost
/// there: the debt is never dropped (but stops at one burst, see [`bucket::settle`]).
/// Returns whether the debt was capped, or why the bucket could not be written.
pub fn settle(
    table: &Table,
    store: &impl SharedData,
    held: &Held,
    cost: u32,
    now_ns: u64,
    events: &mut TableEvents,
) -> Result<bool, LocalError> {
    let take = &held.take;
    for _ in 0..MAX_ATTEMPTS {
        let found = table.find(store, take.fingerprint, now_ns)?;
        // A bucket placed afresh lost what was held with the old one: charge it all.
        let held_here = if found.origin == Origin::Existing {
            take.cost.max(1)
        } else {
            0
        };
        let settled = bucket::settle(found.state, now_ns, take.quota, held_here, cost);
        let slot = Slot {
            fingerprint: take.fingerprint,
            tat: settled.state,
            rate_micro: take.quota.rate_micro(),
        };
        match table.write_found(store, &found, &slot) {
            Ok(()) => {
                match found.origin {
                    Origin::Empty => events.new_buckets += 1,
                    Origin::Evicted => events.evictions += 1,
                    Origin::Existing | Origin::Idle => {}
                }
                return Ok(settled.debt_capped);
            }
            Err(SetError::Conflict) => events.conflicts += 1,
            Err(SetError::Store(e)) => return Err(LocalError::Store(e)),
        }
    }
    Err(LocalError::Contention)
}

#[cfg(test)]
mod tests;
