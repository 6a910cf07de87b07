//! The global step: one `ShouldRateLimit` request for every global rule that applies,
//! and the fallback buckets to use if the service cannot answer.

use super::{Limiter, Pending};
use crate::config::{Limit, Rule};
use crate::request::descriptor::Applied;
use crate::shared::local::Take;
use crate::wire::call::Call;
use crate::wire::rls;

impl Limiter {
    /// The call for the request's global rules (`global`, with their costs), noting in
    /// `pending` which rules were asked about and their fallbacks; it asks for quota for
    /// the descriptors `pending` holds lease keys of. `None` when no global rule applies.
    pub(super) fn global_request(
        &self,
        global: &[(&Applied, u32)],
        pending: &mut Pending,
    ) -> Option<Call> {
        let rls = self.rls().filter(|_| !global.is_empty())?;
        let calls = self.calls.as_ref()?;
        let descriptors: Vec<rls::Descriptor<'_>> = global
            .iter()
            .map(|&(a, cost)| {
                self.rls_descriptor(a, admission_hits(&self.config.rules[a.rule], cost))
            })
            .collect();
        pending.rules = global.iter().map(|(a, _)| a.rule).collect();
        pending.fallbacks = global
            .iter()
            .filter_map(|&(a, cost)| {
                let rule = &self.config.rules[a.rule];
                let Limit::Global {
                    fallback: Some(quota),
                    ..
                } = rule.limit
                else {
                    return None;
                };
                let prefixes = self.prefixes();
                let fingerprint = prefixes.fallback(a.rule).map_or_else(
                    || prefixes.key.fallback(&rule.name, quota, &a.values),
                    |prefix| prefix.values(&a.values),
                );
                Some((
                    a.rule,
                    Take {
                        fingerprint,
                        quota,
                        shadow: rule.shadow,
                        // A response cost's fallback bucket takes the estimate, as a
                        // local rule's bucket does.
                        cost: rule.response_cost.as_ref().map_or(cost, |r| r.estimate),
                    },
                ))
            })
            .collect();
        let body = rls::encode_request(&rls.domain, &descriptors);
        Some(calls.with_quota(body, pending.lease_keys.len()))
    }

    /// A global rule's descriptor as sent, with `cost` (0: check only).
    pub(super) fn rls_descriptor<'a>(&'a self, a: &'a Applied, cost: u32) -> rls::Descriptor<'a> {
        rls::Descriptor {
            entries: self.config.rules[a.rule]
                .entries
                .iter()
                .map(|e| e.key.as_str())
                // UTF-8 already checked for global rules by `descriptor::applicable`.
                .zip(
                    a.values
                        .iter()
                        .map(|v| std::str::from_utf8(v).unwrap_or("")),
                )
                .collect(),
            cost,
        }
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
