//! The one module that speaks Envoy's RLS v3: `ShouldRateLimit` in, statuses out.
//!
//! Every protocol quirk is handled here and commented where it is handled. The rest of the
//! crate never sees a protobuf type.

use crate::algorithm::{Algorithm, Decision, Limit, Unit, NANOS_PER_SECOND};
use crate::config::{self, Domain, Rule, RuleKind};
use crate::metrics::{DomainCounters, ErrorKind, Metrics, Outcome, RequestResult};
use crate::proto::rls::rate_limit_response::{
    rate_limit::Unit as PbUnit, Code, DescriptorStatus, RateLimit,
};
use crate::proto::rls::rate_limit_service_server::RateLimitService;
use crate::proto::rls::{RateLimitRequest, RateLimitResponse};
use crate::proto::RateLimitDescriptor;
use crate::store::{admits, Check, Store, StoreError};
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// The most descriptors one request may carry. Envoy sends one per matching rate limit
/// action, a handful in practice; the cap bounds the work one call can cause.
pub const MAX_DESCRIPTORS: usize = 64;

/// The RLS gRPC service over a store.
#[derive(Debug)]
pub struct RlsService<S> {
    config: config::Shared,
    store: S,
    metrics: Arc<Metrics>,
    options: Options,
}

/// What answers carry beyond the statuses, from the command line.
#[derive(Debug, Clone, Copy, Default)]
struct Options {
    /// `--response-headers`: draft-03 `x-ratelimit-*` headers.
    response_headers: bool,
    /// `--response-dynamic-metadata`: the reference's dynamic metadata (see [`metadata`]).
    dynamic_metadata: bool,
}

impl<S: Store> RlsService<S> {
    /// A service deciding with `store` under the configuration in `config`; with
    /// `response_headers`, answers carry draft-03 `x-ratelimit-*` headers.
    pub fn new(
        config: config::Shared,
        store: S,
        metrics: Arc<Metrics>,
        response_headers: bool,
    ) -> Self {
        RlsService {
            config,
            store,
            metrics,
            options: Options {
                response_headers,
                dynamic_metadata: false,
            },
        }
    }

    /// With `on`, every answer carries the reference's `dynamic_metadata` (its
    /// `RESPONSE_DYNAMIC_METADATA`), including the `metadata` of the limits that applied.
    pub fn with_dynamic_metadata(mut self, on: bool) -> Self {
        self.options.dynamic_metadata = on;
        self
    }

    /// Decides one request; `Err` is the gRPC status to answer. Three steps: `plan` what
    /// to ask the store (configuration only), `call_store`, then `respond`.
    pub async fn decide(&self, req: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        if let Err(status) = validate(&req) {
            self.metrics.error(ErrorKind::InvalidArgument);
            return Err(status);
        }
        let config = self.config.get();
        let domain = config.domain(&req.domain);
        let counters = match domain {
            Some(d) => self.metrics.domain(&d.name),
            // Quirk: an unknown domain is not an error in the reference service: nothing
            // is configured for it, so nothing is limited.
            None => self.metrics.unknown_domain(),
        };
        let plan = plan(domain, &req);
        let decisions = self.call_store(&plan.checks, &req.domain).await?;
        let (response, result) = respond(
            &req,
            &plan.rules,
            &plan.checks,
            decisions,
            &counters,
            &self.options,
        )?;
        self.metrics.request(result);
        Ok(response)
    }

    /// Asks the store about `checks` (none: no call), timing it; a failure is counted by
    /// cause and answered UNAVAILABLE.
    async fn call_store(&self, checks: &[Check], domain: &str) -> Result<Vec<Decision>, Status> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        let result = self.store.check(checks).await;
        self.metrics.store_latency(started.elapsed());
        // Quirk: a store failure is UNAVAILABLE (never OK with UNKNOWN codes), which is
        // what Envoy's `failure_mode_deny` is defined over.
        result.map_err(|e| {
            let kind = match e {
                StoreError::Full(_) => ErrorKind::StoreFull,
                StoreError::Unavailable(_) => ErrorKind::StoreUnavailable,
                StoreError::Overloaded(_) => ErrorKind::StoreOverloaded,
            };
            self.metrics.error(kind);
            // The Redis store logs its own failures, rate-limited: an outage must not
            // write a line per request.
            if matches!(e, StoreError::Full(_)) {
                tracing::warn!(%domain, error = %e, "store error");
            }
            Status::unavailable(e.to_string())
        })
    }
}

