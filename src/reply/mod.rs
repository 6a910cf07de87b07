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
//! the host's local response takes it, its [`Headers`] already in the host's encoding
//! ([`headers`]) and its [`Body`] the configured one, shared rather than copied.
//!
//! **Which rule rejected** is in the reply's details, which Envoy logs as
//! `%RESPONSE_CODE_DETAILS%`: `floodgate_rate_limited{per-tenant}` ([`rejection_details`]).

use crate::bucket::seconds_ceil;
use crate::config::{BodyFormat, ResponseConfig, Rule};
use crate::request::descriptor::Refusal;
use floodgate_common::draft03;
use protocol::code;
use protocol::Protocol;
use smallvec::SmallVec;
use std::sync::Arc;

use details::details_of;
pub use details::{rejection_details, Details};

pub use body::Body;
pub use headers::Headers;
pub use standing::Standing;

/// Room for a rejection's header fields, in bytes of their encoding: `retry-after` and
/// the three draft-03 fields take about 120, the structured ones as much again. One
/// allocation of a size class the heap reuses from one rejection to the next.
const REPLY_HEADERS_CAPACITY: usize = 256;

/// The response code details of a rejection (defined with the rule names, so that each
/// rule makes its own details once).
pub use crate::config::DETAILS;

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
        body: Body,
        /// Response code details for Envoy's access log.
        details: Details,
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
        details: Details,
    },
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
    // The digits written straight into the encoded fields: no string per value.
    let push = |name: &'static str, n| headers.push_decimal(name, n);
    match standings {
        // One limit, the usual rejection: it is the tightest, no search.
        [one] if !one.shadow => draft03::numbers([draft03(one)], push),
        _ => draft03::numbers(standings.iter().filter(|s| !s.shadow).map(draft03), push),
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
        fields::push_structured_headers(headers, rules, standings);
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
    let mut headers = Headers::with_capacity(REPLY_HEADERS_CAPACITY + extra.encoded().len());
    if problem {
        headers.push("content-type", problem::CONTENT_TYPE);
    }
    if let Some(seconds) = retry_after_seconds(rejecting) {
        headers.push_decimal("retry-after", seconds);
    }
    push_header_fields(&mut headers, config, rules, rejecting);
    for (name, value) in extra.pairs() {
        if !(problem && name.eq_ignore_ascii_case(b"content-type")) {
            headers.push_bytes(name, value);
        }
    }
    // Made only for an HTTP reply: a gRPC one has its message instead. The configured
    // body is shared with the configuration, not copied.
    let http_body = || match (problem, body) {
        (true, _) => Body::Own(problem::body(
            config.status,
            &violated().collect::<SmallVec<[&str; 2]>>(),
        )),
        (false, Some(body)) => Body::Own(body.to_vec()),
        (false, None) => Body::Configured(Arc::clone(&config.body)),
    };
    let text = body.unwrap_or(config.body.as_bytes());
    status_reply(
        protocol,
        (config.status, http_body),
        (code::RESOURCE_EXHAUSTED, || {
            String::from_utf8_lossy(text).trim_end().to_string()
        }),
        headers,
        match rejecting {
            // One rule, the usual rejection: the details it made with the configuration.
            [one] => rules.get(one.rule).map_or(Details::Fixed(DETAILS), |r| {
                Details::Rule(Arc::clone(&r.details))
            }),
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
        (status, || Body::Own(format!("{MESSAGE}\n").into_bytes())),
        (code::UNAVAILABLE, || MESSAGE.to_string()),
        Headers::new(),
        Details::Fixed(FAILURE_DETAILS),
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
    let body = Body::Own(format!("{message}\n").into_bytes());
    status_reply(
        protocol,
        (400, move || body),
        (code::INVALID_ARGUMENT, || message),
        Headers::new(),
        Details::Fixed(details),
    )
}

/// One reply in the client's protocol: `http` (status, body) for plain HTTP, `grpc`
/// (status, message) for gRPC and gRPC-Web, with `headers` either way. The body is made
/// only for an HTTP reply and the message only for a gRPC one: neither shows the other.
fn status_reply(
    protocol: Protocol,
    http: (u16, impl FnOnce() -> Body),
    grpc: (u32, impl FnOnce() -> String),
    headers: Headers,
    details: Details,
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
            let mut all = Headers::with_capacity(REPLY_HEADERS_CAPACITY + headers.encoded().len());
            all.push("content-type", content_type);
            all.push_decimal("grpc-status", u64::from(grpc.0));
            all.push("grpc-message", &protocol::percent_encode(&grpc.1));
            all.append(headers);
            Reply::Http {
                status: 200,
                headers: all,
                body: Body::Own(protocol::grpc_web_status_body(grpc.0, &grpc.1, text)),
                details,
            }
        }
    }
}

mod body;
mod details;
pub mod fields;
pub mod headers;
pub mod jitter;
pub mod local;
mod order;
pub mod problem;
pub mod protocol;
mod standing;

#[cfg(test)]
mod tests;
