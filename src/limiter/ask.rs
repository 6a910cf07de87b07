//! The global step: one `ShouldRateLimit` request for every global and fleet-wide
//! concurrency rule that applies, the fallback buckets to use if the service cannot
//! answer, and, for concurrency rules, the hold the call takes and its release.

use super::{Limiter, Pending};
use crate::config::{Limit, Rule};
use crate::request::descriptor::Applied;
use crate::shared::local::Take;
use crate::wire::call::{Call, CallHeaders};
use crate::wire::rls;
use smallvec::SmallVec;

impl Limiter {
    /// The call for the request's global and fleet-wide concurrency rules (`global`, with
    /// their costs), noting in `pending` which rules were asked about and their fallbacks;
    /// it asks for quota for the descriptors `pending` holds lease keys of. When a
    /// fleet-wide concurrency rule applies, the call takes a hold under a fresh id and
    /// comes with that hold's release. `None` when no such rule applies.
    pub(super) fn global_request(
        &self,
        global: &[(&Applied, u32)],
        pending: &mut Pending,
    ) -> Option<(Call, Option<Box<Call>>)> {
        let rls = self.rls().filter(|_| !global.is_empty())?;
        let calls = self.calls.as_ref()?;
        // Inline for two: most requests ask about one or two rules. (Pushed in a loop: a
        // collect through `SmallVec::extend` counted more.)
        let mut descriptors: SmallVec<[rls::Descriptor<'_>; 2]> = SmallVec::new();
        for &(a, cost) in global {
            descriptors
                .push(self.rls_descriptor(a, admission_hits(&self.config.rules[a.rule], cost)));
        }
        pending.rules = global.iter().map(|(a, _)| a.rule).collect();
        // Pushed in a loop, and only for a rule with a fallback: most have none, and the
        // list then stays empty and unallocated.
        for &(a, cost) in global {
            let rule = &self.config.rules[a.rule];
            let Limit::Global {
                fallback: Some(quota),
                ..
            } = rule.limit
            else {
                continue;
            };
            let prefixes = self.prefixes();
            let fingerprint = prefixes.fallback(a.rule).map_or_else(
                || prefixes.key.fallback(&rule.name, quota, &a.values),
                |prefix| prefix.values(&a.values),
            );
            pending.fallbacks.push((
                a.rule,
                Take {
                    fingerprint,
                    quota,
                    shadow: rule.shadow,
                    // A response cost's fallback bucket takes the estimate, as a local
                    // rule's bucket does.
                    cost: rule.response_cost.as_ref().map_or(cost, |r| r.estimate),
                },
            ));
        }
        let body = rls::encode_request(&rls.domain, &descriptors);
        // Only a configuration with a fleet-wide concurrency rule looks for one.
        if let Some(hold) = self.hold_rules.then(|| self.hold(global)).flatten() {
            return Some(hold.calls(calls, body, &rls.domain));
        }
        Some((calls.with_quota(body, pending.lease_keys.len()), None))
    }

    /// The hold a call for `global` (the rules asked about, with their hits) takes: a fresh
    /// id and the fleet-wide concurrency descriptors it holds on. `None` when no such rule
    /// is among them (the call takes no hold), or no id can be minted (no nonce: the
    /// service holds under an id of its own).
    fn hold<'a>(&'a self, global: &[(&'a Applied, u32)]) -> Option<Hold<'a>> {
        let descriptors: SmallVec<[rls::Descriptor<'a>; 2]> = global
            .iter()
            .filter(|(a, _)| self.config.rules[a.rule].limit == Limit::GlobalConcurrency)
            .map(|&(a, cost)| self.rls_descriptor(a, cost))
            .collect();
        if descriptors.is_empty() {
            return None;
        }
        Some(Hold {
            id: self.hold_ids.as_ref()?.mint(),
            descriptors,
        })
    }

    /// A global rule's descriptor as sent, with `cost` (0: check only). Its values were
    /// checked UTF-8 by `descriptor::applicable` (a global rule's value that is not
    /// refuses the request), so they are sent as they are.
    pub(super) fn rls_descriptor<'a>(&'a self, a: &'a Applied, cost: u32) -> rls::Descriptor<'a> {
        rls::Descriptor {
            keys: &self.config.rules[a.rule].entries,
            values: &a.values,
            cost,
        }
    }
}

/// A call's hold: its id, and the concurrency descriptors it takes slots on (what the
/// release names again).
struct Hold<'a> {
    id: String,
    descriptors: SmallVec<[rls::Descriptor<'a>; 2]>,
}

impl Hold<'_> {
    /// The call of `body` taking this hold, and the call releasing it. Concurrency
    /// descriptors are never leased (a request with one asks for no quota, see `leased`),
    /// so the hold call carries no quota header.
    fn calls(&self, calls: &CallHeaders, body: Vec<u8>, domain: &str) -> (Call, Option<Box<Call>>) {
        let release = calls.release(rls::encode_request(domain, &self.descriptors), &self.id);
        (calls.hold(body, &self.id), Some(Box::new(release)))
    }
}

/// The hits a global rule's descriptor is sent with at request time: the request's cost,
/// or, for a rule whose cost the response reports, what admission takes: its estimate
/// when that is more than 1 (counted now; the stream-end charge adds only what the real
/// cost exceeds it by), else 0, check-only: admitted while one hit fits, nothing counted,
/// the whole cost charged at stream end.
pub(super) fn admission_hits(rule: &Rule, cost: u32) -> u32 {
    match &rule.response_cost {
        None => cost,
        Some(r) if r.estimate > 1 => r.estimate,
        Some(_) => 0,
    }
}
