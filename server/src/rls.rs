//! The one module that speaks Envoy's RLS v3: `ShouldRateLimit` in, statuses out.
//!
//! Every protocol quirk is handled here and commented where it is handled. The rest of the
//! crate never sees a protobuf type. [`plan`] works out what applies to each descriptor,
//! the store decides, this file answers, [`status`] writes each descriptor's status and
//! [`headers`] the optional response headers.

mod callers;
mod headers;
mod holds;
mod metadata;
mod plan;
mod status;

pub use callers::{CallKind, Trust, CHARGE_HEADER};
pub use headers::{HeaderNames, ResponseHeaders};
pub use holds::{HoldCall, HOLD_HEADER, RELEASE_HEADER};

use crate::algorithm::Decision;
use crate::config::{self, Rule};
use crate::listener::PeerInfo;
use crate::metrics::{DomainCounters, ErrorKind, Metrics, RequestResult};
use crate::proto::rls::rate_limit_response::Code;
use crate::proto::rls::rate_limit_service_server::RateLimitService;
use crate::proto::rls::{RateLimitRequest, RateLimitResponse};
use crate::reference_stats::ReferenceStats;
use crate::store::batch::admits;
use crate::store::{Check, Store, StoreError};
use plan::{plan, Applied};
use status::descriptor_status;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

pub mod permit;
/// The quota header's codec, written once for the filter and the server (see there).
pub use floodgate_common::quota as quota_header;
use quota_header::Asked;
pub use quota_header::QUOTA_HEADER;

/// The most descriptors one request may carry. Envoy sends one per matching rate limit
/// action, a handful in practice; the cap bounds the work one call can cause.
pub const MAX_DESCRIPTORS: usize = 64;

// The quota header can name every descriptor a request may carry, and no more.
const _: () = assert!(MAX_DESCRIPTORS == quota_header::MAX_ENTRIES);

/// How answers are shaped, from the operator's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Headers added to answers (`--response-headers`, `--limit-response-headers`).
    pub headers: ResponseHeaders,
    /// `--shadow-mode`: decide and count as usual, answer every request OK overall.
    pub shadow_mode: bool,
    /// `--near-limit-ratio`: an OK decision leaving more than this share of its limit
    /// used is counted in `floodgate_near_limit_total`.
    pub near_limit_ratio: f64,
    /// `--response-dynamic-metadata`: the reference's dynamic metadata (see [`metadata`]).
    pub dynamic_metadata: bool,
    /// What callers may ask for beyond a decision (`--refuse-charges`, `--refuse-quota`).
    pub trust: Trust,
    /// Of those allowed, who may send charges (`--charge-identities`, see [`permit`]).
    pub charges: permit::Who,
    /// Of those allowed, who may ask for quota leases (`--quota-identities`).
    pub quota: permit::Who,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            headers: ResponseHeaders::None,
            shadow_mode: false,
            near_limit_ratio: 0.8,
            dynamic_metadata: false,
            trust: Trust::default(),
            charges: permit::Who::Anyone,
            quota: permit::Who::Anyone,
        }
    }
}

/// The RLS gRPC service over a store.
#[derive(Debug)]
pub struct RlsService<S> {
    config: config::Shared,
    store: S,
    metrics: Arc<Metrics>,
    options: Options,
    reference: Option<Arc<ReferenceStats>>,
}

impl<S: Store> RlsService<S> {
    /// A service deciding with `store` under the configuration in `config`, answering as
    /// `options` says.
    pub fn new(config: config::Shared, store: S, metrics: Arc<Metrics>, options: Options) -> Self {
        RlsService {
            config,
            store,
            metrics,
            options,
            reference: None,
        }
    }

    /// Also counts every decision in the reference's own series.
    pub fn with_reference_stats(mut self, stats: Arc<ReferenceStats>) -> Self {
        self.reference = Some(stats);
        self
    }

    /// Decides one request from a caller that asks for no lease (as Envoy's native filter).
    pub async fn decide(&self, req: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        self.decide_call(req, &[], CallKind::Admission).await
    }

