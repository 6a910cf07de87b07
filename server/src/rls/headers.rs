//! The response headers an answer may carry in `response_headers_to_add`, which Envoy adds
//! to the client's response: draft-03 `x-ratelimit-*` (`--response-headers`), or the
//! reference service's `RateLimit-*` (`--limit-response-headers`).

use crate::algorithm::Unit;
use crate::proto::rls::rate_limit_response::{rate_limit::Unit as PbUnit, Code, DescriptorStatus};
use crate::proto::HeaderValue;

/// Which headers answers carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ResponseHeaders {
    /// None (the default).
    #[default]
    None,
    /// Draft-03 `x-ratelimit-limit`, `-remaining`, `-reset`, in Envoy's own shape.
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
    pub(super) fn render(&self, limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
        match self {
            ResponseHeaders::None => Vec::new(),
            ResponseHeaders::Draft03 => draft03(limited),
            ResponseHeaders::Reference(names) => reference(names, limited),
        }
    }
}

/// Draft-03 (`draft-polli-ratelimit-headers-03`) headers for the most constrained enforced
/// limit, shaped as Envoy's own filter writes them: `x-ratelimit-limit: 10, 10;w=60`.
/// With no enforced limit, no headers.
fn draft03(limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
    let Some(tightest) = limited.iter().min_by_key(|s| s.limit_remaining) else {
        return Vec::new();
    };
    let mut limit = rpu(tightest).to_string();
    for s in limited {
        let Some(l) = &s.current_limit else { continue };
        let window = PbUnit::try_from(l.unit).ok().map_or(0, window_seconds);
        let window = if window == 0 && l.unit == PbUnit::Unknown as i32 {
            Unit::Week.seconds() // our only UNKNOWN is a week
        } else {
            window
        };
        // A window of several units (`unit_multiplier`, absent for one).
        let window = window.saturating_mul(u64::from(l.unit_multiplier.unwrap_or(1).max(1)));
        limit.push_str(&format!(", {};w={window}", l.requests_per_unit));
        if !l.name.is_empty() {
            limit.push_str(&format!(";name=\"{}\"", l.name));
        }
    }
    vec![
        header("x-ratelimit-limit", limit),
        header(
            "x-ratelimit-remaining",
            tightest.limit_remaining.to_string(),
        ),
        header("x-ratelimit-reset", reset_seconds(tightest).to_string()),
    ]
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

fn window_seconds(unit: PbUnit) -> u64 {
    match unit {
        PbUnit::Second => 1,
        PbUnit::Minute => 60,
        PbUnit::Hour => 3_600,
        PbUnit::Day => 86_400,
        PbUnit::Month => Unit::Month.seconds(),
        PbUnit::Year => Unit::Year.seconds(),
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
