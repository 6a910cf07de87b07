//! The one module that speaks Envoy's RLS v3: `ShouldRateLimit` in, statuses out.
//!
//! Every protocol quirk is handled here and commented where it is handled. The rest of the
//! crate never sees a protobuf type.

use crate::algorithm::{Decision, Unit, NANOS_PER_SECOND};
use crate::config::{self, Domain, Rule};
use crate::metrics::{DomainCounters, ErrorKind, Metrics, Outcome, RequestResult};
use crate::proto::rls::rate_limit_response::{
    rate_limit::Unit as PbUnit, Code, DescriptorStatus, RateLimit,
};
use crate::proto::rls::rate_limit_service_server::RateLimitService;
use crate::proto::rls::{RateLimitRequest, RateLimitResponse};
use crate::proto::HeaderValue;
use crate::store::{Check, CounterKey, Store, StoreError};
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// The request header (gRPC metadata) that makes a call a **charge**: every descriptor is
/// counted whether it fits or not ([`Store::charge`]), and the answer says where each
/// stands after it. floodgate's filter sends it, with `hits_addend` = the cost, at the end
/// of a response whose cost is known only then (an LLM answer's tokens): the request was
/// admitted already, and a charge refused for not fitting would leak the budget. Its only
/// value is `1`; any other is refused as INVALID_ARGUMENT. Envoy's native
/// `apply_on_stream_done` sends no such header.
pub const CHARGE_HEADER: &str = "x-floodgate-charge";

/// What a call is, from its [`CHARGE_HEADER`]: an admission or a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// All or nothing: nothing is consumed unless every enforced descriptor fits.
    Admission,
    /// Every descriptor is counted, into debt if need be.
    Charge,
}

impl CallKind {
    /// The kind of call its metadata says; `Err` for a charge header other than `1`.
    pub fn of(metadata: &tonic::metadata::MetadataMap) -> Result<CallKind, Status> {
        match metadata.get(CHARGE_HEADER) {
            None => Ok(CallKind::Admission),
            Some(v) if v.as_bytes() == b"1" => Ok(CallKind::Charge),
            Some(_) => Err(Status::invalid_argument(format!(
                "{CHARGE_HEADER} must be 1"
            ))),
        }
    }
}

/// The most descriptors one request may carry. Envoy sends one per matching rate limit
/// action, a handful in practice; the cap bounds the work one call can cause.
pub const MAX_DESCRIPTORS: usize = 64;

/// The RLS gRPC service over a store.
#[derive(Debug)]
pub struct RlsService<S> {
    config: config::Shared,
    store: S,
    metrics: Arc<Metrics>,
    response_headers: bool,
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
            response_headers,
        }
    }

    /// Decides one request; `Err` is the gRPC status to answer.
    pub async fn decide(&self, req: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        self.decide_as(req, CallKind::Admission).await
    }

    /// Decides one request as a call of `kind`; `Err` is the gRPC status to
    /// answer. Three steps: `plan` what to ask the store (configuration only),
    /// `call_store`, then `respond`.
    pub async fn decide_as(
        &self,
        req: RateLimitRequest,
        kind: CallKind,
    ) -> Result<RateLimitResponse, Status> {
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
        let decisions = self.call_store(&plan.checks, &req.domain, kind).await?;
        let (response, result) = respond(&plan.rules, decisions, &counters, self.response_headers)?;
        self.metrics.request(result);
        Ok(response)
    }

    /// Asks the store about `checks` (none: no call), timing it; a failure is counted by
    /// cause and answered UNAVAILABLE.
    async fn call_store(
        &self,
        checks: &[Check],
        domain: &str,
        kind: CallKind,
    ) -> Result<Vec<Decision>, Status> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        let result = match kind {
            CallKind::Admission => self.store.check(checks).await,
            CallKind::Charge => self.store.charge(checks).await,
        };
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
    /// The rule each request descriptor matched, in request order (`None`: no match).
    rules: Vec<Option<&'c Rule>>,
    /// One counter check per matched rule that has a limit, in request order.
    checks: Vec<Check>,
}

