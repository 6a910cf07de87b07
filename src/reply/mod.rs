//! What a rejection looks like, and the rate-limit headers of a decision.
//!
//! Headers follow the IETF `draft-polli-ratelimit-headers-03` fields Envoy itself emits:
//! `x-ratelimit-limit` (the limit), `x-ratelimit-remaining` (whole requests left) and
//! `x-ratelimit-reset` (seconds until the limit is fully available again, rounded up). A
//! rejection also carries `retry-after`: the wait, in whole seconds rounded up, after which
//! the same request would be admitted. Limits that never reset (a local bucket with no
//! refill) have no reset and no retry time, so those headers are left out, not invented.
//!
//! `response.headers` chooses them: `draft03` (the default), `draft10` or `draft11` (the
//! structured `RateLimit-Policy` and `RateLimit` fields, see [`fields`]), `both` or `none`.
//! `response.body_format: "problem+json"` makes the body of an HTTP rejection a problem
//! document ([`problem`]); gRPC rejections carry `grpc-message` either way.
//!
//! Local buckets and the rate limit service's statuses are both described as a
//! [`Standing`], so one set of rules makes the headers whatever decided the request.
//!
//! A reply speaks the client's protocol: [`protocol`] tells gRPC, gRPC-Web and plain HTTP
//! apart from the request's `content-type`, as Envoy does. [`local`] lays a reply out as
//! the host's local response takes it.
//!
//! **Which rule rejected** is in the reply's details, which Envoy logs as
//! `%RESPONSE_CODE_DETAILS%`: `floodgate_rate_limited{per-tenant}` ([`rejection_details`]).

use crate::bucket::{seconds_ceil, Decision, Quota};
use crate::config::{BodyFormat, ResponseConfig, Rule};
use crate::request::descriptor::Refusal;
use floodgate_common::decimal::decimal;
use floodgate_common::draft03;
use protocol::code;
use protocol::Protocol;
use smallvec::SmallVec;
use std::borrow::Cow;

use details::details_of;
pub use details::rejection_details;

/// Response headers: mostly fixed names, sometimes names a rate limit service sent.
pub type Headers = Vec<(Cow<'static, str>, String)>;

/// Shown in Envoy's access logs as the response code details of a rejection, followed
/// by the rules that rejected it in braces (see [`rejection_details`]).
pub const DETAILS: &str = "floodgate_rate_limited";

/// The most rule names a rejection's details list; more are counted as `+N`, so that an
/// access-log line stays short whatever the configuration.
pub const MAX_DETAILS_RULES: usize = 4;

/// Response code details of a rejection because a limiter failed.
pub const FAILURE_DETAILS: &str = "floodgate_limiter_failure";

/// Response code details of a request refused for a malformed cost header.
pub const INVALID_COST_DETAILS: &str = "floodgate_invalid_cost";

/// Response code details of a request refused for a repeated cost or descriptor header.
pub const DUPLICATE_HEADER_DETAILS: &str = "floodgate_duplicate_header";

/// Response code details of a request refused for a descriptor value it cannot use.
pub const INVALID_DESCRIPTOR_DETAILS: &str = "floodgate_invalid_descriptor";

/// A reply sent from the proxy instead of forwarding the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A plain HTTP response.
    Http {
        /// HTTP status.
        status: u16,
        /// Headers to send.
        headers: Headers,
        /// Body to send.
        body: Vec<u8>,
        /// Response code details for Envoy's access log.
        details: Cow<'static, str>,
    },
    /// A gRPC trailers-only response (HTTP 200 with `grpc-status`).
    Grpc {
        /// gRPC status code.
        status: u32,
        /// `grpc-message`.
        message: String,
        /// Extra metadata (headers).
        metadata: Headers,
        /// Response code details for Envoy's access log.
        details: Cow<'static, str>,
    },
}

/// Where one limit stands for a request, whoever decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The rule (its index in the configuration).
    pub rule: usize,
    /// The limit: a bucket's capacity, or the service's requests per unit.
    pub limit: u32,
    /// Seconds over which `limit` holds, the draft-10 `w` (`None`: not known, or never
    /// refills). See [`fields`] for a bucket's.
    pub window_s: Option<u64>,
    /// Whole requests left (after this one when allowed).
    pub remaining: u32,
    /// Nanoseconds until the limit is fully available again (`None`: never).
    pub reset_ns: Option<u64>,
    /// Nanoseconds until more of the limit is available, the draft-10 `t` (`None`:
    /// never, or nothing is used up).
    pub next_ns: Option<u64>,
    /// Whether this limit admits the request.
    pub allowed: bool,
    /// When denied: nanoseconds until the same request would pass (`None`: never).
    pub retry_ns: Option<u64>,
    /// A shadow rule's limit: counted, never enforced nor shown to clients.
    pub shadow: bool,
}