/// Refuses a request no configuration can answer, as INVALID_ARGUMENT.
fn validate(req: &RateLimitRequest) -> Result<(), Status> {
    // Quirk: an empty domain cannot name a configuration. Answer an error, not OK with
    // UNKNOWN codes, so Envoy's failure mode (fail open or closed) applies.
    if req.domain.is_empty() {
        return Err(Status::invalid_argument("domain must not be empty"));
    }
    if req.descriptors.len() > MAX_DESCRIPTORS {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_DESCRIPTORS} descriptors per request"
        )));
    }
    Ok(())
}

/// What one request asks of the store, worked out from the configuration alone.
struct Plan<'c> {
    /// The rule each request descriptor matched, in request order (`None`: no match, or
    /// a limit another matched limit `replaces`).
    rules: Vec<Option<&'c Rule>>,
    /// One counter check per matched rule that has a limit or blocks, in request order.
    checks: Vec<Check>,
}

/// Matches every descriptor of `req` against `domain` (`None`: unconfigured).
fn plan<'c>(domain: Option<&'c Domain>, req: &RateLimitRequest) -> Plan<'c> {
    // Quirk: a request `hits_addend` of 0 (the proto3 default, what Envoy's native filter
    // sends) means 1.
    let request_hits = u64::from(req.hits_addend.max(1));
    fn entries(d: &RateLimitDescriptor) -> impl Iterator<Item = (&str, &str)> + '_ {
        d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))
    }
    let Some(dom) = domain else {
        return Plan {
            rules: vec![None; req.descriptors.len()],
            checks: Vec::new(),
        };
    };
    let replaced = replaced_names(dom, req);
    let mut rules: Vec<Option<&Rule>> = Vec::with_capacity(req.descriptors.len());
    let mut checks = Vec::new();
    for d in &req.descriptors {
        let f = dom.lookup(entries(d));
        // The reference's `replaces`: a named limit that another matched limit replaces
        // is dropped (answered as no match); `unlimited` stays unlimited.
        let f = f.filter(|f| {
            f.rule.kind() == RuleKind::Unlimited
                || !f
                    .rule
                    .name
                    .as_deref()
                    .is_some_and(|n| replaced.contains(&n))
        });
        let Some(f) = f else {
            rules.push(None);
            continue;
        };
        let r = f.rule;
        // Quirk: a descriptor's own `hits_addend` (a UInt64Value, so "unset" is
        // distinguishable) overrides the request's, and there 0 means check-only, as
        // envoyproxy/ratelimit defines it: decided (OK when one hit would fit), remaining
        // reported as it stands, nothing counted.
        let hits = d.hits_addend.unwrap_or(request_hits);
        let (limit, blocked) = match r.kind() {
            RuleKind::Unlimited => (None, false),
            RuleKind::Limited(limit) => (Some(limit), false),
            RuleKind::Blocked(unit) => (Some(block_limit(unit)), true),
        };
        if let Some(limit) = limit {
            checks.push(Check {
                key: f.counter_key(&dom.name, entries(d)),
                limit,
                hits,
                shadow: r.shadow,
                quota: r.quota_mode,
                blocked,
            });
        }
        rules.push(Some(r));
    }
    Plan { rules, checks }
}

/// What a blocked check carries: `requests_per_unit: 0` is no [`Limit`], and the store
/// reads only the unit of a blocked check (see [`Check::blocked`]).
fn block_limit(unit: Unit) -> Limit {
    Limit {
        requests_per_unit: std::num::NonZeroU32::MIN,
        unit,
        algorithm: Algorithm::FixedWindow,
    }
}

/// The names every matched limit replaces: a first matching pass, only in a domain where
/// some limit has `replaces`.
fn replaced_names<'c>(dom: &'c Domain, req: &RateLimitRequest) -> Vec<&'c str> {
    if !dom.uses_replaces() {
        // The usual case: no extra matching pass, no allocation.
        return Vec::new();
    }
    req.descriptors
        .iter()
        .filter_map(|d| dom.find(d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))))
        .flat_map(|r| r.replaces.iter().map(|n| &**n))
        .collect()
}

