//! The filter's metrics: their names, and a tally that batches updates.
//!
//! Every proxy-wasm metric update is a host call costing microseconds, so requests only
//! add to a [`Tally`] kept in the worker's memory; the root context flushes it to Envoy
//! once per tick (one second). Counters therefore lag by up to a second.
//!
//! Names become Envoy stats `wasmcustom.floodgate.*` and Prometheus series `floodgate_*`.
//! Per-rule series embed the rule name (`floodgate.rule.<name>.allowed`), never a
//! descriptor value, so their number is fixed by the configuration; the examples'
//! Envoy configurations extract the name into a `rule` tag.

use crate::config::{Limit, Rule};
pub use concurrency::PerConcurrency;
use concurrency::PER_CONCURRENCY;

/// Metric kinds, as proxy-wasm defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// Filter-wide metrics, in index order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Global {
    /// Requests some rule applied to that went on.
    Allowed,
    /// Requests rejected by a rule.
    Denied,
    /// Requests a shadow rule would have rejected.
    ShadowDenied,
    /// Requests let through because the limiter failed (`failure_mode: allow`).
    FailureModeAllowed,
    /// Requests rejected because the limiter failed (`failure_mode: deny`).
    FailureModeDenied,
    /// Requests the host clock could not be read for.
    ErrorClock,
    /// Shared-data host calls that failed.
    ErrorSharedData,
    /// Requests that gave up after too many compare-and-swap conflicts on one bucket.
    ErrorContention,
    /// Compare-and-swap conflicts (each one a read and decide again).
    CasConflicts,
    /// Buckets evicted while still refilling because their probe window was full.
    BucketEvictions,
    /// Requests refused because their cost header was not a whole number ≥ 1.
    InvalidCost,
    /// Rate limit service answers that let the request through.
    RlsOk,
    /// Rate limit service answers that rejected the request.
    RlsOverLimit,
    /// Calls that could not be started (e.g. the cluster does not exist).
    RlsErrorNotSent,
    /// Calls that got no answer within `rls.timeout_ms`.
    RlsErrorTimeout,
    /// Calls that failed with gRPC UNAVAILABLE (no healthy host, refused, reset).
    RlsErrorUnavailable,
    /// Calls that failed with another gRPC status.
    RlsErrorStatus,
    /// Answers with the overall code UNKNOWN.
    RlsErrorUnknownCode,
    /// Answers that could not be decoded.
    RlsErrorBadResponse,
    /// Requests the service could not decide that their global rules' fallback buckets
    /// let through.
    FallbackAllowed,
    /// Requests the service could not decide that a fallback bucket rejected.
    FallbackDenied,
    /// Gauge: slots of the bucket table in use (at most the largest `max_buckets` configured
    /// since Envoy started: slot keys outlive a smaller table).
    Buckets,
    /// Requests refused because a cost or descriptor header was sent more than once.
    DuplicateHeader,
    /// Requests refused because a descriptor value was too long (or, for a global rule,
    /// not UTF-8).
    InvalidDescriptor,
    /// Headers from the rate limit service dropped as unsafe to add.
    RlsDroppedHeaders,
    /// Requests the limiter could not decide because this thread's tally was in use.
    HostErrorTallyBusy,
    /// Service answers whose request's context could not be made current.
    HostErrorContext,
    /// Paused requests that could not be resumed.
    HostErrorResume,
    /// Local replies (rejections, refusals) that could not be sent.
    HostErrorLocalReply,
    /// Calls made to the rate limit service.
    RlsCalls,
    /// Requests rejected from the over-limit cache, with no call.
    OverLimitCached,
    /// Live over-limit cache entries evicted because their set was full.
    OverLimitCacheEvictions,
    /// Denials not cached because the service's body and headers do not fit an entry.
    OverLimitCacheTooLarge,
    /// Requests decided from quota leases, with no call.
    LeaseAllowed,
    /// Quota leases the service granted (one per descriptor granted).
    LeaseGrants,
    /// Background calls started to refill a lease below its low-water mark (also
    /// counted in `RlsCalls`).
    LeaseRefills,
    /// Live leases evicted because their set was full (their tokens are lost).
    LeaseEvictions,
    /// Grants cut to `rls.max_grant_requests` hits or `rls.max_grant_valid_ms`.
    LeaseGrantsClamped,
    /// Responses charged the cost they reported (a rule with a response cost).
    UsageReported,
    /// Tokens charged for responses, reported or fallback.
    UsageTokens,
    /// Complete, readable responses (not event streams) that reported no usage: charged
    /// the fallback.
    UsageFallbackAbsent,
    /// Complete event streams none of whose events reported a usage (an OpenAI client
    /// that left out `stream_options.include_usage`): charged the fallback.
    UsageFallbackStreamAbsent,
    /// Responses whose body is not JSON or whose usage header is not a whole number:
    /// charged the fallback.
    UsageFallbackUnreadable,
    /// Responses compressed by the upstream although the filter asked for `identity`:
    /// charged the fallback.
    UsageFallbackEncoded,
    /// Requests that went away before their response reported a usage: charged the
    /// fallback.
    UsageFallbackCutOff,
    /// Responses that reported more than their rule's `max`: charged `max`.
    UsageClamped,
    /// Charges that would have put a local bucket more than one burst into debt: the
    /// debt stops at one burst.
    UsageDebtCapped,
    /// Stream-end charges sent to the rate limit service (a response cost, global rules).
    RlsCharges,
    /// Stream-end charges that could not be sent or that the service answered with an
    /// error: counted here only, never sent again.
    RlsChargeFailed,
    /// Releases of fleet-wide concurrency holds sent to the rate limit service when a
    /// stream ended.
    RlsReleases,
    /// Releases that could not be sent or that the service answered with an error: the
    /// hold comes back at its deadline on the service instead (never sent again).
    RlsReleaseFailed,
    /// Requests a concurrency rule could not decide because every slot of its key's
    /// window holds requests in flight of other keys (then `failure_mode` decides).
    ConcurrencyTableFull,
}