impl Standing {
    /// A local bucket's decision for `rule`.
    pub fn local(rule: usize, quota: Quota, decision: Decision, shadow: bool) -> Standing {
        Standing {
            rule,
            limit: quota.capacity(),
            window_s: fields::bucket_window_s(quota.capacity(), quota.rate_micro()),
            remaining: decision.remaining(),
            reset_ns: decision.full_in_ns(),
            next_ns: decision.next_token_in_ns(quota),
            allowed: decision.is_allow(),
            retry_ns: match decision {
                Decision::Deny { retry_in_ns, .. } => retry_in_ns,
                Decision::Allow { .. } => Some(0),
            },
            shadow,
        }
    }

    /// Whether this limit rejects the request (an enforced denial).
    pub fn rejects(&self) -> bool {
        !self.allowed && !self.shadow
    }
}

/// The `x-ratelimit-*` headers for the most restrictive enforced limit, by the rule the
/// server shares ([`floodgate_common::draft03`]: the fewest remaining, then the longest
/// reset, then the first). Empty when no enforced limit applied.
pub fn ratelimit_headers(standings: &[Standing]) -> Headers {
    let mut headers = Headers::new();
    push_ratelimit_headers(&mut headers, standings);
    headers
}

/// [`ratelimit_headers`], appended to `headers` (no vector of its own).
fn push_ratelimit_headers(headers: &mut Headers, standings: &[Standing]) {
    let draft03 = |s: &Standing| draft03::Standing {
        limit: s.limit,
        remaining: s.remaining,
        reset_ns: s.reset_ns,
    };
    let push = |name: &'static str, value| headers.push((name.into(), value));
    match standings {
        // One limit, the usual rejection: it is the tightest, no search.
        [one] if !one.shadow => draft03::fields([draft03(one)], push),
        _ => draft03::fields(standings.iter().filter(|s| !s.shadow).map(draft03), push),
    }
}

/// Seconds until every enforced limit that rejected the request would admit it: the
/// longest wait, rounded up. `None` when one of them never will.
pub fn retry_after_seconds(standings: &[Standing]) -> Option<u64> {
    if let [one] = standings {
        if one.rejects() {
            // One limit, the usual rejection: its own wait.
            return one.retry_ns.map(seconds_ceil);
        }
    }
    standings
        .iter()
        .filter(|s| s.rejects())
        .map(|s| s.retry_ns)
        .try_fold(0u64, |longest, wait| Some(longest.max(wait?)))
        .map(seconds_ceil)
}

/// The rate-limit header fields `config.headers` asks for, for `standings`: the
/// draft-03 fields of the tightest limit, the draft-10 fields of every rule.
pub fn header_fields(config: &ResponseConfig, rules: &[Rule], standings: &[Standing]) -> Headers {
    let mut headers = Headers::new();
    push_header_fields(&mut headers, config, rules, standings);
    headers
}

/// [`header_fields`], appended to `headers`.
fn push_header_fields(
    headers: &mut Headers,
    config: &ResponseConfig,
    rules: &[Rule],
    standings: &[Standing],
) {
    if config.headers.draft03() {
        push_ratelimit_headers(headers, standings);
    }
    if config.headers.structured() {
        headers.extend(fields::structured_headers(rules, standings));
    }
}

/// The reply rejecting a request: the configured status and body (or `body` when the
/// rate limit service sent one) for HTTP, RESOURCE_EXHAUSTED for gRPC and gRPC-Web, with
/// `retry-after`, the rate-limit fields of the limits that rejected it and any `extra`
/// headers. With `body_format: problem+json` an HTTP rejection's body is the problem
/// document instead, whatever the service sent, and a `content-type` among `extra` is
/// left out: the configured format is what clients were promised. `seed` is something
/// that differs from request to request (the clock reading): with
/// `response.retry_after_jitter` the waits shown are spread upward from it ([`jitter`]).
pub fn rejection(
    config: &ResponseConfig,
    rules: &[Rule],
    standings: &[Standing],
    body: Option<&[u8]>,
    extra: Headers,
    protocol: Protocol,
    seed: u64,
) -> Reply {
    // Usually every standing rejects and they are in rule order already (one rule, or
    // each group in order): they are read where they are. Otherwise (or to spread the
    // waits) a copy, inline like the request's other per-rule values: a rejection
    // allocates only what it hands to the host (headers, body, details).
    let mut copied: SmallVec<[Standing; 2]> = SmallVec::new();
    let rejecting: &[Standing] =
        if config.retry_after_jitter_ppm == 0 && order::all_reject_in_rule_order(standings) {
            standings
        } else {
            for s in standings.iter().filter(|s| s.rejects()) {
                order::insert_in_rule_order(&mut copied, *s);
            }
            if config.retry_after_jitter_ppm > 0 {
                jitter::spread(&mut copied, config.retry_after_jitter_ppm, seed);
            }
            &copied
        };
    // The rules' names, read where they are for the details (and the problem document).
    let violated = || {
        rejecting
            .iter()
            .filter_map(|s| rules.get(s.rule).map(|r| r.name.as_str()))
    };
    let problem = config.body_format == BodyFormat::ProblemJson && protocol == Protocol::Http;
    let mut headers: Headers = Vec::with_capacity(6 + extra.len());
    if problem {
        headers.push(("content-type".into(), problem::CONTENT_TYPE.to_string()));
    }
    if let Some(seconds) = retry_after_seconds(rejecting) {
        headers.push(("retry-after".into(), decimal(seconds)));
    }
    push_header_fields(&mut headers, config, rules, rejecting);
    if !extra.is_empty() {
        headers.extend(
            extra
                .into_iter()
                .filter(|(name, _)| !(problem && name.eq_ignore_ascii_case("content-type"))),
        );
    }
    let body = body.unwrap_or(config.body.as_bytes());
    // Made only for an HTTP reply: a gRPC one has its message instead.
    let http_body = || {
        if problem {
            problem::body(config.status, &violated().collect::<SmallVec<[&str; 2]>>())
        } else {
            body.to_vec()
        }
    };
    status_reply(
        protocol,
        (config.status, http_body),
        (code::RESOURCE_EXHAUSTED, || {
            String::from_utf8_lossy(body).trim_end().to_string()
        }),
        headers,
        match rejecting {
            // One rule, the usual rejection: its name read directly, no iterator.
            [one] => details_of(rules.get(one.rule).map(|r| r.name.as_str()).into_iter()),
            _ => details_of(violated()),
        },
    )
}

