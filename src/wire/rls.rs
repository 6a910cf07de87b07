//! Speaking Envoy's rate limit service protocol (RLS v3): the one module that knows it.
//!
//! [`encode_request`] builds the `ShouldRateLimit` request for the global rules that
//! apply to a request; [`interpret`] turns whatever came back (a response, a gRPC status,
//! or nothing because the call could not even start) into a decision or a [`Failure`].
//! Protocol quirks are handled here, each where it matters.

use crate::config::Entry;
use crate::reply::{Headers, Standing};
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use crate::wire::service_headers;
use response::{HeaderValue, Limit, Status};

/// The HTTP/2 path of the `ShouldRateLimit` method (`/package.Service/Method`).
pub const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

use crate::reply::protocol::code;
/// What the transport brought back, re-exported where its meaning is decided.
pub use crate::wire::grpc::Answer;

/// The gRPC request header by which floodgate asks floodgate-server for quota leases:
/// the 0-based indices of the request's descriptors it will spend a grant for, comma
/// separated (`0,2`; written by [`floodgate_common::quota::encode`], which the server's
/// parser is held to). Envoy's own filter never sends it, so it never gets a grant.
pub use floodgate_common::headers::QUOTA_HEADER;

/// The request header that makes a call a **charge**, with its one value: every
/// descriptor counted with its `hits_addend` whether it fits or not (floodgate-server).
/// Sent with the stream-end charge of a rule whose cost only the response reports.
pub const CHARGE_HEADER: (&str, &str) = (
    floodgate_common::headers::CHARGE_HEADER,
    floodgate_common::headers::CHARGE_VALUE,
);

/// One descriptor to send: its rule's entries (their keys) and the request's values for
/// them, in order, and the request's cost for it. Borrowed as they are, not paired into
/// a vector of strings: building one per descriptor cost an allocation and a UTF-8 check
/// of every value on every global request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor<'a> {
    /// The rule's entries: each one's `key` is sent (paired with `values` by position).
    pub keys: &'a [Entry],
    /// One value per entry, as raw bytes. They must be UTF-8 (protobuf strings), which
    /// `descriptor::applicable` checks for every rule the service is asked about (it
    /// refuses the request otherwise), so they go on the wire as they are.
    pub values: &'a [Vec<u8>],
    /// Hits this request adds; 0 is a check-only descriptor (a lease refill): decided,
    /// and granted quota if asked, but not counted.
    pub cost: u32,
}

/// A quota lease the service granted for one descriptor (RLS v3 `Quota`): `requests`
/// hits already counted for us, ours to spend until `valid_until_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Hits granted (at least 1).
    pub requests: u32,
    /// Wall-clock instant (ns since the Unix epoch) after which none may be spent.
    pub valid_until_ns: u64,
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
    /// statuses, or not one per descriptor, or, from [`interpret_with`], when the answer
    /// admits the request and they were not asked for).
    pub standings: Vec<Standing>,
    /// Per descriptor: whether it is over its limit (its rule's counter), bit `i` for
    /// descriptor `i` ([`Decided::is_over`]). Always one per descriptor: derived from the
    /// overall code when statuses are missing. A word, not a vector: a call has at most
    /// [`crate::config::MAX_RULES`] (64) descriptors.
    pub over: u64,
    /// Headers for the upstream request.
    pub request_headers: Vec<(String, String)>,
    /// Headers for the downstream response.
    pub response_headers: Headers,
    /// Body for a rejection (empty: use the configured one).
    pub raw_body: Vec<u8>,
    /// Headers the service sent that were dropped as unsafe ([`service_headers`]).
    pub dropped_headers: u32,
    /// Per descriptor, the quota lease granted for it (empty when statuses are not one
    /// per descriptor, and when none carries a usable grant: most answers, which then
    /// cost no vector).
    pub grants: Vec<Option<Grant>>,
}

impl Decided {
    /// Whether descriptor `i` is over its limit (its rule's counter).
    pub fn is_over(&self, i: usize) -> bool {
        i < 64 && self.over & (1 << i) != 0
    }
}