impl Global {
    /// Every global metric, in index order.
    pub const ALL: [Global; 52] = [
        Global::Allowed,
        Global::Denied,
        Global::ShadowDenied,
        Global::FailureModeAllowed,
        Global::FailureModeDenied,
        Global::ErrorClock,
        Global::ErrorSharedData,
        Global::ErrorContention,
        Global::CasConflicts,
        Global::BucketEvictions,
        Global::InvalidCost,
        Global::RlsOk,
        Global::RlsOverLimit,
        Global::RlsErrorNotSent,
        Global::RlsErrorTimeout,
        Global::RlsErrorUnavailable,
        Global::RlsErrorStatus,
        Global::RlsErrorUnknownCode,
        Global::RlsErrorBadResponse,
        Global::FallbackAllowed,
        Global::FallbackDenied,
        Global::Buckets,
        Global::DuplicateHeader,
        Global::InvalidDescriptor,
        Global::RlsDroppedHeaders,
        Global::HostErrorTallyBusy,
        Global::HostErrorContext,
        Global::HostErrorResume,
        Global::HostErrorLocalReply,
        Global::RlsCalls,
        Global::OverLimitCached,
        Global::OverLimitCacheEvictions,
        Global::OverLimitCacheTooLarge,
        Global::LeaseAllowed,
        Global::LeaseGrants,
        Global::LeaseRefills,
        Global::LeaseEvictions,
        Global::LeaseGrantsClamped,
        Global::UsageReported,
        Global::UsageTokens,
        Global::UsageFallbackAbsent,
        Global::UsageFallbackStreamAbsent,
        Global::UsageFallbackUnreadable,
        Global::UsageFallbackEncoded,
        Global::UsageFallbackCutOff,
        Global::UsageClamped,
        Global::UsageDebtCapped,
        Global::RlsCharges,
        Global::RlsChargeFailed,
        Global::RlsReleases,
        Global::RlsReleaseFailed,
        Global::ConcurrencyTableFull,
    ];

