//! The lease table: quota grants from the rate limit service, kept in shared data so that
//! every worker of an Envoy spends them, by compare-and-swap, with no call.
//!
//! When floodgate asks for quota (the `x-floodgate-quota` header, see [`crate::rls`]) and
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
//! Memory is fixed like the over-limit cache's ([`crate::sets`]): `sets` keys created
//! before traffic, each holding at most [`WAYS`] entries of [`ENTRY_LEN`] bytes, keyed by
//! the 128-bit fingerprint of the domain, rule and descriptor values, never the client's
//! bytes. An entry with no live sub-grant and no flight is free. When a set is full of
//! live entries, the one whose grants expire first is evicted (counted; its tokens are
//! lost, which only under-admits).
//!
//! Format (version 2, pinned by tests): key `floodgate/v2/lease/<index>`; key
//! `floodgate/v2/lease/sets` holds how many set keys exist (u32 little-endian). A set's
//! value is its entries one after the other, each little-endian: fingerprint u128, last
//! grant u32, flight deadline (ns, 0: none) u64, then per sub-grant remaining u32 and
//! valid_until (wall clock, ns) u64.

use crate::sets::{edit, Edit, Edited, Sets};
use crate::shared::{SharedData, StoreError};
use std::num::NonZeroU32;

/// Entries one set holds.
pub const WAYS: u32 = 4;

/// Separate grants one entry keeps.
pub const SUB_GRANTS: usize = 2;

/// Bytes of one entry.
pub const ENTRY_LEN: usize = 16 + 4 + 8 + SUB_GRANTS * 12;

/// Prefix of the table's set keys.
const PREFIX: &[u8] = b"floodgate/v2/lease/";

/// The key counting how many set keys exist.
pub const SETS_KEY: &str = "floodgate/v2/lease/sets";

/// Attempts at one update when other workers write the same set at the same time.
const WRITE_ATTEMPTS: u32 = 8;

/// One grant's tokens left and the instant after which none may be spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubGrant {
    /// Tokens left.
    pub remaining: u32,
    /// Wall-clock instant (ns) from which the tokens are void.
    pub valid_until_ns: u64,
}

impl SubGrant {
    /// Whether it still has tokens that may be spent at `now_ns`.
    pub fn live(&self, now_ns: u64) -> bool {
        self.remaining > 0 && now_ns < self.valid_until_ns
    }
}

/// The leases of one (rule, descriptor values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Which descriptor (see [`crate::descriptor::over_limit_fingerprint`]).
    pub fingerprint: u128,
    /// Size of the last grant received: the low-water mark is half of it.
    pub last_grant: u32,
    /// Until when a refill is in flight (0: none).
    pub flight_until_ns: u64,
    /// The separate grants.
    pub grants: [SubGrant; SUB_GRANTS],
}

impl Lease {
    fn empty(fingerprint: u128) -> Lease {
        Lease {
            fingerprint,
            last_grant: 0,
            flight_until_ns: 0,
            grants: [SubGrant::default(); SUB_GRANTS],
        }
    }

    /// Tokens that may be spent at `now_ns`.
    pub fn available(&self, now_ns: u64) -> u32 {
        self.grants
            .iter()
            .filter(|g| g.live(now_ns))
            .fold(0u32, |sum, g| sum.saturating_add(g.remaining))
    }

    /// Whether the entry still says anything at `now_ns` (else its place is free).
    fn live(&self, now_ns: u64) -> bool {
        self.available(now_ns) > 0 || now_ns < self.flight_until_ns
    }

    /// When its last live grant expires (for eviction: the earliest goes first).
    fn expires_ns(&self) -> u64 {
        self.grants
            .iter()
            .map(|g| g.valid_until_ns)
            .max()
            .unwrap_or(0)
    }

    /// Takes `cost` tokens at `now_ns`, from the grants expiring first, and says what was
    /// taken from which grant; `None` (and nothing taken) when the live grants hold fewer.
    pub fn take(&mut self, cost: u32, now_ns: u64) -> Option<Taken> {
        if self.available(now_ns) < cost {
            return None;
        }
        let mut order: [usize; SUB_GRANTS] = std::array::from_fn(|i| i);
        order.sort_by_key(|&i| self.grants[i].valid_until_ns);
        let mut taken = Taken::default();
        let mut left = cost;
        for (slot, i) in order.into_iter().enumerate() {
            let g = &mut self.grants[i];
            if left == 0 || !g.live(now_ns) {
                continue;
            }
            let n = left.min(g.remaining);
            g.remaining -= n;
            left -= n;
            taken.parts[slot] = SubGrant {
                remaining: n,
                valid_until_ns: g.valid_until_ns,
            };
        }
        Some(taken)
    }

