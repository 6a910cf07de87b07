//! A batch's rules, once, as pure code every store reuses: which items are decided on
//! which state, whether the request is admitted, what a grant takes, what a rejected
//! request reports, and what must be written.
//!
//! A store does only what is its own: inside its atomic step it **loads** the live state
//! of each of the batch's [`Counters`] (none: fresh), calls [`decide`], and **applies** the
//! [`Outcome`]'s writes, all of them or none. The memory store does that under its shard
//! locks and the gossip store under its own; the Redis store cannot (the decision must
//! run inside its one Lua script), so `check.lua` is the Lua twin of these rules and the
//! conformance suite holds both to the same answers.
//!
//! # The rules
//! - **In order.** Items are decided in batch order against the state as it stands; an
//!   item on a counter an earlier item of the batch used sees that item's hits.
//! - **All or nothing** (under [`Counting::AllOrNothing`], the default): nothing is
//!   consumed unless the request is admitted ([`admits`]): every enforced item (not in
//!   shadow or quota mode) within its limit and, when there are quota-mode items, at
//!   least one of them. A rejected request writes nothing, and its admitted items report
//!   the remaining that holds ([`report_unconsumed`]). Under
//!   [`Counting::PerDescriptor`] every item within its own limit consumes whatever the
//!   others decided.
//! - **Check-only items** (hits 0) are decided as whether one hit fits and record
//!   nothing: a counter only check-only items touch is not written unless it exists.
//! - **Blocked items** (`requests_per_unit: 0`) are always over and have no counter.
//! - **Charges** ([`Call::Charge`]) count every item whatever it finds (into debt), block
//!   nothing, and grant nothing.
//! - **Grants** (quota leases): in an admitted request, an enforced, admitted item that
//!   asked, on a counter no other item of the batch uses, takes up to its quota of what
//!   its admission left (no more than [`Rules::share`] allows), decided again with its own
//!   hits plus the grant in the same step, so a grant is counted like any hit.

mod grants;

pub use grants::Share;

use super::Check;
use crate::algorithm::concurrency::HoldOp;
use crate::algorithm::{charge, decide_holding, Decision, Limit, State, Update};
use grants::Grants;
use smallvec::SmallVec;

/// A list with one entry per item or counter of a batch: on the stack for up to four.
pub type PerItem<T> = SmallVec<[T; 4]>;

/// Which items of a request consume their hits. The RLS layer's answers are the same
/// either way; only what later requests find in the counters differs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Counting {
    /// Nothing is consumed unless every enforced item is within its limit (floodgate's
    /// default, the reference's `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`): a client
    /// hammering one exhausted limit does not drain its others.
    #[default]
    AllOrNothing,
    /// Every item within its own limit consumes, even when another item rejects the
    /// request: envoyproxy/ratelimit's default counting, for a migration that must count
    /// exactly as before. An item over its own limit consumes nothing.
    PerDescriptor,
}

impl Counting {
    /// Whether a request with an enforced item over its limit still consumes the others.
    pub fn consumes_rejected(self) -> bool {
        self == Counting::PerDescriptor
    }
}

/// What a store is asked to do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Decide, and consume as [`Counting`] says ([`super::Store::check`]).
    Check,
    /// Count every item whatever it finds ([`super::Store::charge`]).
    Charge,
}

/// A store's rules beyond the batch itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Which items of a rejected request consume.
    pub counting: Counting,
    /// How much of what remains one grant may take.
    pub share: Share,
}

/// The distinct counters of a batch, each once: a key under a limit. Blocked items have
/// none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Per item: the index of its counter.
    of_item: PerItem<Option<usize>>,
    /// Per counter: the first item naming it.
    first: PerItem<usize>,
}

