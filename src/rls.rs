//! Speaking Envoy's rate limit service protocol (RLS v3): the one module that knows it.
//!
//! [`encode_request`] builds the `ShouldRateLimit` request for the global rules that
//! apply to a request; [`interpret`] turns whatever came back (a response, a gRPC status,
//! or nothing because the call could not even start) into a decision or a [`Failure`].
//! Protocol quirks are handled here, each where it matters.

use crate::proto::envoy::config::core::v3::HeaderValue;
use crate::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use crate::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use crate::proto::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use crate::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use crate::response::{Headers, Standing};
use prost::Message;

/// The gRPC service name.
pub const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
/// The gRPC method name.
pub const METHOD: &str = "ShouldRateLimit";

/// gRPC status UNAVAILABLE: no healthy host, connection refused, or (sometimes) a timeout.
const GRPC_UNAVAILABLE: u32 = 14;

/// One descriptor to send: its entries in order and the request's cost for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    /// (key, value) entries.
    pub entries: Vec<(String, String)>,
    /// Hits this request adds (at least 1).
    pub cost: u32,
}

/// The encoded `ShouldRateLimit` request.
pub fn encode_request(domain: &str, descriptors: &[Descriptor]) -> Vec<u8> {
    // Quirk: a descriptor's own `hits_addend` overrides the request's, but services that
    // predate it only read the request's. When every descriptor has the same cost we set
    // both, so either kind of service counts it; 0 (absent) means 1.
    let first = descriptors.first().map_or(1, |d| d.cost);
    let uniform = descriptors.iter().all(|d| d.cost == first);
    let request = RateLimitRequest {
        domain: domain.to_string(),
        descriptors: descriptors
            .iter()
            .map(|d| RateLimitDescriptor {
                entries: d
                    .entries
                    .iter()
                    .map(|(key, value)| Entry {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                limit: None,
                hits_addend: (d.cost != 1).then_some(u64::from(d.cost)),
            })
            .collect(),
        hits_addend: if uniform && first != 1 { first } else { 0 },
    };
    request.encode_to_vec()
}

/// What came back for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The call could not be started (e.g. the cluster does not exist); host status.
    NotSent(u32),
    /// The call ended with a gRPC status other than OK, after `elapsed_ms`.
    Status {
        /// gRPC status code.
        code: u32,
        /// Time from dispatch to the answer, when the clock could tell.
        elapsed_ms: Option<u64>,
    },
    /// A response message.
    Response(Vec<u8>),
}

/// Why the service's answer cannot decide the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The call could not be started (missing cluster, bad arguments).
    NotSent,
    /// No answer within the timeout.
    Timeout,
    /// gRPC UNAVAILABLE: no healthy host, refused, or reset.
    Unavailable,
    /// Another gRPC status.
    Status,
    /// The service answered `UNKNOWN` overall.
    UnknownCode,
    /// The response could not be decoded.
    BadResponse,
}

/// A decided answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// Whether an enforced (non-shadow) descriptor is over its limit.
    pub over_limit: bool,
    /// Where each descriptor stands, in request order (empty if the service sent no
    /// statuses, or not one per descriptor).
    pub standings: Vec<Standing>,
    /// Per descriptor: whether it is over its limit (its rule's counter). Always one per
    /// descriptor: derived from the overall code when statuses are missing.
    pub over: Vec<bool>,
    /// Headers for the upstream request.
    pub request_headers: Vec<(String, String)>,
    /// Headers for the downstream response.
    pub response_headers: Headers,
    /// Body for a rejection (empty: use the configured one).
    pub raw_body: Vec<u8>,
}

/// Interprets an answer for descriptors whose rules are shadow or not (`shadows`, in
/// request order). `timeout_ms` tells a timeout from another failure.
pub fn interpret(answer: &Answer, shadows: &[bool], timeout_ms: u32) -> Result<Decided, Failure> {
    let bytes = match answer {
        Answer::NotSent(_) => return Err(Failure::NotSent),
        // Quirk: Envoy reports a timeout as UNAVAILABLE or CANCELLED, never as
        // DEADLINE_EXCEEDED, so the elapsed time is what tells a timeout apart. Envoy's
        // timers run from its loop's cached clock and can fire a few milliseconds early,
        // while refusals and "no healthy host" come back at once: half the timeout
        // separates the two. The gRPC status is always checked before any body is read.
        Answer::Status { code, elapsed_ms } => {
            return Err(match elapsed_ms {
                Some(ms) if ms.saturating_mul(2) >= u64::from(timeout_ms) => Failure::Timeout,
                _ if *code == GRPC_UNAVAILABLE => Failure::Unavailable,
                _ => Failure::Status,
            })
        }
        Answer::Response(bytes) => bytes,
    };
    let response = RateLimitResponse::decode(bytes.as_slice()).map_err(|_| Failure::BadResponse)?;
    let overall = Code::try_from(response.overall_code).unwrap_or(Code::Unknown);
    if overall == Code::Unknown {
        return Err(Failure::UnknownCode);
    }
    let overall_over = overall == Code::OverLimit;
    // Quirk: statuses should be one per request descriptor, in order; a service that
    // sends none (or a different number) leaves only the overall code to go by.
    let aligned = response.statuses.len() == shadows.len();
    let standings: Vec<Standing> = if aligned {
        response
            .statuses
            .iter()
            .zip(shadows)
            .map(|(status, &shadow)| standing(status, shadow))
            .collect()
    } else {
        Vec::new()
    };
    let over: Vec<bool> = if aligned {
        standings.iter().map(|s| !s.allowed).collect()
    } else {
        vec![overall_over; shadows.len()]
    };
    // Shadow rules are sent and counted, never enforced: the request is over limit only
    // if the service says so and an enforced descriptor is among those over.
    let over_limit = overall_over
        && over
            .iter()
            .zip(shadows)
            .any(|(&is_over, &shadow)| is_over && !shadow);
    Ok(Decided {
        over_limit,
        standings,
        over,
        request_headers: headers(&response.request_headers_to_add)
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v))
            .collect(),
        response_headers: headers(&response.response_headers_to_add),
        raw_body: response.raw_body,
    })
}

/// A descriptor's status as a [`Standing`].
fn standing(status: &DescriptorStatus, shadow: bool) -> Standing {
    let over = status.code == Code::OverLimit as i32;
    let reset_ns = status.duration_until_reset.as_ref().map(|d| {
        let nanos = i128::from(d.seconds) * 1_000_000_000 + i128::from(d.nanos);
        u64::try_from(nanos.max(0)).unwrap_or(u64::MAX)
    });
    Standing {
        limit: status
            .current_limit
            .as_ref()
            .map_or(0, |l| l.requests_per_unit),
        remaining: status.limit_remaining,
        reset_ns,
        allowed: !over,
        retry_ns: if over { reset_ns } else { Some(0) },
        shadow,
    }
}

/// Header values as text: `value`, or `raw_value` when the service used that instead.
fn headers(values: &[HeaderValue]) -> Headers {
    values
        .iter()
        .filter(|h| !h.key.is_empty())
        .map(|h| {
            let value = if h.value.is_empty() {
                String::from_utf8_lossy(&h.raw_value).into_owned()
            } else {
                h.value.clone()
            };
            (h.key.to_ascii_lowercase().into(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests;
