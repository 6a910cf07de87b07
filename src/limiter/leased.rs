//! The lease step (see [`crate::shared::lease`]): a request whose every global rule leases is
//! decided from the grants in shared data when each of its global descriptors has a live
//! grant holding its cost; otherwise it calls, asking for quota for all of them. After a
//! call, and after a background refill, the grants that came back are stored.
//!
//! All or nothing: the descriptors are spent one after the other, and if one has no grant
//! big enough, what the others gave is given back and the request calls for all of them
//! (the service counts each descriptor's hits once, in its own atomic step). A request
//! with a global rule that does not lease (`"global": {"quota": false}`, or a shadow rule)
//! is not decided from grants and asks for none: grants taken for it would never be
//! spent.
//!
//! A request that takes nothing in this Envoy (no local or concurrency rule) is spent
//! from before the over-limit cache is read, and a request its grants decide reads no
//! cache entry; the others meet the cache first (see `check`).
//!
//! When a spend leaves a grant below its low-water mark (half the last grant) and no
//! refill is in flight, the request goes on at once and carries a [`Refill`]: a
//! check-only call (`hits_addend` 0 for each descriptor to refill, with the quota header)
//! that the host makes in the background.

use super::prefixes::Identities;
use super::record::{record, Outcome};
use super::{Clock, Limiter, Refill};
use crate::metrics::Tally;
use crate::request::descriptor::Applied;
use crate::shared::lease::{GrantBounds, Stored, Taken};
use crate::shared::SharedData;
use crate::wire::rls::{self, Answer, Grant};
use smallvec::SmallVec;

/// What the lease step found for a request.
pub(super) enum LeaseStep {
    /// No lease applies (no lease table, or a global rule that does not lease).
    None,
    /// Every global descriptor paid from its grant: allowed, no call; maybe a refill.
    Decided(Option<Refill>),
    /// Call, asking for quota for every global descriptor (their lease keys, in
    /// descriptor order).
    Ask(Identities),
}

impl Limiter {
    /// Whether the request's global rules (`global`) are decided from leases: there are
    /// some, and every one of them leases. A request a fleet-wide concurrency rule applies
    /// to never pays from leases: its slots are taken by the call, which must be made (and
    /// a concurrency descriptor is never leased).
    fn leasing(&self, global: &[(&Applied, u32)]) -> bool {
        self.leases.is_some()
            && !global.is_empty()
            && !self.holds_fleet_wide(global)
            && global
                .iter()
                .all(|(a, _)| self.config.rules[a.rule].asks_for_lease())
    }

    /// Spends the grants of the request's global rules (`global`, with their costs; their
    /// lease keys `keys`, the descriptors' identities), or says to call: see the module
    /// documentation.
    pub(super) fn spend_leases(
        &self,
        global: &[(&Applied, u32)],
        keys: &[u128],
        clock: &mut Clock<impl FnOnce() -> Option<u64>>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> LeaseStep {
        let (Some(leases), Some(rls), true) = (&self.leases, self.rls(), self.leasing(global))
        else {
            return LeaseStep::None;
        };
        let Some(now) = clock.now() else {
            return LeaseStep::Ask(Identities::from_slice(keys));
        };
        let flight_ns = u64::from(rls.timeout_ms) * 2_000_000;
        let mut taken: SmallVec<[(u128, Taken); 2]> = SmallVec::new();
        let mut refill: SmallVec<[usize; 2]> = SmallVec::new();
        let mut conflicts = 0;
        let mut failed = 0;
        for (i, (&key, &(_, cost))) in keys.iter().zip(global).enumerate() {
            match leases.spend(store, key, cost, now, flight_ns) {
                Ok(spent) => {
                    conflicts += spent.conflicts;
                    let Some(t) = spent.taken else { break };
                    taken.push((key, t));
                    if spent.refill {
                        refill.push(i);
                    }
                }
                Err(_) => {
                    failed += 1;
                    break;
                }
            }
        }
        let decided = taken.len() == keys.len();
        if !decided {
            for (key, t) in &taken {
                match leases.give_back(store, *key, t, now) {
                    Ok(n) => conflicts += n,
                    Err(_) => failed += 1,
                }
            }
        }
        let mut rules: SmallVec<[usize; 2]> = SmallVec::new();
        for (a, _) in global {
            rules.push(a.rule);
        }
        record(
            Outcome::LeasesSpent {
                decided_rules: if decided { &rules } else { &[] },
                conflicts,
                failed,
                refill: decided && !refill.is_empty(),
            },
            tally,
        );
        if !decided {
            return LeaseStep::Ask(Identities::from_slice(keys));
        }
        let refill = self.refill(global, keys, &refill);
        LeaseStep::Decided(refill)
    }

    /// The check-only call refilling the leases of the descriptors at `indices` in
    /// `global` (lease keys `keys`, in the same order); `None` when none needs it.
    fn refill(
        &self,
        global: &[(&Applied, u32)],
        keys: &[u128],
        indices: &[usize],
    ) -> Option<Refill> {
        let (rls, calls) = (self.rls()?, self.calls.as_ref()?);
        if indices.is_empty() {
            return None;
        }
        let descriptors: Vec<rls::Descriptor<'_>> = indices
            .iter()
            .map(|&i| self.rls_descriptor(global[i].0, 0))
            .collect();
        let body = rls::encode_request(&rls.domain, &descriptors);
        Some(Refill {
            call: calls.with_quota(body, descriptors.len()),
            keys: indices.iter().map(|&i| keys[i]).collect(),
        })
    }

    /// Stores the grants of an answer (`grants`, one per descriptor asked, or empty) for
    /// the descriptors whose lease keys are `keys` (one per descriptor), at `now`, each
    /// cut to `rls.max_grant_requests` hits and `rls.max_grant_valid_ms` (counted).
    pub(super) fn store_grants(
        &self,
        keys: &[u128],
        grants: &[Option<Grant>],
        now: Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let (Some(leases), Some(now)) = (&self.leases, now) else {
            return;
        };
        let Some(rls) = self.rls().filter(|_| grants.len() == keys.len()) else {
            return;
        };
        let bounds = GrantBounds {
            max_requests: rls.max_grant_requests,
            max_valid_ns: u64::from(rls.max_grant_valid_ms).saturating_mul(1_000_000),
        };
        for (&key, grant) in keys.iter().zip(grants) {
            let Some(grant) = grant else { continue };
            let (sub, clamped) = bounds.clamp(grant.requests, grant.valid_until_ns, now);
            if clamped {
                record(Outcome::LeaseClamped, tally);
            }
            let stored: Option<Stored> = leases.store(store, key, sub, now).ok();
            record(Outcome::LeaseStored(stored), tally);
        }
    }

    /// What a background refill brought back (`keys`: the lease keys of its
    /// descriptors, in order): its grants are stored; a failure is counted as a call's
    /// failure, and leaves the flight marker until its deadline.
    pub fn refilled(
        &self,
        keys: &[u128],
        answer: Answer,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let shadows = vec![false; keys.len()];
        match rls::interpret(&answer, &shadows) {
            Ok(decided) => {
                if decided.grants.iter().any(Option::is_some) {
                    self.store_grants(keys, &decided.grants, now_ns(), store, tally);
                }
            }
            Err(failure) => record(Outcome::RlsFailed(failure), tally),
        }
    }
}
