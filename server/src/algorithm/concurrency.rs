//! `concurrency`: at most `requests_per_unit` slots held at once per counter, each hold
//! lasting until it is released or until its deadline, one window (`unit` ×
//! `unit_multiplier`) after it was taken.
//!
//! A rate says nothing about how many requests a tenant holds open at once; for streams
//! (LLM completions, long polls, uploads) that is what exhausts an upstream. A caller takes
//! a hold under an id of its own ([`HoldId`], the `x-floodgate-hold` header) with the
//! request, and releases it at stream end (`x-floodgate-release`). A caller that dies never
//! releases, so every hold has a deadline and a hold past it is dropped on the next touch of
//! its counter (reclaimed): without a release, the limit is `N` per unit.
//!
//! The state is the set of live holds, id → (slots, deadline). Deciding is pure: the store
//! hands in `now` and what the call does with its id ([`HoldOp`]), this module answers the
//! decision and an [`Update`] that drops the expired holds and adds or removes one.
//!
//! - **Acquire** `hits` slots under `id`: admitted while the live slots plus `hits` are at
//!   most the limit. The same id already holding on this counter is the same hold: admitted,
//!   nothing more taken, its deadline unchanged (a retried acquire never counts twice, and
//!   never extends a hold past the one unit it was promised). 0 hits is check-only.
//! - **Release** `id`: always admitted; frees that id's hold if it is live. Idempotent: a
//!   second release, or one of an id never held or already expired, frees nothing.
//! - No op (a charge, or a plain [`super::decide`]): check-only, nothing taken.
//!
//! A denial's `reset_in_ns` is the time until the earliest live hold's deadline: an upper
//! bound on when a slot frees by itself, since a release may free one sooner. Unlike the
//! rate algorithms it is therefore not exact, and floodgate's filter never caches a
//! concurrency denial. It is 0 when a slot is free now (only the request's slots were too
//! many), as for the other algorithms.

use super::{clamp_u32, Decision, Limit};

/// The longest hold id, in bytes (the rule is the shared crate's, which the filter's ids
/// are minted to).
pub use floodgate_common::headers::MAX_HOLD_ID;

/// A caller's hold id: 1 to [`MAX_HOLD_ID`] bytes of `[A-Za-z0-9._-]`. Kept inline (no
/// allocation, `Copy`): a counter keeps one per hold, at most its limit of them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HoldId {
    len: u8,
    bytes: [u8; MAX_HOLD_ID],
}

impl HoldId {
    /// The id `text` spells, or `None` when it is empty, longer than [`MAX_HOLD_ID`] or has
    /// a byte outside `[A-Za-z0-9._-]` (a client's bytes, never trusted; the charset keeps
    /// ids printable and free of the `:` the Redis member format uses).
    pub fn parse(text: &[u8]) -> Option<HoldId> {
        if !floodgate_common::headers::is_hold_id(text) {
            return None;
        }
        let mut bytes = [0u8; MAX_HOLD_ID];
        bytes[..text.len()].copy_from_slice(text);
        Some(HoldId {
            len: text.len() as u8,
            bytes,
        })
    }

    /// An id of the server's own: `fg-srv.` and the two numbers in 32 hex digits (always
    /// well formed, so no `Option`).
    pub fn server(a: u64, b: u64) -> HoldId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0u8; MAX_HOLD_ID];
        let prefix = b"fg-srv.";
        bytes[..prefix.len()].copy_from_slice(prefix);
        for (i, n) in [a, b].into_iter().enumerate() {
            for d in 0..16 {
                let nibble = (n >> (60 - 4 * d)) & 0xf;
                bytes[prefix.len() + 16 * i + d] = HEX[nibble as usize];
            }
        }
        HoldId {
            len: (prefix.len() + 32) as u8,
            bytes,
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (see `parse`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Debug for HoldId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HoldId({:?})", self.as_str())
    }
}

/// What a call does with its hold id on a concurrency counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldOp {
    /// Take the item's hits as slots under this id (all or nothing with the call).
    Acquire(HoldId),
    /// Give back this id's hold, if live.
    Release(HoldId),
}

/// One live hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Whose.
    pub id: HoldId,
    /// Slots taken (at least 1).
    pub slots: u64,
    /// When it ends by itself (ns since the Unix epoch).
    pub deadline_ns: u64,
}

/// A counter's holds. Never more than its limit of them, since a hold takes at least one
/// slot; a hold past its deadline counts for nothing and is dropped by the next update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    holds: Vec<Hold>,
}

