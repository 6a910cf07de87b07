//! The over-limit cache step (see [`crate::over_limit`]): before a call, a request whose
//! enforced global descriptor is a remembered denial for its cost is rejected from the
//! cache; after a call, the descriptors the service denied are remembered.
//!
//! One remembered descriptor is enough to reject: the service would deny the request
//! whatever its other descriptors say. The reply carries every remembered descriptor's
//! standing (so `retry-after` is the longest wait among them, as in the service's own
//! answer), and the body and headers the service sent with the denial. Shadow rules are
//! never looked up nor remembered: they do not reject.

use super::record::{record, Outcome};
use super::{client_protocol, Clock, Limiter};
use crate::config::Limit;
use crate::descriptor::{Applied, RequestView};
use crate::metrics::Tally;
use crate::over_limit::Denial;
use crate::response::{self, Reply, Standing};
use crate::rls::Decided;
use crate::shared::SharedData;

/// A global rule asked about, as the cache knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheKey {
    /// The descriptor's identity in the cache.
    pub fingerprint: u128,
    /// The request's cost for it.
    pub cost: u32,
}

/// What looking the request's descriptors up found.
pub(super) struct Lookup {
    /// One key per global rule applied, in descriptor order (empty when the cache is off).
    pub keys: Vec<CacheKey>,
    /// The reply, when a remembered denial rejects the request.
    pub reply: Option<Reply>,
    /// The rules whose remembered denial rejects it, for [`Outcome::CacheLookedUp`].
    pub rejected_by: Vec<usize>,
    /// Look-ups that failed in shared data.
    pub failed: u32,
}

impl Lookup {
    /// Counts the look-up: rejected by the rules found (`rejected`), or not (the request
    /// was let through from its quota leases, or nothing was found).
    pub fn record(&self, rejected: bool, tally: &mut Tally) {
        let rejected_by = if rejected { &self.rejected_by[..] } else { &[] };
        let failed = self.failed;
        record(
            Outcome::CacheLookedUp {
                failed,
                rejected_by,
            },
            tally,
        );
    }
}

impl Limiter {
    /// Looks up the enforced global rules among `applied` (one shared-data read each).
    pub(super) fn look_up_denials(
        &self,
        applied: &[Applied],
        costs: &[u32],
        clock: &mut Clock<impl FnOnce() -> Option<u64>>,
        store: &impl SharedData,
        request: &mut impl RequestView,
    ) -> Lookup {
        let none = Lookup {
            keys: Vec::new(),
            reply: None,
            rejected_by: Vec::new(),
            failed: 0,
        };
        let (Some(cache), Some(rls)) = (&self.over_limit, self.rls()) else {
            return none;
        };
        // (rule, key, shadow) for each global rule, in descriptor order.
        let global: Vec<(usize, CacheKey, bool)> = applied
            .iter()
            .zip(costs)
            .filter_map(|(a, &cost)| {
                let rule = &self.config.rules[a.rule];
                matches!(rule.limit, Limit::Global { .. }).then(|| {
                    let one = std::iter::once((rule.name.as_str(), &a.values[..]));
                    let fingerprint = self.placement().denial(&rls.domain, one);
                    (a.rule, CacheKey { fingerprint, cost }, rule.shadow)
                })
            })
            .collect();
        let keys = || global.iter().map(|&(_, key, _)| key).collect();
        if global.iter().all(|&(_, _, shadow)| shadow) {
            return none;
        }
        let Some(now) = clock.now() else {
            // No clock: nothing to compare with; the call decides.
            return Lookup {
                keys: keys(),
                ..none
            };
        };
        // (rule, denial) for each enforced rule remembered as over for this cost.
        let mut found: Vec<(usize, Denial)> = Vec::new();
        let mut failed = 0;
        for &(rule, key, _) in global.iter().filter(|&&(_, _, shadow)| !shadow) {
            match cache.lookup(store, key.fingerprint, key.cost, now) {
                Ok(Some(denial)) => found.push((rule, denial)),
                Ok(None) => {}
                Err(_) => failed += 1,
            }
        }
        let rejected_by: Vec<usize> = found.iter().map(|&(rule, _)| rule).collect();
        let keys = keys();
        let Some((_, first)) = found.first() else {
            return Lookup {
                keys,
                failed,
                ..none
            };
        };
        let standings: Vec<Standing> = found
            .iter()
            .map(|(rule, d)| d.standing(*rule, now))
            .collect();
        let body = (!first.body.is_empty()).then_some(first.body.as_slice());
        let reply = response::rejection(
            &self.config.response,
            &self.config.rules,
            &standings,
            body,
            first.reply_headers(),
            client_protocol(request),
        );
        Lookup {
            keys,
            reply: Some(reply),
            rejected_by,
            failed,
        }
    }

    /// Remembers the descriptors the service denied in `decided` (`keys` and `shadows`
    /// one per descriptor), if every enforced one it denied can be: it said until when
    /// (`duration_until_reset` > 0), and the body and headers fit an entry.
    pub(super) fn remember_denials(
        &self,
        keys: &[CacheKey],
        shadows: &[bool],
        decided: &Decided,
        now: u64,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let Some(cache) = &self.over_limit else {
            return;
        };
        if keys.is_empty() || decided.standings.len() != keys.len() {
            // The service did not say which descriptors are over, nor until when.
            return;
        }
        let headers: Vec<(String, String)> = decided
            .response_headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let mut denials = Vec::new();
        for ((key, standing), &shadow) in keys.iter().zip(&decided.standings).zip(shadows) {
            if standing.allowed || shadow {
                continue;
            }
            let Some(wait) = standing.reset_ns.filter(|&ns| ns > 0) else {
                return;
            };
            denials.push(Denial {
                fingerprint: key.fingerprint,
                until_ns: now.saturating_add(wait),
                min_cost: key.cost,
                limit: standing.limit,
                body: decided.raw_body.clone(),
                headers: headers.clone(),
            });
        }
        if denials.iter().any(|d| !d.fits()) {
            record(Outcome::CacheTooLarge, tally);
            return;
        }
        for denial in denials {
            let stored = cache.store(store, denial, now);
            record(Outcome::CacheStored(stored.as_ref().ok().copied()), tally);
        }
    }
}
