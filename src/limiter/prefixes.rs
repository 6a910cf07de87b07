//! Each rule's fingerprint prefixes, hashed once per configuration and key: a request
//! hashes only its own descriptor values (see [`crate::shared::placement::Prefix`]).
//! Built from the limiter's own configuration, so every rule index has its entry; a
//! caller that finds none (a rule of another kind) hashes the whole input instead.

use crate::config::{Config, Limit, Rule};
use crate::request::descriptor::Applied;
use crate::shared::placement::{PlacementKey, Prefix};
use smallvec::SmallVec;

/// The identities of a request's global descriptors ([`PlacementKey::lease`]), one per
/// global rule, in descriptor order (inline for two).
pub(super) type Identities = SmallVec<[u128; 2]>;

/// The key and, per rule, what its fingerprints start with.
#[derive(Debug, Clone)]
pub(super) struct Prefixes {
    /// The key they were hashed under.
    pub key: PlacementKey,
    /// By rule index.
    rules: Vec<RulePrefixes>,
    /// The over-limit cache's sets, under the service's domain.
    denial: Option<Prefix>,
}

/// One rule's prefixes, for the entries it can have.
#[derive(Debug, Clone, Copy, Default)]
struct RulePrefixes {
    /// Its local bucket.
    bucket: Option<Prefix>,
    /// Its fallback bucket.
    fallback: Option<Prefix>,
    /// Its lease.
    lease: Option<Prefix>,
    /// Its concurrency keys.
    concurrency: Option<Prefix>,
}

impl Prefixes {
    /// The prefixes of every rule of `config` under `key`.
    pub fn new(config: &Config, key: PlacementKey) -> Prefixes {
        let domain = config.rls.as_ref().map(|rls| rls.domain.as_str());
        let rules = config
            .rules
            .iter()
            .map(|rule| match rule.limit {
                Limit::Local(quota) => RulePrefixes {
                    bucket: Some(key.bucket_prefix(&rule.name, quota)),
                    ..RulePrefixes::default()
                },
                Limit::Global { fallback, .. } => RulePrefixes {
                    bucket: None,
                    fallback: fallback.map(|quota| key.fallback_prefix(&rule.name, quota)),
                    lease: domain.map(|domain| key.lease_prefix(domain, &rule.name)),
                    concurrency: None,
                },
                Limit::Concurrency(limit) => RulePrefixes {
                    concurrency: Some(key.concurrency_prefix(&rule.name, limit)),
                    ..RulePrefixes::default()
                },
                // Nothing in this Envoy's shared data: the service keeps its holds.
                Limit::GlobalConcurrency => RulePrefixes::default(),
            })
            .collect();
        Prefixes {
            key,
            rules,
            denial: domain.map(|domain| key.denial_prefix(domain)),
        }
    }

    /// The prefix of rule `rule`'s local bucket (`None`: not a local rule).
    pub fn bucket(&self, rule: usize) -> Option<&Prefix> {
        self.rules.get(rule)?.bucket.as_ref()
    }

    /// The prefix of rule `rule`'s fallback bucket (`None`: it has none).
    pub fn fallback(&self, rule: usize) -> Option<&Prefix> {
        self.rules.get(rule)?.fallback.as_ref()
    }

    /// The prefix of rule `rule`'s lease (`None`: not a global rule).
    pub fn lease(&self, rule: usize) -> Option<&Prefix> {
        self.rules.get(rule)?.lease.as_ref()
    }

    /// The prefix of rule `rule`'s concurrency keys (`None`: not a concurrency rule).
    pub fn concurrency(&self, rule: usize) -> Option<&Prefix> {
        self.rules.get(rule)?.concurrency.as_ref()
    }

    /// The identity of each of `global`'s descriptors (rules of `rules`, under the
    /// service's `domain`): hashed once per request, for both the lease table and the
    /// over-limit cache.
    pub fn identities(
        &self,
        rules: &[Rule],
        domain: &str,
        global: &[(&Applied, u32)],
    ) -> Identities {
        // Pushed in a loop: a collect through `SmallVec::extend` counted more.
        let mut identities = Identities::new();
        for (a, _) in global {
            identities.push(match self.lease(a.rule) {
                Some(prefix) => prefix.values(&a.values),
                None => self.key.lease(domain, &rules[a.rule].name, &a.values),
            });
        }
        identities
    }

    /// The prefix of the over-limit cache's sets (`None`: no service).
    pub fn denial(&self) -> Option<&Prefix> {
        self.denial.as_ref()
    }
}
