//! The lease table: quota grants from the rate limit service, kept in shared data so that
//! every worker of an Envoy spends them, by compare-and-swap, with no call.
//!
//! When floodgate asks for quota (the `x-floodgate-quota` header, see [`crate::wire::rls`]) and
//! the service admits the request, it may also take up to `N` more hits for us and answer
//! a grant: `requests` hits, spendable until `valid_until`. A later request matching the
//! same (rule, descriptor values) takes its cost from the grant ([`LeaseTable::spend`])
//! instead of calling. A grant that is spent or past its `valid_until` admits nothing: the
//! next request calls again. An exhausted unexpired grant means "ask again", never
//! "over limit" (which is what the RLS v3 comment on `Quota` says; we do not follow it).
//!
//! **Sub-grants.** Grants arrive at different times with different `valid_until`; a
//! token may never be spent after its own grant's `valid_until`, so an entry keeps
//! [`SUB_GRANTS`] separate (remaining, valid_until) pairs and spends the one expiring
//! first. A grant arriving when both are live is merged with the one of the two that
//! expires later, at the earlier of their two deadlines: tokens may be moved to an
//! earlier deadline (which can only under-admit), never to a later one.
//!
//! **Refill.** When a spend leaves fewer than half of the last grant (the low-water mark)
//! and no refill is in flight, the same compare-and-swap sets a flight marker with its own
//! deadline and tells the caller to refill ([`Spent::refill`]): one worker makes a
//! check-only call in the background while the request goes on. The marker is cleared
//! when a grant is stored; a lost call blocks refills only until its deadline.
//!
//! Memory is fixed like the over-limit cache's ([`crate::shared::sets`]): `sets` keys created
//! before traffic, each holding at most [`WAYS`] entries of [`ENTRY_LEN`] bytes, keyed by
//! the 128-bit fingerprint of the domain, rule and descriptor values, never the client's
//! bytes. An entry with no live sub-grant and no flight is free. When a set is full of
//! live entries, the one holding the fewest tokens is evicted, the one expiring first
//! among equals (counted; its tokens are lost, which only under-admits, but each was a hit
//! the service counted: evicting the fewest loses the least).
//!
//! Format (version 2, pinned by tests): key `floodgate/v2/lease/<index>`; key
//! `floodgate/v2/lease/sets` holds how many set keys exist (u32 little-endian). A set's
//! value is its entries one after the other, each little-endian: fingerprint u128, last
//! grant u32, flight deadline (ns, 0: none) u64, then per sub-grant remaining u32 and
//! valid_until (wall clock, ns) u64.

use crate::shared::sets::{edit, Edit, Edited, Sets};
use crate::shared::{SharedData, StoreError};
use std::num::NonZeroU32;

/// Entries one set holds.
pub const WAYS: u32 = 4;

/// Prefix of the table's set keys.
const PREFIX: &[u8] = b"floodgate/v2/lease/";

/// The key counting how many set keys exist.
pub const SETS_KEY: &[u8] = b"floodgate/v2/lease/sets";

/// Attempts at one update when other workers write the same set at the same time.
const WRITE_ATTEMPTS: u32 = 8;

mod entry;
pub use entry::{
    decode_set, encode_set, find_in_set, replace_in_set, Lease, SubGrant, Taken, ENTRY_LEN,
    SUB_GRANTS,
};

/// What a spend did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// What was taken; `None`: the live grants hold less than the cost (call instead).
    pub taken: Option<Taken>,
    /// This caller must refill: it set the flight marker.
    pub refill: bool,
    /// Compare-and-swap conflicts met.
    pub conflicts: u32,
}

/// What storing a grant did (gave up: the grant is lost, which only under-admits).
pub use crate::shared::sets::Stored;

/// How much of a grant is kept, and for how long, whatever the service sent: a hostile or
/// buggy service must not make one grant decide millions of requests, or years of them.
/// Keeping less than was granted only under-admits (the service counted the hits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantBounds {
    /// The most hits kept of one grant.
    pub max_requests: u32,
    /// The longest a grant may be spent from its arrival, in ns.
    pub max_valid_ns: u64,
}

impl GrantBounds {
    /// A grant of `requests` hits valid until `valid_until_ns`, received at `now_ns`, as
    /// kept, and whether it had to be cut to fit.
    pub fn clamp(&self, requests: u32, valid_until_ns: u64, now_ns: u64) -> (SubGrant, bool) {
        let latest = now_ns.saturating_add(self.max_valid_ns);
        let kept = SubGrant {
            remaining: requests.min(self.max_requests),
            valid_until_ns: valid_until_ns.min(latest),
        };
        let clamped = kept.remaining < requests || kept.valid_until_ns < valid_until_ns;
        (kept, clamped)
    }
}

/// The table's shape: how many sets of [`WAYS`] entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTable {
    sets: Sets,
}