    /// The metric's name as defined in Envoy.
    pub fn name(self) -> &'static str {
        match self {
            Global::Allowed => "floodgate.allowed",
            Global::Denied => "floodgate.denied",
            Global::ShadowDenied => "floodgate.shadow_denied",
            Global::FailureModeAllowed => "floodgate.failure_mode_allowed",
            Global::FailureModeDenied => "floodgate.failure_mode_denied",
            Global::ErrorClock => "floodgate.error.clock",
            Global::ErrorSharedData => "floodgate.error.shared_data",
            Global::ErrorContention => "floodgate.error.contention",
            Global::CasConflicts => "floodgate.cas_conflicts",
            Global::BucketEvictions => "floodgate.bucket_evictions",
            Global::InvalidCost => "floodgate.invalid_cost",
            Global::RlsOk => "floodgate.rls.ok",
            Global::RlsOverLimit => "floodgate.rls.over_limit",
            Global::RlsErrorNotSent => "floodgate.rls.error.not_sent",
            Global::RlsErrorTimeout => "floodgate.rls.error.timeout",
            Global::RlsErrorUnavailable => "floodgate.rls.error.unavailable",
            Global::RlsErrorStatus => "floodgate.rls.error.status",
            Global::RlsErrorUnknownCode => "floodgate.rls.error.unknown_code",
            Global::RlsErrorBadResponse => "floodgate.rls.error.bad_response",
            Global::FallbackAllowed => "floodgate.fallback.allowed",
            Global::FallbackDenied => "floodgate.fallback.denied",
            Global::Buckets => "floodgate.buckets",
            Global::DuplicateHeader => "floodgate.duplicate_header",
            Global::InvalidDescriptor => "floodgate.invalid_descriptor",
            Global::RlsDroppedHeaders => "floodgate.rls.dropped_headers",
            Global::HostErrorTallyBusy => "floodgate.host_error.tally_busy",
            Global::HostErrorContext => "floodgate.host_error.context",
            Global::HostErrorResume => "floodgate.host_error.resume",
            Global::HostErrorLocalReply => "floodgate.host_error.local_reply",
            Global::RlsCalls => "floodgate.rls.calls",
            Global::OverLimitCached => "floodgate.over_limit_cached",
            Global::OverLimitCacheEvictions => "floodgate.over_limit_cache.evictions",
            Global::OverLimitCacheTooLarge => "floodgate.over_limit_cache.too_large",
            Global::LeaseAllowed => "floodgate.lease.allowed",
            Global::LeaseGrants => "floodgate.lease.grants",
            Global::LeaseRefills => "floodgate.lease.refills",
            Global::LeaseEvictions => "floodgate.lease.evictions",
            Global::LeaseGrantsClamped => "floodgate.lease.grants_clamped",
            Global::UsageReported => "floodgate.usage.reported",
            Global::UsageTokens => "floodgate.usage.tokens",
            Global::UsageFallbackAbsent => "floodgate.usage.fallback.absent",
            Global::UsageFallbackStreamAbsent => "floodgate.usage.fallback.stream_absent",
            Global::UsageFallbackUnreadable => "floodgate.usage.fallback.unreadable",
            Global::UsageFallbackEncoded => "floodgate.usage.fallback.encoded",
            Global::UsageFallbackCutOff => "floodgate.usage.fallback.cut_off",
            Global::UsageClamped => "floodgate.usage.clamped",
            Global::UsageDebtCapped => "floodgate.usage.debt_capped",
            Global::RlsCharges => "floodgate.rls.charges",
            Global::RlsChargeFailed => "floodgate.rls.charge_failed",
            Global::RlsReleases => "floodgate.rls.releases",
            Global::RlsReleaseFailed => "floodgate.rls.release_failed",
            Global::ConcurrencyTableFull => "floodgate.concurrency.table_full",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Global::Buckets => Kind::Gauge,
            _ => Kind::Counter,
        }
    }
}

