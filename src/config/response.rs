//! How a rejection looks: the validated `response` section (see `validate/response.rs`).

use std::sync::Arc;

/// The largest `response.retry_after_jitter`, in millionths: a wait at most doubled. More
/// would keep clients away far longer than the limit asks, a different policy from spreading.
pub const MAX_JITTER_PPM: u32 = 1_000_000;

/// How a rejection looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseConfig {
    /// HTTP status of a rejection (default 429, 400..=599).
    pub status: u16,
    /// Body of a rejection (default `rate limited\n`), shared by every rejection's reply
    /// rather than copied into each.
    pub body: Arc<str>,
    /// Also add the rate-limit header fields to allowed responses (default false).
    pub headers_on_allowed: bool,
    /// Which rate-limit header fields replies carry (default: draft-03's `x-ratelimit-*`).
    pub headers: HeaderFields,
    /// The body of an HTTP rejection (default: `body` as text).
    pub body_format: BodyFormat,
    /// How far a rejection's waits are spread upward, in millionths of the exact wait
    /// (`response.retry_after_jitter` × 10⁶, default 0: exact), so that clients rejected
    /// together do not retry together (see [`crate::reply::jitter`]).
    pub retry_after_jitter_ppm: u32,
}

/// Which rate-limit header fields replies carry: clients and tools written for Envoy
/// read draft-03's `x-ratelimit-*`, newer ones the structured fields of
/// draft-ietf-httpapi-ratelimit-headers-10 or -11 (see [`crate::reply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderFields {
    /// `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset` (the default).
    Draft03,
    /// `RateLimit-Policy` and `RateLimit` of draft-10, one item per rule.
    Draft10,
    /// `RateLimit-Policy` and `RateLimit` of draft-11, the latest draft: the same syntax
    /// and, for floodgate's limits, the same bytes as draft-10 (draft-11 reads `r` as the
    /// available quota and `t` as the effective window; see [`crate::reply::fields`]). A
    /// value of its own so that a configuration says which draft its clients follow.
    Draft11,
    /// draft-03's and draft-10's.
    Both,
    /// Neither (`retry-after` stays on rejections: it is plain HTTP).
    None,
}

impl HeaderFields {
    /// Whether the draft-03 `x-ratelimit-*` fields are sent.
    pub fn draft03(self) -> bool {
        matches!(self, HeaderFields::Draft03 | HeaderFields::Both)
    }

    /// Whether the structured `RateLimit-Policy` and `RateLimit` fields are sent (draft-10
    /// or draft-11: the same bytes).
    pub fn structured(self) -> bool {
        matches!(
            self,
            HeaderFields::Draft10 | HeaderFields::Draft11 | HeaderFields::Both
        )
    }
}

/// The body of an HTTP rejection (gRPC rejections have none: they carry `grpc-message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// `response.body` (or the rate limit service's `raw_body`), as today.
    Text,
    /// An RFC 9457 `application/problem+json` document of the draft's `quota-exceeded`
    /// type naming the rules that rejected the request, so that clients can parse it.
    ProblemJson,
}