impl LeaseTable {
    /// A table of at least `slots` entries (rounded up to whole sets).
    pub fn new(slots: NonZeroU32) -> LeaseTable {
        LeaseTable {
            sets: Sets::new(PREFIX, SETS_KEY, slots.get().div_ceil(WAYS)),
        }
    }

    /// Number of set keys.
    pub fn sets(&self) -> u32 {
        self.sets.sets()
    }

    /// Creates the set keys before traffic. Returns the number of keys created.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        self.sets.prepare(store)
    }

    /// The lease of `fingerprint`, as stored (one read; for tests and metrics).
    pub fn get(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
    ) -> Result<Option<Lease>, StoreError> {
        let Some(read) = store.get(&self.sets.home(fingerprint))? else {
            return Ok(None);
        };
        Ok(decode_set(&read.value)
            .into_iter()
            .find(|e| e.fingerprint == fingerprint))
    }

    /// Takes `cost` tokens for `fingerprint` at `now_ns`: read, decide, compare-and-swap,
    /// decide again on conflict. When the spend leaves the grant below its low-water mark
    /// and no refill is in flight, also sets the flight marker until `now_ns +
    /// flight_ns` and reports [`Spent::refill`]. Giving up after conflicts takes nothing.
    pub fn spend(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        cost: u32,
        now_ns: u64,
        flight_ns: u64,
    ) -> Result<Spent, StoreError> {
        let edited = self.edit_lease(store, fingerprint, |lease| {
            let taken = lease.take(cost, now_ns)?;
            let refill = lease.needs_refill(now_ns);
            if refill {
                lease.flight_until_ns = now_ns.saturating_add(flight_ns);
            }
            Some((Some(taken), refill))
        })?;
        let (taken, refill) = edited.outcome.flatten().unwrap_or((None, false));
        Ok(Spent {
            taken,
            refill,
            conflicts: edited.conflicts,
        })
    }

    /// Gives back tokens a request took but did not use (another of its descriptors had
    /// no grant, so it calls instead).
    pub fn give_back(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        taken: &Taken,
        now_ns: u64,
    ) -> Result<u32, StoreError> {
        let edited = self.edit_lease(store, fingerprint, |lease| {
            lease.give_back(taken, now_ns);
            Some(())
        })?;
        Ok(edited.conflicts)
    }

    /// Changes `fingerprint`'s lease with `change` (read, change, compare-and-swap, change
    /// again on conflict). `change` returning `None`, or no lease: nothing is written, and
    /// the outcome is `None`.
    fn edit_lease<T>(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        mut change: impl FnMut(&mut Lease) -> Option<T>,
    ) -> Result<Edited<Option<T>>, StoreError> {
        edit(
            store,
            &self.sets.home(fingerprint),
            WRITE_ATTEMPTS,
            |value| {
                // Only the entry changed is decoded and written back in place.
                let Some((index, mut lease)) = find_in_set(value, fingerprint) else {
                    return Edit::Keep(None);
                };
                match change(&mut lease) {
                    Some(outcome) => {
                        Edit::Write(replace_in_set(value, index, &lease), Some(outcome))
                    }
                    None => Edit::Keep(None),
                }
            },
        )
    }

    /// Stores a grant received at `now_ns` for `fingerprint`, and clears its flight marker:
    /// a fresh grant arrived (a refill's, or a call's that asked for quota), so the next
    /// spend below the low-water mark may refill again.
    pub fn store(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        grant: SubGrant,
        now_ns: u64,
    ) -> Result<Stored, StoreError> {
        let edited = edit(
            store,
            &self.sets.home(fingerprint),
            WRITE_ATTEMPTS,
            |value| {
                let (entries, evicted) = with_grant(decode_set(value), fingerprint, grant, now_ns);
                Edit::Write(encode_set(&entries), evicted)
            },
        )?;
        Ok(edited.into())
    }
}

/// The set `entries` becomes with `grant` added to `fingerprint`'s lease at `now_ns`, and
/// whether a live entry of another descriptor was evicted for it: the one that loses
/// least, i.e. holds the fewest tokens (each one a hit the service already counted, lost
/// with the entry), the one expiring first among those.
fn with_grant(
    entries: Vec<Lease>,
    fingerprint: u128,
    grant: SubGrant,
    now_ns: u64,
) -> (Vec<Lease>, bool) {
    let mut mine = Lease::empty(fingerprint);
    let mut others: Vec<Lease> = Vec::with_capacity(WAYS as usize);
    for e in entries {
        if e.fingerprint == fingerprint {
            mine = e;
        } else if e.live(now_ns) {
            others.push(e);
        }
    }
    let mut evicted = false;
    while others.len() >= WAYS as usize {
        let least = others
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| (e.available(now_ns), e.expires_ns()))
            .map_or(0, |(i, _)| i);
        others.remove(least);
        evicted = true;
    }
    mine.add(grant, now_ns);
    mine.flight_until_ns = 0;
    others.push(mine);
    (others, evicted)
}

#[cfg(test)]
mod tests;