    /// Whether a refill should start at `now_ns`: fewer than half of the last grant
    /// left, and no refill in flight.
    fn needs_refill(&self, now_ns: u64) -> bool {
        u64::from(self.available(now_ns)) * 2 < u64::from(self.last_grant)
            && now_ns >= self.flight_until_ns
    }

    /// Adds a grant received at `now_ns` (see the module documentation for how it is
    /// kept apart from, or merged to an earlier deadline with, the grants already held).
    pub fn add(&mut self, grant: SubGrant, now_ns: u64) {
        self.last_grant = grant.remaining;
        if !grant.live(now_ns) {
            return;
        }
        // The same deadline: the same sub-grant.
        if let Some(g) = self
            .grants
            .iter_mut()
            .find(|g| g.live(now_ns) && g.valid_until_ns == grant.valid_until_ns)
        {
            g.remaining = g.remaining.saturating_add(grant.remaining);
            return;
        }
        if let Some(g) = self.grants.iter_mut().find(|g| !g.live(now_ns)) {
            *g = grant;
            return;
        }
        // Every sub-grant is live: merge two of the three to the earlier deadline of
        // the two, keeping the one expiring first apart.
        let later = if self.grants[0].valid_until_ns >= self.grants[1].valid_until_ns {
            0
        } else {
            1
        };
        let g = &mut self.grants[later];
        g.remaining = g.remaining.saturating_add(grant.remaining);
        g.valid_until_ns = g.valid_until_ns.min(grant.valid_until_ns);
    }

    /// Gives back what [`Lease::take`] took, to the grants it came from if they are
    /// still live at `now_ns` (tokens of an expired grant are void).
    pub fn give_back(&mut self, taken: &Taken, now_ns: u64) {
        for part in taken.parts.iter().filter(|p| p.remaining > 0) {
            if let Some(g) = self
                .grants
                .iter_mut()
                .find(|g| g.valid_until_ns == part.valid_until_ns && now_ns < g.valid_until_ns)
            {
                g.remaining = g.remaining.saturating_add(part.remaining);
            }
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.last_grant.to_le_bytes());
        out.extend_from_slice(&self.flight_until_ns.to_le_bytes());
        for g in &self.grants {
            out.extend_from_slice(&g.remaining.to_le_bytes());
            out.extend_from_slice(&g.valid_until_ns.to_le_bytes());
        }
    }

    fn decode(bytes: &[u8; ENTRY_LEN]) -> Lease {
        let u32_at = |at: usize| u32::from_le_bytes([0, 1, 2, 3].map(|i| bytes[at + i]));
        let u64_at = |at: usize| u64::from_le_bytes(std::array::from_fn(|i| bytes[at + i]));
        let fingerprint = u128::from_le_bytes(std::array::from_fn(|i| bytes[i]));
        Lease {
            fingerprint,
            last_grant: u32_at(16),
            flight_until_ns: u64_at(20),
            grants: std::array::from_fn(|i| SubGrant {
                remaining: u32_at(28 + 12 * i),
                valid_until_ns: u64_at(32 + 12 * i),
            }),
        }
    }
}

/// What one spend took from each sub-grant (by deadline), to give it back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    /// Tokens taken and the deadline of the grant they came from.
    pub parts: [SubGrant; SUB_GRANTS],
}

/// The entries of a set's value; a trailing partial entry is ignored.
pub fn decode_set(bytes: &[u8]) -> Vec<Lease> {
    bytes
        .chunks_exact(ENTRY_LEN)
        .filter_map(|c| c.try_into().ok().map(Lease::decode))
        .collect()
}

/// What a set of `entries` stores.
pub fn encode_set(entries: &[Lease]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        e.encode_into(&mut out);
    }
    out
}

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
pub use crate::sets::Stored;

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
                let mut entries = decode_set(value);
                let lease = entries.iter_mut().find(|e| e.fingerprint == fingerprint);
                match lease.and_then(&mut change) {
                    Some(outcome) => Edit::Write(encode_set(&entries), Some(outcome)),
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
/// whether a live entry of another descriptor was evicted for it.
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
        let first = others
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.expires_ns())
            .map_or(0, |(i, _)| i);
        others.remove(first);
        evicted = true;
    }
    mine.add(grant, now_ns);
    mine.flight_until_ns = 0;
    others.push(mine);
    (others, evicted)
}

#[cfg(test)]
mod tests;
