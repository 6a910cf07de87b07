//! Grants (quota leases) in an admitted request: which items get one, how much of what
//! remains it may take ([`Share`]), and the decision again with it.

use super::Counters;
use crate::algorithm::lease::{self, Grant};
use crate::algorithm::{decide as decide_one, Algorithm, Decision, State, Update};
use crate::store::Check;
use std::num::NonZeroU32;

/// How much of a counter's remaining hits one grant may take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Share {
    /// All of it (a store whose counters are exact: memory, Redis).
    #[default]
    All,
    /// `remaining / n`, rounded down: a store whose remaining is an estimate that `n`
    /// nodes each act on (gossip), so that `n` grants made on one view take at most
    /// what remains between them.
    OneIn(NonZeroU32),
}

impl Share {
    /// What a grant may take of `remaining`.
    pub fn of(self, remaining: u32) -> u32 {
        match self {
            Share::All => remaining,
            Share::OneIn(n) => remaining / n.get(),
        }
    }
}

/// The grants of an admitted request (see the module documentation).
pub(super) struct Grants<'a, 'b> {
    pub(super) batch: &'a [Check],
    pub(super) counters: &'a Counters,
    pub(super) loaded: &'a [Option<&'b State>],
    pub(super) now_ns: u64,
    pub(super) share: Share,
}

impl Grants<'_, '_> {
    /// Takes every grant due: an item that gets one is decided again, from the state it
    /// was first decided on, with its hits plus the grant (which fits: `remaining` is
    /// exactly the whole hits that still fit after the admission).
    pub(super) fn take(&mut self, decisions: &mut [Decision], updates: &mut [Option<Update>]) {
        for (i, c) in self.batch.iter().enumerate() {
            let Some(grant) = self.due(i, &decisions[i]) else {
                continue;
            };
            let Some(k) = self.counters.of_item(i) else {
                continue;
            };
            let fresh = State::fresh(&c.limit);
            let base = self.loaded.get(k).copied().flatten().unwrap_or(&fresh);
            let with_grant = c.hits.saturating_add(u64::from(grant.hits));
            let (d, u) = decide_one(base, self.now_ns, &c.limit, with_grant);
            if d.allowed {
                decisions[i] = Decision {
                    grant: Some(grant),
                    ..d
                };
                updates[i] = Some(u);
            }
        }
    }

    /// The grant item `i`, decided `d`, gets, if any.
    fn due(&self, i: usize, d: &Decision) -> Option<Grant> {
        let c = &self.batch[i];
        let quota = c.quota?;
        // A concurrency limit is never leased: slots are held per request, never ahead.
        let held = c.limit.algorithm == Algorithm::Concurrency;
        if c.shadow || c.quota_mode || c.blocked || held || !d.allowed {
            return None;
        }
        // Only on a counter no other item uses, so no other item's decision depends on it.
        if self.counters.uses(self.counters.of_item(i)?) > 1 {
            return None;
        }
        let grantable = self.share.of(d.remaining);
        lease::grant(&c.limit, &quota, grantable, self.now_ns)
    }
}