    /// Decides one admission whose caller sent `quota_header`: every value of the call's
    /// [`QUOTA_HEADER`] (none: no lease asked).
    pub async fn decide_asking(
        &self,
        req: RateLimitRequest,
        quota_header: &[&[u8]],
    ) -> Result<RateLimitResponse, Status> {
        self.decide_call(req, quota_header, CallKind::Admission)
            .await
    }

    /// Decides one call of `kind` (an admission or a stream-end charge) whose caller sent
    /// `quota_header`. `Err` is the gRPC status to answer. Three steps: `plan` what to ask
    /// the store (configuration and request only), `call_store`, then `respond`.
    pub async fn decide_call(
        &self,
        req: RateLimitRequest,
        quota_header: &[&[u8]],
        kind: CallKind,
    ) -> Result<RateLimitResponse, Status> {
        self.decide_holding(req, quota_header, kind, HoldCall::Anonymous)
            .await
    }

    /// [`RlsService::decide_call`] with what the call asks of concurrency limits, from its
    /// [`HOLD_HEADER`] or [`RELEASE_HEADER`] (see [`HoldCall`]).
    pub async fn decide_holding(
        &self,
        req: RateLimitRequest,
        quota_header: &[&[u8]],
        kind: CallKind,
        hold: HoldCall,
    ) -> Result<RateLimitResponse, Status> {
        // Quirk (ours): a malformed quota header is a bad hint, not a bad request: answered
        // as if absent (no grant), and counted.
        let asked = quota_header::parse(quota_header, req.descriptors.len()).unwrap_or_else(|_| {
            self.metrics.quota_header_malformed();
            Asked::NONE
        });
        let config = self.config.get();
        let domain = config.domain(&req.domain);
        // A charge takes no hold (and a release cannot be one, see `should_rate_limit`).
        let hold = (kind == CallKind::Admission).then_some(hold);
        let planned = validate(&req).and_then(|()| plan(domain, &req, asked, hold));
        let plan = match planned {
            Ok(p) => p,
            Err(status) => {
                self.metrics.error(ErrorKind::InvalidArgument);
                return Err(status);
            }
        };
        let counters = match domain {
            Some(d) => self.metrics.domain(&d.name),
            // Quirk: an unknown domain is not an error in the reference service: nothing
            // is configured for it, so nothing is limited.
            None => self.metrics.unknown_domain(),
        };
        let decisions = self.call_store(&plan.checks, &req.domain, kind).await?;
        let (response, result) = respond(
            &req,
            &plan.applied,
            &plan.checks,
            decisions,
            &counters,
            &self.options,
            self.reference.as_deref(),
        )?;
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
    // Quirk: the reference refuses an empty descriptor list with this message (as gRPC
    // UNKNOWN, a Go error without a code); we give it the code that says what it is.
    if req.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit descriptor list must not be empty",
        ));
    }
    if req.descriptors.len() > MAX_DESCRIPTORS {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_DESCRIPTORS} descriptors per request"
        )));
    }
    Ok(())
}

