//! The response headers an answer may carry in `response_headers_to_add`, which Envoy adds
//! to the client's response: draft-03 `x-ratelimit-*` (`--response-headers`), or the
//! reference service's `RateLimit-*` (`--limit-response-headers`).

use crate::proto::rls::rate_limit_response::{Code, DescriptorStatus};
use crate::proto::HeaderValue;
use floodgate_common::draft03;

/// Which headers answers carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ResponseHeaders {
    /// None (the default).
    #[default]
    None,
    /// Draft-03 `x-ratelimit-limit`, `-remaining`, `-reset`, as the filter writes them.
    Draft03,
    /// The reference's three headers, under these names (its
    /// `LIMIT_RESPONSE_HEADERS_ENABLED`).
    Reference(HeaderNames),
}

/// The names of the reference-style headers (its `LIMIT_LIMIT_HEADER`,
/// `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`; by default `RateLimit-Limit`,
/// `RateLimit-Remaining`, `RateLimit-Reset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// Carries the chosen limit's `requests_per_unit`.
    pub limit: String,
    /// Carries its `limit_remaining`.
    pub remaining: String,
    /// Carries the seconds until it resets.
    pub reset: String,
}

impl ResponseHeaders {
    /// The headers for an answer whose enforced limits (shadow ones left out, so turning a
    /// limit's shadow mode on changes nothing a client sees) got `limited`, in request
    /// order.
    pub fn render(&self, limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
        match self {
            ResponseHeaders::None => Vec::new(),
            ResponseHeaders::Draft03 => draft03(limited),
            ResponseHeaders::Reference(names) => reference(names, limited),
        }
    }
}

/// Draft-03 (`draft-polli-ratelimit-headers-03`) headers for the most constrained enforced
/// limit, chosen and written by the rule the filter shares ([`floodgate_common::draft03`]):
/// the fewest remaining, then the longest reset, then the first; the limit's number alone
/// (Envoy's `ratelimit` filter adds the per-window list itself when asked to). With no
/// enforced limit, no headers.
fn draft03(limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
    let standings = limited.iter().map(|s| draft03::Standing {
        limit: rpu(s),
        remaining: s.limit_remaining,
        reset_ns: s
            .duration_until_reset
            .as_ref()
            .map(|d| floodgate_common::unit::from_parts(d.seconds, d.nanos)),
    });
    let mut headers = Vec::with_capacity(3);
    draft03::fields(standings, |key, value| headers.push(header(key, value)));
    headers
}

/// The reference's choice and values: the last enforced limit over (so a rejected client
/// sees the limit that rejected it), else the first with the fewest remaining; its
/// `requests_per_unit`, its remaining, and its reset in whole seconds rounded up (for a
/// fixed window the seconds to its end, which is what the reference computes).
fn reference(names: &HeaderNames, limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
    let over = limited
        .iter()
        .rev()
        .find(|s| s.code == Code::OverLimit as i32);
    // `min_by_key` returns the first of equal minima, as the reference's strict `<` does.
    let Some(chosen) = over.or_else(|| limited.iter().min_by_key(|s| s.limit_remaining)) else {
        return Vec::new();
    };
    vec![
        header(&names.limit, rpu(chosen).to_string()),
        header(&names.remaining, chosen.limit_remaining.to_string()),
        header(&names.reset, reset_seconds(chosen).to_string()),
    ]
}

fn rpu(s: &DescriptorStatus) -> u32 {
    s.current_limit.as_ref().map_or(0, |l| l.requests_per_unit)
}

/// A status's `duration_until_reset` in seconds, rounded up.
fn reset_seconds(s: &DescriptorStatus) -> i64 {
    s.duration_until_reset
        .as_ref()
        .map_or(0, |d| d.seconds + i64::from(d.nanos > 0))
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value,
        raw_value: Vec::new(),
    }
}