impl Counters {
    /// The counters of `batch`, in order of first use.
    pub fn of(batch: &[Check]) -> Counters {
        let mut first: PerItem<usize> = PerItem::new();
        let of_item = batch
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if c.blocked {
                    return None;
                }
                let known = first.iter().position(|&f| same_counter(&batch[f], c));
                Some(known.unwrap_or_else(|| {
                    first.push(i);
                    first.len() - 1
                }))
            })
            .collect();
        Counters { of_item, first }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether there are none (every item blocked, or no item).
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Each counter's index and the first item of `batch` naming it (its key and limit).
    pub fn iter<'a>(&'a self, batch: &'a [Check]) -> impl Iterator<Item = (usize, &'a Check)> + 'a {
        self.first.iter().map(move |&i| &batch[i]).enumerate()
    }

    /// The first item of `batch` naming counter `k` (its key and limit).
    pub fn check<'a>(&self, batch: &'a [Check], k: usize) -> Option<&'a Check> {
        batch.get(*self.first.get(k)?)
    }

    /// The counter of item `i` (none for a blocked item).
    pub fn of_item(&self, i: usize) -> Option<usize> {
        self.of_item.get(i).copied().flatten()
    }

    /// How many items of the batch use counter `k`.
    pub(super) fn uses(&self, k: usize) -> usize {
        self.of_item.iter().filter(|&&c| c == Some(k)).count()
    }
}

/// Whether two items count on the same counter (a blocked item has none).
fn same_counter(a: &Check, b: &Check) -> bool {
    a.key == b.key && a.limit == b.limit && !a.blocked && !b.blocked
}

/// What a batch decided, and what its store must write (all of it, in one step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// One decision per item, in order.
    pub decisions: Vec<Decision>,
    /// The counters to write, in counter order; none for a rejected request.
    pub writes: PerItem<Write>,
}

/// The new state of one counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Which counter (an index of [`Counters`]).
    pub counter: usize,
    /// The updates to apply in order to the state loaded for it (a fresh one if none was):
    /// one per item on the counter.
    pub updates: SmallVec<[Update; 1]>,
    /// Whether anything is recorded; false when only check-only or denied items touched a
    /// counter that exists (the updates then change nothing that matters).
    pub records: bool,
}

impl Write {
    /// The counter's state after this write, from the state loaded for it.
    pub fn applied_to(&self, loaded: Option<&State>, limit: &Limit) -> State {
        let mut state = loaded.cloned().unwrap_or_else(|| State::fresh(limit));
        for u in &self.updates {
            state.apply(u.clone());
        }
        state
    }
}

/// Decides `batch` at `now_ns` by the rules of this module, on `loaded`: one state per
/// counter of `counters` (`None`: the store holds no live state, decided as fresh).
pub fn decide(
    batch: &[Check],
    counters: &Counters,
    loaded: &[Option<&State>],
    now_ns: u64,
    call: Call,
    rules: Rules,
) -> Outcome {
    let (mut decisions, mut updates) = decide_items(batch, counters, loaded, now_ns, call);
    let admitted = call == Call::Charge || admits(batch, |i| decisions[i].allowed);
    if !admitted && !rules.counting.consumes_rejected() {
        // Over the limit somewhere: the request consumes nothing.
        report_unconsumed(batch, &mut decisions);
        return Outcome {
            decisions,
            writes: PerItem::new(),
        };
    }
    if admitted && call == Call::Check {
        let mut grants = Grants {
            batch,
            counters,
            loaded,
            now_ns,
            share: rules.share,
        };
        grants.take(&mut decisions, &mut updates);
    }
    let writes = writes(batch, counters, loaded, &decisions, updates, call);
    Outcome { decisions, writes }
}

/// Every item decided in order, changing nothing: its decision, and its update (none
/// for a blocked item).
fn decide_items(
    batch: &[Check],
    counters: &Counters,
    loaded: &[Option<&State>],
    now_ns: u64,
    call: Call,
) -> (Vec<Decision>, PerItem<Option<Update>>) {
    let count = |s: &State, now: u64, limit: &Limit, hits: u64, hold: Option<&HoldOp>| match call {
        Call::Check => decide_holding(s, now, limit, hits, hold),
        Call::Charge => charge(s, now, limit, hits),
    };
    let mut decisions = Vec::with_capacity(batch.len());
    let mut updates: PerItem<Option<Update>> = PerItem::with_capacity(batch.len());
    for (i, c) in batch.iter().enumerate() {
        let Some(k) = counters.of_item(i) else {
            decisions.push(blocked_decision(&c.limit, now_ns));
            updates.push(None);
            continue;
        };
        let base = loaded.get(k).copied().flatten();
        // The same counter earlier in the batch: this item sees its hits.
        let mut earlier = (0..i)
            .filter(|&j| counters.of_item(j) == Some(k))
            .filter_map(|j| updates[j].as_ref())
            .peekable();
        let (d, u) = if earlier.peek().is_none() {
            match base {
                Some(s) => count(s, now_ns, &c.limit, c.hits, c.hold.as_ref()),
                None => count(
                    &State::fresh(&c.limit),
                    now_ns,
                    &c.limit,
                    c.hits,
                    c.hold.as_ref(),
                ),
            }
        } else {
            let mut s = base.cloned().unwrap_or_else(|| State::fresh(&c.limit));
            for u in earlier {
                s.apply(u.clone());
            }
            count(&s, now_ns, &c.limit, c.hits, c.hold.as_ref())
        };
        decisions.push(d);
        updates.push(Some(u));
    }
    (decisions, updates)
}