/// Whether the service answered, readably, that the call is over its limit (overall
/// `OVER_LIMIT`): it then took nothing for the call, a hold included. Any other answer,
/// a failure too (a call that timed out may have been decided), may have taken one.
pub fn said_over_limit(answer: &Answer) -> bool {
    let Answer::Response(bytes) = answer else {
        return false;
    };
    response::overall_code(bytes).is_ok_and(|code| code == Code::OverLimit as i32)
}

/// Interprets an answer for descriptors whose rules are shadow or not (`shadows`, in
/// request order).
pub fn interpret(answer: &Answer, shadows: &[bool]) -> Result<Decided, Failure> {
    interpret_with(answer, shadows, true)
}

/// [`interpret`], with the standings of an answer that admits the request only when
/// `admitted_standings` (an allowed request's rate-limit headers are their one use):
/// left out, they cost no vector and no conversion of each status. An answer that says
/// over limit always has them (its reply and the over-limit cache read them).
pub fn interpret_with(
    answer: &Answer,
    shadows: &[bool],
    admitted_standings: bool,
) -> Result<Decided, Failure> {
    let bytes = match answer {
        Answer::NotSent(_) => return Err(Failure::NotSent),
        // The gRPC status is always checked before any body is read.
        Answer::Status { code, message } => return Err(failure(*code, message)),
        Answer::Undecodable => return Err(Failure::BadResponse),
        Answer::Response(bytes) => bytes,
    };
    let mut response = response::Response::default();
    response::decode(bytes, &mut response).map_err(|_| Failure::BadResponse)?;
    let overall = Code::try_from(response.overall_code).unwrap_or(Code::Unknown);
    if overall == Code::Unknown {
        return Err(Failure::UnknownCode);
    }
    let overall_over = overall == Code::OverLimit;
    // Quirk: statuses should be one per request descriptor, in order; a service that
    // sends none (or a different number) leaves only the overall code to go by.
    let aligned = response.statuses.len() == shadows.len();
    let standings: Vec<Standing> = if aligned && (overall_over || admitted_standings) {
        response
            .statuses
            .iter()
            .zip(shadows)
            .map(|(status, &shadow)| standing(status, shadow))
            .collect()
    } else {
        Vec::new()
    };
    let over: u64 = if aligned {
        response
            .statuses
            .iter()
            .enumerate()
            .filter(|(i, status)| *i < 64 && is_over(status))
            .fold(0, |bits, (i, _)| bits | 1 << i)
    } else if overall_over {
        // Every descriptor's bit.
        1u64.checked_shl(shadows.len() as u32)
            .map_or(u64::MAX, |b| b - 1)
    } else {
        0
    };
    // Shadow rules are sent and counted, never enforced: the request is over limit only
    // if the service says so and an enforced descriptor is among those over.
    let over_limit = overall_over
        && shadows
            .iter()
            .enumerate()
            .any(|(i, &shadow)| i < 64 && over & (1 << i) != 0 && !shadow);
    let mut dropped_headers = 0;
    let mut request_headers = Vec::new();
    safe_headers(
        &response.request_headers,
        &mut dropped_headers,
        |key, raw| {
            let value = String::from_utf8_lossy(raw).into_owned();
            request_headers.push((key.to_ascii_lowercase(), value));
        },
    );
    let mut response_headers = Headers::new();
    safe_headers(
        &response.response_headers,
        &mut dropped_headers,
        |key, raw| {
            // The name lower-cased and the value made text on their way into the buffer.
            response_headers.push_parts(
                |out| out.extend(key.bytes().map(|b| b.to_ascii_lowercase())),
                |out| out.extend_from_slice(String::from_utf8_lossy(raw).as_bytes()),
            );
        },
    );
    let grants = if aligned && response.statuses.iter().any(|s| grant(s).is_some()) {
        response.statuses.iter().map(grant).collect()
    } else {
        Vec::new()
    };
    Ok(Decided {
        grants,
        over_limit,
        standings,
        over,
        request_headers,
        response_headers,
        raw_body: response.raw_body.to_vec(),
        dropped_headers,
    })
}