/// What a decision changes: expired holds dropped (as of `now_ns`), then one removed or
/// one added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    now_ns: u64,
    add: Option<Hold>,
    remove: Option<HoldId>,
}

impl Update {
    /// Whether it adds a hold (a cell in the memory store).
    pub fn adds(&self) -> bool {
        self.add.is_some()
    }

    /// Whether it frees a hold.
    pub fn releases(&self) -> bool {
        self.remove.is_some()
    }
}

impl State {
    /// The live holds at `now_ns`.
    fn live(&self, now_ns: u64) -> impl Iterator<Item = &Hold> + '_ {
        self.holds.iter().filter(move |h| h.deadline_ns > now_ns)
    }

    /// Slots held at `now_ns`.
    pub fn in_flight(&self, now_ns: u64) -> u64 {
        self.live(now_ns)
            .map(|h| h.slots)
            .fold(0, u64::saturating_add)
    }

    /// Holds kept, live or not yet dropped.
    pub fn len(&self) -> usize {
        self.holds.len()
    }

    /// Whether it keeps no hold.
    pub fn is_empty(&self) -> bool {
        self.holds.is_empty()
    }

    /// How many kept holds are past their deadline at `now_ns` (what an update reclaims).
    pub fn expired(&self, now_ns: u64) -> usize {
        self.holds
            .iter()
            .filter(|h| h.deadline_ns <= now_ns)
            .count()
    }

    /// From this instant the counter holds nothing: its latest deadline.
    pub fn idle_at(&self) -> u64 {
        self.holds.iter().map(|h| h.deadline_ns).max().unwrap_or(0)
    }

    /// Applies an update [`decide`] made on this state.
    pub fn apply(&mut self, u: &Update) {
        self.holds.retain(|h| h.deadline_ns > u.now_ns);
        if let Some(id) = u.remove {
            self.holds.retain(|h| h.id != id);
        }
        if let Some(add) = u.add {
            if !self.holds.iter().any(|h| h.id == add.id) {
                self.holds.push(add);
            }
        }
    }
}

/// Decides `hits` slots for `op` on `s` at `now_ns` under `limit` (see the module
/// documentation); `None` is check-only.
pub fn decide(
    s: &State,
    now_ns: u64,
    limit: &Limit,
    hits: u64,
    op: Option<&HoldOp>,
) -> (Decision, Update) {
    // Without an op nothing is ever taken: check-only.
    let hits = if op.is_some() { hits } else { 0 };
    let max = limit.rpu();
    let held = s.in_flight(now_ns);
    let mut update = Update {
        now_ns,
        add: None,
        remove: None,
    };
    let mine = |id: &HoldId| s.live(now_ns).find(|h| h.id == *id);
    let admitted = |held: u64, latest: u64| Decision {
        allowed: true,
        remaining: clamp_u32(max.saturating_sub(held)),
        reset_in_ns: latest.saturating_sub(now_ns),
        grant: None,
    };
    let latest = s.live(now_ns).map(|h| h.deadline_ns).max().unwrap_or(0);
    match op {
        Some(HoldOp::Release(id)) => {
            let freed = mine(id).map_or(0, |h| h.slots);
            let after = s
                .live(now_ns)
                .filter(|h| h.id != *id)
                .map(|h| h.deadline_ns)
                .max()
                .unwrap_or(0);
            update.remove = Some(*id);
            (admitted(held - freed, after), update)
        }
        Some(HoldOp::Acquire(id)) if mine(id).is_some() => (admitted(held, latest), update),
        _ if hits == 0 && held < max => (admitted(held, latest), update),
        Some(HoldOp::Acquire(id)) if hits > 0 && held.saturating_add(hits) <= max => {
            let deadline_ns = now_ns.saturating_add(limit.period_ns());
            update.add = Some(Hold {
                id: *id,
                slots: hits,
                deadline_ns,
            });
            (admitted(held + hits, latest.max(deadline_ns)), update)
        }
        _ => {
            // Over: a slot frees by itself at the earliest deadline at the latest; now
            // when one is free and only this request's slots were too many.
            let earliest = s
                .live(now_ns)
                .map(|h| h.deadline_ns)
                .min()
                .unwrap_or(now_ns);
            let reset_in_ns = if held < max {
                0
            } else {
                earliest.saturating_sub(now_ns)
            };
            let d = Decision {
                allowed: false,
                remaining: clamp_u32(max.saturating_sub(held)),
                reset_in_ns,
                grant: None,
            };
            (d, update)
        }
    }
}

#[cfg(test)]
mod tests;
