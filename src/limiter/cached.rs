//! The over-limit cache step (see [`crate::shared::over_limit`]): before a call, a request whose
//! whole set of global descriptors is a remembered denial for its costs is rejected from
//! the cache; after a call the service answered OVER_LIMIT, the set is remembered.
//!
//! The set is every global rule that applies (shadow ones included: they are sent, and
//! the service decides the request from all it is sent), so a denial never rejects a
//! request with other descriptors, which the service may well admit (`replaces`,
//! `quota_mode`). Looking up is one shared-data read per request, whatever the number of
//! global rules. The reply carries the standing of every enforced descriptor the service
//! said was over (so `retry-after` is the longest wait among them, as in the service's
//! own answer), and the body and headers the service sent with the denial. A request
//! whose global rules are all shadow rules is never looked up: it cannot be rejected;
//! nor is one with only global rules that its quota leases pay for (they are spent
//! first, see `check`: tokens the service counted admit it whatever the cache says).

use super::ask::admission_hits;
use super::record::{record, Outcome};
use super::{client_protocol, Clock, Limiter};
use crate::metrics::Tally;
use crate::reply::{self, Reply, Standing};
use crate::request::descriptor::{Applied, RequestView};
use crate::shared::over_limit::{Costs, Denial, Over, Overs};
use crate::shared::SharedData;
use crate::wire::rls::Decided;

/// A request's global descriptors, as the cache knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CacheKey {
    /// The set's identity in the cache.
    pub fingerprint: u128,
    /// The hits asked for each descriptor, in descriptor order (inline for two: no
    /// allocation per request for most sets).
    pub costs: Costs,
}

/// What looking the request up found.
pub(super) struct Lookup {
    /// The request's set (`None` when the cache is off or nothing could reject it).
    pub key: Option<CacheKey>,
    /// The reply, when a remembered denial rejects the request.
    pub reply: Option<Reply>,
    /// The rules of the over descriptors of that denial, for [`Outcome::CacheLookedUp`].
    pub rejected_by: Vec<usize>,
    /// Look-ups that failed in shared data (0 or 1).
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
    /// Looks the set of the request's global rules (`global`, with their costs; their
    /// descriptors' identities `identities`) up (one shared-data read).
    pub(super) fn look_up_denials(
        &self,
        global: &[(&Applied, u32)],
        identities: &[u128],
        clock: &mut Clock<impl FnOnce() -> Option<u64>>,
        store: &impl SharedData,
        request: &mut impl RequestView,
    ) -> Lookup {
        let mut lookup = Lookup {
            key: None,
            reply: None,
            rejected_by: Vec::new(),
            failed: 0,
        };
        let (Some(cache), Some(rls)) = (&self.over_limit, self.rls()) else {
            return lookup;
        };
        // A fleet-wide concurrency rule's denial is never remembered (a slot frees when
        // some stream ends, not at a reset), and a request it applies to must call to take
        // its slots: no look-up, and no key, so nothing is remembered of its answer.
        if self.holds_fleet_wide(global) {
            return lookup;
        }
        if global.iter().all(|(a, _)| self.config.rules[a.rule].shadow) {
            return lookup;
        }
        // The hits each is asked for, in descriptor order (pushed in a loop: a collect
        // through `SmallVec::extend` counted more).
        let mut costs = Costs::new();
        for &(a, cost) in global {
            costs.push(admission_hits(&self.config.rules[a.rule], cost));
        }
        let key = CacheKey {
            fingerprint: match identities {
                // A set of one is its descriptor's identity: no hash at all.
                [identity] => *identity,
                _ => {
                    let prefixes = self.prefixes();
                    match prefixes.denial() {
                        Some(prefix) => prefix.denial(identities),
                        None => prefixes.key.denial(&rls.domain, identities),
                    }
                }
            },
            costs,
        };
        // The clock is read only if an entry is found (without one, the call decides).
        let found = cache.lookup(store, key.fingerprint, &key.costs, || clock.now());
        lookup.key = Some(key);
        let denial = match found {
            Ok(Some(denial)) => denial,
            Ok(None) => return lookup,
            Err(_) => {
                lookup.failed = 1;
                return lookup;
            }
        };
        // The reading the look-up found the entry live at (the clock is read once).
        let Some(now) = clock.now() else {
            return lookup;
        };
        let rule_at = |position: u8| global.get(usize::from(position)).map(|(a, _)| a.rule);
        let standings: Vec<Standing> = denial.standings(rule_at, now);
        lookup.rejected_by = standings.iter().map(|s| s.rule).collect();
        let body = (!denial.body.is_empty()).then_some(denial.body.as_slice());
        lookup.reply = Some(reply::rejection(
            &self.config.response,
            &self.config.rules,
            &standings,
            body,
            denial.reply_headers(),
            client_protocol(request),
            now,
        ));
        lookup
    }

    /// Remembers the denial in `decided` (an OVER_LIMIT answer; `shadows` one per
    /// descriptor) for the request's set `key`, if it can be: the service said of every
    /// descriptor over until when (`duration_until_reset` > 0), and the body and headers
    /// fit an entry. It is trusted until the earliest of those resets, shadow rules'
    /// included (any one of them may be what the service's answer rests on), and no
    /// longer than `rls.over_limit_cache_max_seconds`.
    pub(super) fn remember_denial(
        &self,
        key: &CacheKey,
        shadows: &[bool],
        decided: &Decided,
        now: u64,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let (Some(cache), Some(rls)) = (&self.over_limit, self.rls()) else {
            return;
        };
        if decided.standings.len() != key.costs.len() {
            // The service did not say which descriptors are over, nor until when.
            return;
        }
        let mut earliest = u64::MAX;
        let mut over = Overs::new();
        for (position, (standing, &shadow)) in decided.standings.iter().zip(shadows).enumerate() {
            if standing.allowed {
                continue;
            }
            let Some(wait) = standing.reset_ns.filter(|&ns| ns > 0) else {
                return;
            };
            earliest = earliest.min(wait);
            if !shadow {
                over.push(Over {
                    // At most 64 rules: a position fits.
                    position: u8::try_from(position).unwrap_or(u8::MAX),
                    limit: standing.limit,
                    reset_at_ns: now.saturating_add(wait),
                });
            }
        }
        if over.is_empty() {
            return;
        }
        // Trusted no longer than the cap, whatever the service said: a service restarted
        // with empty memory (or reconfigured) is asked again within it. The reply still
        // counts down to the service's own reset.
        let cap = u64::from(rls.over_limit_cache_max_seconds).saturating_mul(1_000_000_000);
        let denial = Denial {
            fingerprint: key.fingerprint,
            until_ns: now.saturating_add(earliest.min(cap)),
            costs: Costs::from_slice(&key.costs),
            over,
            body: decided.raw_body.clone(),
            headers: decided
                .response_headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        if !denial.fits() {
            record(Outcome::CacheTooLarge, tally);
            return;
        }
        let stored = cache.store(store, denial, now);
        record(Outcome::CacheStored(stored.as_ref().ok().copied()), tally);
    }
}