/// Why a call failed, from its gRPC status and message.
fn failure(status: u32, message: &str) -> Failure {
    // Quirk: Envoy reports its own timeout as an HTTP 504 (UNAVAILABLE to gRPC, sometimes
    // CANCELLED), never as DEADLINE_EXCEEDED; only the message, "upstream request timeout",
    // tells it from a refused connection or no healthy host (UNAVAILABLE as well).
    if status == code::DEADLINE_EXCEEDED || message.contains("timeout") {
        Failure::Timeout
    } else if status == code::UNAVAILABLE {
        Failure::Unavailable
    } else {
        Failure::Status
    }
}

/// Whether a descriptor's status says it is over its limit.
fn is_over(status: &Status) -> bool {
    status.code == Code::OverLimit as i32
}

/// A descriptor's status as a [`Standing`].
fn standing(status: &Status, shadow: bool) -> Standing {
    let over = is_over(status);
    let reset_ns = status
        .duration_until_reset
        .map(|(seconds, nanos)| floodgate_common::unit::from_parts(seconds, nanos));
    Standing {
        // By position only: the caller knows which rule each descriptor is.
        rule: 0,
        limit: status
            .current_limit
            .as_ref()
            .map_or(0, |l| l.requests_per_unit),
        window_s: status.current_limit.as_ref().and_then(window_seconds),
        remaining: status.limit_remaining,
        reset_ns,
        // A window's reset is when its quota comes back: the draft-10 `t`.
        next_ns: reset_ns,
        allowed: !over,
        retry_ns: if over { reset_ns } else { Some(0) },
        shadow,
    }
}

/// The length of a limit's window in seconds, the draft-10 `w`: its unit times its
/// `unit_multiplier` (field 4, absent for one unit), so a limit per 5 minutes says
/// `w=300`, not `w=60`.
fn window_seconds(limit: &Limit) -> Option<u64> {
    let multiplier = u64::from(limit.unit_multiplier.unwrap_or(1).max(1));
    unit_seconds(limit.unit).map(|s| s.saturating_mul(multiplier))
}

/// The length of a limit's unit in seconds, as floodgate-server counts it
/// ([`floodgate_common::unit`]). `None` for `UNKNOWN` and for months and years, which
/// another service may count as calendar months and years (floodgate-server's `week`
/// travels as `UNKNOWN`).
fn unit_seconds(unit: i32) -> Option<u64> {
    use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
    use floodgate_common::unit::Unit as Length;
    match Unit::try_from(unit).ok()? {
        Unit::Second => Some(Length::Second.seconds()),
        Unit::Minute => Some(Length::Minute.seconds()),
        Unit::Hour => Some(Length::Hour.seconds()),
        Unit::Day => Some(Length::Day.seconds()),
        Unit::Unknown | Unit::Month | Unit::Year => None,
    }
}

/// A descriptor's quota lease, if it carries a usable one. Quirk: the public API allows a
/// `Quota` without `valid_until`; a grant that never expires cannot be spent safely (the
/// window it was counted in ends), so it is ignored, as is one of 0 requests. The
/// whole-request `RateLimitResponse.quota` (field 7) is not used: leases are per
/// descriptor.
fn grant(status: &Status) -> Option<Grant> {
    let quota = status.quota.filter(|q| q.requests > 0)?;
    let (seconds, nanos) = quota.valid_until?;
    Some(Grant {
        requests: quota.requests,
        valid_until_ns: floodgate_common::unit::from_parts(seconds, nanos),
    })
}

/// Hands `each` the service's headers that are safe to add, as name and raw value:
/// `value`, or `raw_value` when the service used that instead (the caller lower-cases
/// the name and makes the value text). Each unsafe one is left out and counted in
/// `dropped`.
fn safe_headers<'a>(
    values: &[HeaderValue<'a>],
    dropped: &mut u32,
    mut each: impl FnMut(&'a str, &'a [u8]),
) {
    for h in values {
        let raw = if h.value.is_empty() {
            h.raw_value
        } else {
            h.value.as_bytes()
        };
        if service_headers::check(h.key, raw).is_err() {
            *dropped += 1;
            continue;
        }
        each(h.key, raw);
    }
}

mod request;
mod response;

pub use request::encode_request;

#[cfg(test)]
mod tests;