/// The reply rejecting a request because a limiter could not decide
/// (`failure_mode: deny`).
pub fn failure(status: u16, protocol: Protocol) -> Reply {
    const MESSAGE: &str = "rate limiter unavailable";
    status_reply(
        protocol,
        (status, || format!("{MESSAGE}\n").into_bytes()),
        (code::UNAVAILABLE, || MESSAGE.to_string()),
        Vec::new(),
        Cow::Borrowed(FAILURE_DETAILS),
    )
}

/// The reply refusing a request whose input the limits cannot be applied to: 400, or
/// gRPC INVALID_ARGUMENT. Counting such a request as usual would let a client buy an
/// expensive request at the cheapest price, or pick its bucket.
pub fn refusal(refusal: &Refusal, protocol: Protocol) -> Reply {
    let (message, details) = match refusal {
        Refusal::InvalidCost { header } => (
            format!("invalid {header} header: expected a whole number from 1 to 4294967295"),
            INVALID_COST_DETAILS,
        ),
        Refusal::RepeatedHeader { header } => (
            format!("the {header} header must be sent at most once"),
            DUPLICATE_HEADER_DETAILS,
        ),
        Refusal::ValueTooLong { key, max } => (
            format!("the {key} descriptor value is longer than {max} bytes"),
            INVALID_DESCRIPTOR_DETAILS,
        ),
        Refusal::NotUtf8 { key } => (
            format!("the {key} descriptor value is not valid UTF-8"),
            INVALID_DESCRIPTOR_DETAILS,
        ),
    };
    let body = format!("{message}\n").into_bytes();
    status_reply(
        protocol,
        (400, move || body),
        (code::INVALID_ARGUMENT, || message),
        Vec::new(),
        Cow::Borrowed(details),
    )
}

/// One reply in the client's protocol: `http` (status, body) for plain HTTP, `grpc`
/// (status, message) for gRPC and gRPC-Web, with `headers` either way. The body is made
/// only for an HTTP reply and the message only for a gRPC one: neither shows the other.
fn status_reply(
    protocol: Protocol,
    http: (u16, impl FnOnce() -> Vec<u8>),
    grpc: (u32, impl FnOnce() -> String),
    headers: Headers,
    details: Cow<'static, str>,
) -> Reply {
    let grpc = || (grpc.0, (grpc.1)());
    match protocol {
        Protocol::Http => Reply::Http {
            status: http.0,
            headers,
            body: (http.1)(),
            details,
        },
        Protocol::Grpc => {
            let (status, message) = grpc();
            Reply::Grpc {
                status,
                message,
                metadata: headers,
                details,
            }
        }
        // Envoy does not frame this one (it sees no gRPC): a trailers-only answer in the
        // headers, and the same status as a trailer frame in the body.
        Protocol::GrpcWeb { content_type, text } => {
            let grpc = grpc();
            let mut all: Headers = Vec::with_capacity(3 + headers.len());
            all.push(("content-type".into(), content_type.to_string()));
            all.push(("grpc-status".into(), grpc.0.to_string()));
            all.push(("grpc-message".into(), protocol::percent_encode(&grpc.1)));
            all.extend(headers);
            Reply::Http {
                status: 200,
                headers: all,
                body: protocol::grpc_web_status_body(grpc.0, &grpc.1, text),
                details,
            }
        }
    }
}

mod details;
pub mod fields;
pub mod jitter;
pub mod local;
mod order;
pub mod problem;
pub mod protocol;

#[cfg(test)]
mod tests;
