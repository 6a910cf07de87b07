//! The global step: one `ShouldRateLimit` request for every global rule that applies,
//! and the fallback buckets to use if the service cannot answer.

use super::{Limiter, Pending};
use crate::config::Limit;
use crate::descriptor::{self, Applied};
use crate::local::Take;
use crate::rls;

impl Limiter {
    /// The encoded request for the global rules among `applied` (`costs` in the same
    /// order), noting in `pending` which rules were asked about and their fallbacks.
    /// `None` when no global rule applies.
    pub(super) fn global_request(
        &self,
        applied: &[Applied],
        costs: &[u32],
        pending: &mut Pending,
    ) -> Option<Vec<u8>> {
        let global: Vec<(&Applied, u32)> = applied
            .iter()
            .zip(costs.iter().copied())
            .filter(|(a, _)| matches!(self.config.rules[a.rule].limit, Limit::Global { .. }))
            .collect();
        let rls = self.rls().filter(|_| !global.is_empty())?;
        let descriptors: Vec<rls::Descriptor<'_>> = global
            .iter()
            .map(|&(a, cost)| self.rls_descriptor(a, cost))
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
                let fingerprint = descriptor::fallback_fingerprint(&rule.name, quota, &a.values);
                Some((
                    a.rule,
                    Take {
                        fingerprint,
                        quota,
                        shadow: rule.shadow,
                        cost,
                    },
                ))
            })
            .collect();
        Some(rls::encode_request(&rls.domain, &descriptors))
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