/// The writes of a request that consumes: every counter something records on, and
/// every loaded counter the batch touched (its updates in batch order).
fn writes(
    batch: &[Check],
    counters: &Counters,
    loaded: &[Option<&State>],
    decisions: &[Decision],
    updates: PerItem<Option<Update>>,
    call: Call,
) -> PerItem<Write> {
    let mut writes: PerItem<Write> = (0..counters.len())
        .map(|counter| Write {
            counter,
            updates: SmallVec::new(),
            records: false,
        })
        .collect();
    for (i, u) in updates.into_iter().enumerate() {
        let (Some(k), Some(u)) = (counters.of_item(i), u) else {
            continue;
        };
        let counts = decisions[i].allowed || call == Call::Charge;
        // A check-only item records only what it was granted; a release records the hold
        // it frees.
        let hits = batch[i].hits > 0
            || decisions[i].grant.is_some()
            || matches!(&u, Update::Concurrency(c) if c.releases());
        writes[k].records |= counts && hits;
        writes[k].updates.push(u);
    }
    writes.retain(|w| w.records || loaded.get(w.counter).copied().flatten().is_some());
    writes
}

/// Whether a request whose items were decided `allowed` (one per item of `batch`) is
/// admitted: no enforced item over, and at least one quota item within when there are any
/// (the reference's quota mode). Every store applies this one rule; `check.lua` mirrors it.
pub fn admits(batch: &[Check], allowed: impl Fn(usize) -> bool) -> bool {
    let mut quota_items = 0usize;
    let mut quota_within = 0usize;
    for (i, c) in batch.iter().enumerate() {
        match (c.shadow, c.quota_mode, allowed(i)) {
            (true, _, _) => {}
            (false, true, ok) => {
                quota_items += 1;
                quota_within += usize::from(ok);
            }
            (false, false, ok) => {
                if !ok {
                    return false;
                }
            }
        }
    }
    quota_items == 0 || quota_within > 0
}

/// Whether a decided batch is rejected: the request is not admitted ([`admits`]).
pub fn rejected(batch: &[Check], decisions: &[Decision]) -> bool {
    !admits(batch, |i| decisions.get(i).is_some_and(|d| d.allowed))
}

/// The decision for a `blocked` item at `now_ns`: over, nothing remaining, and the time
/// until its unit's epoch-aligned window ends (what the reference reports for a limit of 0).
pub fn blocked_decision(limit: &Limit, now_ns: u64) -> Decision {
    let period = limit.period_ns();
    Decision {
        allowed: false,
        remaining: 0,
        reset_in_ns: period - now_ns % period,
        grant: None,
    }
}

/// Turns the decisions of a batch rejected under [`Counting::AllOrNothing`] into what
/// holds: its admitted items consumed nothing, so each reports its remaining as it stands,
/// i.e. what it was told plus the hits it (and earlier admitted items on the same counter,
/// which it saw) would have taken. Every algorithm's remaining falls by exactly the hits an
/// admission takes, so this is exact. Denied items are left as they are.
pub fn report_unconsumed(batch: &[Check], decisions: &mut [Decision]) {
    for i in 0..decisions.len().min(batch.len()) {
        if !decisions[i].allowed {
            continue;
        }
        let taken: u64 = (0..=i)
            .filter(|&j| decisions[j].allowed && same_counter(&batch[j], &batch[i]))
            .map(|j| batch[j].hits.max(1))
            .fold(0, u64::saturating_add);
        let remaining = u64::from(decisions[i].remaining).saturating_add(taken);
        decisions[i].remaining = u32::try_from(remaining).unwrap_or(u32::MAX);
    }
}

#[cfg(test)]
mod tests;