/// Matches every descriptor of `req` against `domain` (`None`: unconfigured).
fn plan<'c>(domain: Option<&'c Domain>, req: &RateLimitRequest) -> Plan<'c> {
    // Quirk: a request `hits_addend` of 0 (the proto3 default, what Envoy's native filter
    // sends) means 1.
    let request_hits = u64::from(req.hits_addend.max(1));
    let mut rules: Vec<Option<&Rule>> = Vec::with_capacity(req.descriptors.len());
    let mut checks = Vec::new();
    for d in &req.descriptors {
        let entries = || d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
        let rule = domain.and_then(|dom| dom.find(entries()).map(|r| (dom, r)));
        if let Some((dom, r)) = rule {
            if let Some(limit) = r.limit {
                checks.push(Check {
                    key: CounterKey::new(&dom.name, entries()),
                    limit,
                    // Quirk: a descriptor's own `hits_addend` (a UInt64Value, so "unset"
                    // is distinguishable) overrides the request's, and there 0 means
                    // check-only, as envoyproxy/ratelimit defines it: decided (OK when one
                    // hit would fit), remaining reported as it stands, nothing counted.
                    hits: d.hits_addend.unwrap_or(request_hits),
                    shadow: r.shadow,
                });
            }
        }
        rules.push(rule.map(|(_, r)| r));
    }
    Plan { rules, checks }
}

/// The answer to a request whose descriptors matched `rules`, given the store's
/// `decisions` (one per limited rule, in order); counts each descriptor in `counters`.
fn respond(
    rules: &[Option<&Rule>],
    decisions: Vec<Decision>,
    counters: &DomainCounters,
    response_headers: bool,
) -> Result<(RateLimitResponse, RequestResult), Status> {
    // Quirk: one status per request descriptor, in request order, limited or not.
    let mut decided = decisions.into_iter();
    let mut statuses = Vec::with_capacity(rules.len());
    let mut limited = Vec::new();
    for rule in rules {
        let (status, outcome) = match rule {
            None => (no_limit_status(0), Outcome::NoLimit),
            // Quirk: the reference service answers `unlimited` with no current_limit
            // and the largest remaining count.
            Some(Rule { limit: None, .. }) => (no_limit_status(u32::MAX), Outcome::NoLimit),
            Some(r) => {
                let Some(d) = decided.next() else {
                    return Err(Status::internal("store answered too few decisions"));
                };
                let status = limited_status(r, &d);
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
        statuses.push(status);
    }
    let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
    let response = RateLimitResponse {
        overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
        response_headers_to_add: if response_headers {
            draft03_headers(&limited)
        } else {
            Vec::new()
        },
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
        let kind = CallKind::of(request.metadata()).inspect_err(|_| {
            self.metrics.error(ErrorKind::InvalidArgument);
        })?;
        self.decide_as(request.into_inner(), kind)
            .await
            .map(Response::new)
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
    let (rpu, unit) = rule.limit.map_or((0, PbUnit::Unknown), |l| {
        (l.requests_per_unit.get(), pb_unit(l.unit))
    });
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
    }
}

fn duration(ns: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(ns / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        nanos: i32::try_from(ns % NANOS_PER_SECOND).unwrap_or(0),
    }
}

/// Draft-03 (`draft-polli-ratelimit-headers-03`) headers for the most constrained enforced
/// limit, shaped as Envoy's own filter writes them: `x-ratelimit-limit: 10, 10;w=60`.
/// Only limits not in shadow mode count; with none, no headers.
fn draft03_headers(limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
    let Some(tightest) = limited.iter().min_by_key(|s| s.limit_remaining) else {
        return Vec::new();
    };
    let rpu = |s: &DescriptorStatus| s.current_limit.as_ref().map_or(0, |l| l.requests_per_unit);
    let mut limit = rpu(tightest).to_string();
    for s in limited {
        let Some(l) = &s.current_limit else { continue };
        let window = PbUnit::try_from(l.unit).ok().map_or(0, window_seconds);
        let window = if window == 0 && l.unit == PbUnit::Unknown as i32 {
            Unit::Week.seconds() // our only UNKNOWN is a week
        } else {
            window
        };
        limit.push_str(&format!(", {};w={window}", l.requests_per_unit));
        if !l.name.is_empty() {
            limit.push_str(&format!(";name=\"{}\"", l.name));
        }
    }
    let reset = tightest
        .duration_until_reset
        .as_ref()
        .map_or(0, |d| d.seconds + i64::from(d.nanos > 0));
    vec![
        header("x-ratelimit-limit", limit),
        header(
            "x-ratelimit-remaining",
            tightest.limit_remaining.to_string(),
        ),
        header("x-ratelimit-reset", reset.to_string()),
    ]
}

fn window_seconds(unit: PbUnit) -> u64 {
    match unit {
        PbUnit::Second => 1,
        PbUnit::Minute => 60,
        PbUnit::Hour => 3_600,
        PbUnit::Day => 86_400,
        _ => 0,
    }
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value,
        raw_value: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
