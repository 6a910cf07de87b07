//! Draft-03 `x-ratelimit-*` response headers for `--response-headers`.

use crate::algorithm::Unit;
use crate::proto::rls::rate_limit_response::{rate_limit::Unit as PbUnit, DescriptorStatus};
use crate::proto::HeaderValue;

/// Draft-03 (`draft-polli-ratelimit-headers-03`) headers for the most constrained enforced
/// limit, shaped as Envoy's own filter writes them: `x-ratelimit-limit: 10, 10;w=60`.
/// Only limits not in shadow mode count; with none, no headers.
pub(super) fn draft03(limited: &[DescriptorStatus]) -> Vec<HeaderValue> {
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
