//! Per-domain counters: each configured domain's handles on `floodgate_decisions_total`,
//! `floodgate_near_limit_total`, `floodgate_quota_granted_hits_total` and its per-limit
//! series, created when the domain is configured so that counting is an atomic increment.

use super::limits;
use super::outcome::{Outcome, OUTCOMES};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// `floodgate_decisions_total`'s label set: the domain, then the result.
type DecisionLabels = [(&'static str, String); 2];

/// The label set of a per-domain series (`floodgate_near_limit_total`,
/// `floodgate_quota_granted_hits_total`): the domain.
type DomainLabels = [(&'static str, String); 1];

/// The per-domain families, from which each domain's handles are made.
#[derive(Debug, Clone, Default)]
pub(super) struct DomainFamilies {
    pub(super) decisions: Family<DecisionLabels, Counter>,
    pub(super) near_limit: Family<DomainLabels, Counter>,
    pub(super) granted: Family<DomainLabels, Counter>,
    pub(super) holds: Family<DecisionLabels, Counter>,
}

/// What happened to a concurrency descriptor, for `floodgate_holds_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEvent {
    /// Admitted with its call: a hold taken (or kept, for an id already holding).
    Acquired = 0,
    /// Over its limit: no hold.
    Rejected = 1,
    /// In a release call (whether the id held anything or not: releases are idempotent).
    Released = 2,
}

/// The `event` label of each [`HoldEvent`], in order.
const HOLD_EVENTS: [&str; 3] = ["acquired", "rejected", "released"];

/// Per-domain counters: decisions indexed like [`OUTCOMES`], near-limit decisions, hits
/// granted, and the domain's per-limit series. Handles on the series of one domain, so
/// counting is an atomic increment.
#[derive(Debug)]
pub struct DomainCounters {
    decisions: [Counter; 4],
    near_limit: Counter,
    granted: Counter,
    holds: [Counter; 3],
    limits: limits::DomainLimits,
}

impl DomainCounters {
    /// The series of `domain` in `families` and `limit_family`, created now.
    pub(super) fn new(
        families: &DomainFamilies,
        limit_family: &Arc<limits::LimitFamily>,
        domain: &str,
    ) -> Self {
        DomainCounters {
            decisions: OUTCOMES.map(|(_, result)| {
                families.decisions.get_or_create_owned(&[
                    ("domain", domain.to_owned()),
                    ("result", result.into()),
                ])
            }),
            near_limit: families
                .near_limit
                .get_or_create_owned(&[("domain", domain.to_owned())]),
            granted: families
                .granted
                .get_or_create_owned(&[("domain", domain.to_owned())]),
            holds: HOLD_EVENTS.map(|event| {
                families
                    .holds
                    .get_or_create_owned(&[("domain", domain.to_owned()), ("event", event.into())])
            }),
            limits: limits::DomainLimits::new(limit_family.clone(), domain),
        }
    }

    /// Counts one concurrency descriptor's `event`.
    pub fn hold(&self, event: HoldEvent) {
        self.holds[event as usize].inc();
    }

    /// Counts one descriptor decision.
    pub fn record(&self, outcome: Outcome) {
        self.decisions[outcome as usize].inc();
    }

    /// Counts one OK decision above the near-limit ratio (also counted by `record`).
    pub fn near_limit(&self) {
        self.near_limit.inc();
    }

    /// Counts hits granted as a quota lease (in an answer actually sent).
    pub fn granted(&self, hits: u32) {
        self.granted.inc_by(u64::from(hits));
    }

    /// Counts one decision of the limit whose configured path is `path`, in its own series
    /// (bounded, see [`limits`]).
    pub fn record_limit(&self, path: &Arc<str>, outcome: Outcome) {
        self.limits.record(path, outcome);
    }

    /// Creates the series of the limit at `path` now (within the bound).
    pub(super) fn register_limit(&self, path: &Arc<str>) {
        self.limits.register(path);
    }
}

/// Registers the per-domain and per-limit decision families.
pub(super) fn register_decisions(
    registry: &mut Registry,
    families: &DomainFamilies,
    limit_family: &limits::LimitFamily,
) {
    registry.register(
        "floodgate_decisions",
        "Request descriptors decided, by domain and result (shadow_over_limit: over a shadow-mode limit, answered OK)",
        families.decisions.clone(),
    );
    registry.register(
        "floodgate_near_limit",
        "Descriptor decisions answered OK that leave more than --near-limit-ratio of the limit used",
        families.near_limit.clone(),
    );
    registry.register(
        "floodgate_quota_granted_hits",
        "Hits granted to callers as quota leases, by domain (taken from the limit with the admission)",
        families.granted.clone(),
    );
    registry.register(
        "floodgate_holds",
        "Concurrency descriptors by domain and event: acquired (admitted, holding), rejected (over), released",
        families.holds.clone(),
    );
    registry.register(
        "floodgate_limit_decisions",
        "Request descriptors decided per configured limit (only limits with detailed_metric or value_to_metric), by result",
        limit_family.family.clone(),
    );
}