/// The answer to a request whose descriptors matched `rules`, given the store's
/// `decisions` (one per check, in order); counts each descriptor in `counters`.
fn respond(
    req: &RateLimitRequest,
    rules: &[Option<&Rule>],
    checks: &[Check],
    decisions: Vec<Decision>,
    counters: &DomainCounters,
    options: &Options,
) -> Result<(RateLimitResponse, RequestResult), Status> {
    if decisions.len() != checks.len() {
        return Err(Status::internal("store answered too few decisions"));
    }
    // The reference's rule, quota mode included: over when an enforced limit is over, or
    // when every quota-mode limit is. The store admitted (consumed) by the same rule.
    let over = !admits(checks, |i| decisions[i].allowed);
    // Quirk: one status per request descriptor, in request order, limited or not.
    let mut decided = decisions.iter();
    let mut statuses = Vec::with_capacity(rules.len());
    let mut limited = Vec::new();
    for rule in rules {
        let (status, outcome) = match rule {
            None => (no_limit_status(0), Outcome::NoLimit),
            // Quirk: the reference service answers `unlimited` with no current_limit
            // and the largest remaining count.
            Some(r) if r.kind() == RuleKind::Unlimited => {
                (no_limit_status(u32::MAX), Outcome::NoLimit)
            }
            Some(r) => {
                let Some(d) = decided.next() else {
                    return Err(Status::internal("store answered too few decisions"));
                };
                let status = limited_status(r, d);
                if !r.shadow {
                    limited.push(status.clone());
                }
                let outcome = match (d.allowed, r.shadow) {
                    (true, _) => Outcome::Ok,
                    (false, true) => Outcome::ShadowOverLimit,
                    (false, false) => Outcome::OverLimit,
                };
                (status, outcome)
            }
        };
        counters.record(outcome);
        if let Some(series) = rule.and_then(|r| r.metric.as_ref()) {
            counters.record_limit(series, outcome);
        }
        statuses.push(status);
    }
    let response = RateLimitResponse {
        overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
        response_headers_to_add: if options.response_headers {
            headers::draft03(&limited)
        } else {
            Vec::new()
        },
        dynamic_metadata: options
            .dynamic_metadata
            .then(|| metadata::dynamic_metadata(req, rules, &statuses)),
        statuses,
        ..Default::default()
    };
    let result = if over {
        RequestResult::OverLimit
    } else {
        RequestResult::Ok
    };
    Ok((response, result))
}

#[tonic::async_trait]
impl<S: Store> RateLimitService for RlsService<S> {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(request.into_inner()).await.map(Response::new)
    }
}

fn no_limit_status(remaining: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: None,
        limit_remaining: remaining,
        duration_until_reset: None,
        quota: None,
    }
}

fn limited_status(rule: &Rule, d: &Decision) -> DescriptorStatus {
    // Quirk: a block reports its limit as the reference does: 0 per its unit.
    let (rpu, unit) = match rule.kind() {
        RuleKind::Limited(l) => (l.requests_per_unit.get(), pb_unit(l.unit)),
        RuleKind::Blocked(unit) => (0, pb_unit(unit)),
        RuleKind::Unlimited => (0, PbUnit::Unknown),
    };
    DescriptorStatus {
        // Quirk: shadow mode decides and counts but always answers OK.
        code: if d.allowed || rule.shadow {
            Code::Ok
        } else {
            Code::OverLimit
        } as i32,
        current_limit: Some(RateLimit {
            name: rule.name.as_deref().unwrap_or_default().to_owned(),
            requests_per_unit: rpu,
            unit: unit as i32,
        }),
        limit_remaining: d.remaining,
        duration_until_reset: Some(duration(d.reset_in_ns)),
        quota: None,
    }
}

/// Quirk: the response's `RateLimit.Unit` has no WEEK. A week limit is reported as UNKNOWN
/// with its true `requests_per_unit`: Envoy then leaves the window out of its
/// `x-ratelimit-limit` quota policy instead of claiming a wrong one (DAY with a divided
/// count would be wrong for bursts).
fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Unknown,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

fn duration(ns: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(ns / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        nanos: i32::try_from(ns % NANOS_PER_SECOND).unwrap_or(0),
    }
}

mod headers;
mod metadata;
#[cfg(test)]
mod tests;