/// The answer to a request whose descriptors got `applied`, given the store's `decisions`
/// (one per check of `checks`, in order); counts each descriptor in `counters`.
fn respond(
    req: &RateLimitRequest,
    applied: &[Applied<'_>],
    checks: &[Check],
    decisions: Vec<Decision>,
    counters: &DomainCounters,
    options: &Options,
    reference: Option<&ReferenceStats>,
) -> Result<(RateLimitResponse, RequestResult), Status> {
    if decisions.len() != checks.len() {
        return Err(Status::internal("store answered too few decisions"));
    }
    // The reference's rule, quota mode included: over when an enforced limit is over, or
    // when every quota-mode limit is (the store admitted, or not, by the same rule), or
    // when an override of 0 blocks.
    let over = !admits(checks, |i| decisions[i].allowed)
        || applied.iter().any(|a| matches!(a, Applied::Blocked(_)));
    holds::count(checks, &decisions, over, counters);
    // Quirk: one status per request descriptor, in request order, limited or not.
    let mut decided = decisions.into_iter().zip(checks);
    let stats = reference.map(|r| (r, req.domain.as_str()));
    let mut statuses = Vec::with_capacity(applied.len());
    let mut limited = Vec::new();
    for a in applied {
        let (status, outcome) = descriptor_status(a, &mut decided, counters, options, stats)?;
        if !a.shadow() && status.current_limit.is_some() {
            limited.push(status.clone());
        }
        counters.record(outcome);
        if let Some(series) = configured_rule(a).and_then(|r| r.metric.as_ref()) {
            counters.record_limit(series, outcome);
        }
        statuses.push(status);
    }
    for s in &mut statuses {
        match (&s.quota, over) {
            // An over-limit request grants nothing. The stores take no grant then; on
            // Redis Cluster a slot may have committed one in the race `docs/server/stores.md`
            // describes, and those hits stay unspent rather than be spent by a caller
            // that was told no.
            (Some(_), true) => s.quota = None,
            (Some(q), false) => counters.granted(q.requests),
            (None, _) => {}
        }
    }
    let (overall, result) = match (over, options.shadow_mode) {
        (false, _) => (Code::Ok, RequestResult::Ok),
        // Quirk: the reference's global SHADOW_MODE answers OK overall and leaves each
        // descriptor's status as decided, so logs and headers still show the would-be
        // rejection.
        (true, true) => (Code::Ok, RequestResult::ShadowOverLimit),
        (true, false) => (Code::OverLimit, RequestResult::OverLimit),
    };
    let response = RateLimitResponse {
        overall_code: overall as i32,
        response_headers_to_add: options.headers.render(&limited),
        dynamic_metadata: options.dynamic_metadata.then(|| {
            let rules: Vec<Option<&Rule>> = applied.iter().map(configured_rule).collect();
            metadata::dynamic_metadata(req, &rules, &statuses)
        }),
        statuses,
        ..Default::default()
    };
    Ok((response, result))
}

/// The configured rule a descriptor's answer came from (none for an override, or no match).
fn configured_rule<'c>(a: &Applied<'c>) -> Option<&'c Rule> {
    match a {
        Applied::Configured(r, _) => Some(*r),
        _ => None,
    }
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
        // Ours: a malformed, repeated or contradictory hold header is a bad request, unlike a
        // bad quota hint: a hold taken under the wrong id could never be released.
        let hold = HoldCall::of(request.metadata())
            .and_then(|h| match (h, kind) {
                (HoldCall::Release(_), CallKind::Charge) => Err(Status::invalid_argument(format!(
                    "{RELEASE_HEADER} and {CHARGE_HEADER} cannot be sent on one call"
                ))),
                _ => Ok(h),
            })
            .inspect_err(|_| self.metrics.error(ErrorKind::InvalidArgument))?;
        self.options
            .trust
            .allows(kind)
            .inspect_err(|_| self.metrics.error(ErrorKind::PermissionDenied))?;
        let (metadata, extensions, req) = request.into_parts();
        let identities = extensions
            .get::<PeerInfo>()
            .map_or(&[][..], PeerInfo::identities);
        if kind == CallKind::Charge && !self.options.charges.admits(identities) {
            self.metrics.error(ErrorKind::PermissionDenied);
            self.metrics.tls.refused(permit::Refused::Charge);
            return Err(Status::permission_denied(format!(
                "this client's identity may not send {CHARGE_HEADER}"
            )));
        }
        // Every value of the quota header (sent twice is malformed); as bytes, since a
        // non-ASCII value is malformed too, not an error.
        let mut header: Vec<&[u8]> = metadata
            .get_all(QUOTA_HEADER)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        if !header.is_empty() && !self.options.trust.allow_quota {
            // Refused quota is answered as if not asked: no lease, never an error (an
            // error would turn every call of a filter that asks into its failure mode).
            self.metrics.quota_header_refused();
            header.clear();
        } else if !header.is_empty() && !self.options.quota.admits(identities) {
            // The same for a caller whose identity may not lease.
            self.metrics.tls.refused(permit::Refused::Quota);
            header.clear();
        }
        self.decide_holding(req, &header, kind, hold)
            .await
            .map(Response::new)
    }
}

#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod tests;
