//! The `application/problem+json` body of a rejection (RFC 9457), with the
//! `quota-exceeded` problem type that draft-ietf-httpapi-ratelimit-headers-10 registers.
//!
//! Its extension member `violated-policies` lists the policies the request exceeded: here
//! the names of the rules that rejected it, in configuration order, the same names the
//! `RateLimit` fields use. It is left out when the rate limit service rejected the
//! request without saying which descriptor was over (no per-descriptor statuses).

use serde::Serialize;

/// The media type of the body.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// The problem type URI the draft registers for an exceeded quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem's short, human-readable summary (the same for every occurrence).
pub const TITLE: &str = "Quota exceeded";

/// The problem document, in the member order readers expect.
#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    #[serde(rename = "violated-policies", skip_serializing_if = "<[_]>::is_empty")]
    violated_policies: &'a [&'a str],
}

/// The body rejecting a request with HTTP `status`, naming the `violated` rules.
pub fn body(status: u16, violated: &[&str]) -> Vec<u8> {
    let problem = Problem {
        kind: QUOTA_EXCEEDED,
        title: TITLE,
        status,
        violated_policies: violated,
    };
    // Serialising strings and an integer cannot fail; an empty body would still be a
    // rejection (the status and headers carry it).
    serde_json::to_vec(&problem).unwrap_or_default()
}