/// Per-rule counters, in index order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum PerRule {
    /// The rule allowed the request.
    Allowed,
    /// The rule rejected the request.
    Denied,
    /// The shadow rule would have rejected the request.
    ShadowDenied,
}

const PER_RULE: [(PerRule, &str); 3] = [
    (PerRule::Allowed, "allowed"),
    (PerRule::Denied, "denied"),
    (PerRule::ShadowDenied, "shadow_denied"),
];

/// Every metric of a configuration: name and kind, indexed like a [`Tally`]. Plain loops
/// and string pushes, not chained iterators and `format!`: built once per configuration,
/// and the iterator version's adapters cost the module 3 KB.
pub fn definitions(rules: &[Rule]) -> Vec<(Kind, String)> {
    let mut defs = Vec::with_capacity(Tally::for_rules(rules).deltas.len());
    for g in Global::ALL {
        defs.push((g.kind(), g.name().to_string()));
    }
    for rule in rules {
        for (_, suffix) in PER_RULE {
            defs.push((Kind::Counter, rule_metric(&rule.name, suffix)));
        }
    }
    for rule in rules {
        if matches!(rule.limit, Limit::Concurrency(_)) {
            for (_, kind, suffix) in PER_CONCURRENCY {
                defs.push((kind, rule_metric(&rule.name, suffix)));
            }
        }
    }
    defs
}

/// `floodgate.rule.<rule>.<suffix>`.
fn rule_metric(rule: &str, suffix: &str) -> String {
    const PREFIX: &str = "floodgate.rule.";
    let mut name = String::with_capacity(PREFIX.len() + rule.len() + 1 + suffix.len());
    name.push_str(PREFIX);
    name.push_str(rule);
    name.push('.');
    name.push_str(suffix);
    name
}

/// Updates not yet sent to Envoy, indexed like [`definitions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    deltas: Vec<i64>,
}

impl Tally {
    /// An empty tally for a configuration with `rules` rules.
    pub fn new(rules: usize) -> Tally {
        Tally {
            deltas: vec![0; Global::ALL.len() + PER_RULE.len() * rules],
        }
    }

    /// An empty tally for `rules`, their concurrency metrics included.
    pub fn for_rules(rules: &[Rule]) -> Tally {
        let concurrency = rules
            .iter()
            .filter(|rule| matches!(rule.limit, Limit::Concurrency(_)))
            .count();
        Tally {
            deltas: vec![
                0;
                Global::ALL.len()
                    + PER_RULE.len() * rules.len()
                    + PER_CONCURRENCY.len() * concurrency
            ],
        }
    }

    /// Adds `n` (negative for the gauge going down) to a metric of the `ordinal`-th
    /// concurrency rule, in a tally made by [`Tally::for_rules`].
    pub fn concurrency(&mut self, rules: usize, ordinal: usize, metric: PerConcurrency, n: i64) {
        let index = Global::ALL.len()
            + PER_RULE.len() * rules
            + PER_CONCURRENCY.len() * ordinal
            + metric as usize;
        if let Some(d) = self.deltas.get_mut(index) {
            *d += n;
        }
    }

    /// Adds `n` to a global metric.
    pub fn add(&mut self, metric: Global, n: u32) {
        self.bump(metric as usize, n);
    }

    /// Adds one to a rule's counter.
    pub fn rule(&mut self, rule: usize, counter: PerRule) {
        self.bump(
            Global::ALL.len() + rule * PER_RULE.len() + counter as usize,
            1,
        );
    }

    fn bump(&mut self, index: usize, n: u32) {
        if let Some(d) = self.deltas.get_mut(index) {
            *d += i64::from(n);
        }
    }

    /// The pending updates as (index, delta), leaving the tally empty.
    pub fn drain(&mut self) -> impl Iterator<Item = (usize, i64)> + '_ {
        self.deltas
            .iter_mut()
            .enumerate()
            .filter(|(_, d)| **d != 0)
            .map(|(i, d)| (i, std::mem::take(d)))
    }
}

mod concurrency;

#[cfg(test)]
mod tests;
