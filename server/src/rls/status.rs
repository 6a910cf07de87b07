//! One descriptor's status: how it counts (and in the reference's series), and how it is
//! written on the wire: the RLS v3 `DescriptorStatus` of a
//! decided, unlimited or blocked descriptor, and the protobuf times and units in it.

use super::plan::Applied;
use super::{configured_rule, Options};
use crate::algorithm::{Algorithm, Decision, Limit, Unit, Window};
use crate::metrics::{DomainCounters, Outcome};
use crate::proto::rls::rate_limit_response::{
    quota::ExpirationSpecifier, rate_limit::Unit as PbUnit, Code, DescriptorStatus, Quota,
    RateLimit,
};
use crate::reference_stats::{Hit, ReferenceStats};
use crate::store::Check;
use tonic::Status;

/// One descriptor's status and how it counts, taking its decision (and the check it
/// decided) from `decided` when the store decided it; a configured limit's decision also
/// counts in the reference's series, when `stats` (with the request's domain) are kept.
pub(super) fn descriptor_status<'k>(
    a: &Applied<'_>,
    decided: &mut impl Iterator<Item = (Decision, &'k Check)>,
    counters: &DomainCounters,
    options: &Options,
    stats: Option<(&ReferenceStats, &str)>,
) -> Result<(DescriptorStatus, Outcome), Status> {
    Ok(match a {
        Applied::Nothing => (no_limit_status(0), Outcome::NoLimit),
        // Quirk: the reference service answers `unlimited` with no current_limit and the
        // largest remaining count.
        Applied::Unlimited => (no_limit_status(u32::MAX), Outcome::NoLimit),
        Applied::Blocked(unit) => (blocked_status(*unit), Outcome::OverLimit),
        Applied::Configured(_, limit) | Applied::Overridden(limit) => {
            let Some((d, check)) = decided.next() else {
                return Err(Status::internal("store answered too few decisions"));
            };
            let name = match a {
                Applied::Configured(r, _) => r.name.as_deref().unwrap_or_default(),
                _ => "",
            };
            let near = d.allowed && near_limit(limit, &d, options.near_limit_ratio);
            if near {
                counters.near_limit();
            }
            let shadow = a.shadow();
            if let (Some((stats, domain)), Some(rule)) = (stats, configured_rule(a)) {
                let hit = Hit {
                    hits: check.hits.max(1),
                    within: d.allowed,
                    near,
                    shadow,
                };
                stats.record(domain, &rule.stats_key, hit);
            }
            let mut status = limited_status(name, limit, shadow, &d);
            if a.configured_block() {
                // Quirk: a block reports its limit as the reference does: 0 per unit.
                if let Some(l) = status.current_limit.as_mut() {
                    l.requests_per_unit = 0;
                }
            }
            let outcome = match (d.allowed, shadow) {
                (true, _) => Outcome::Ok,
                (false, true) => Outcome::ShadowOverLimit,
                (false, false) => Outcome::OverLimit,
            };
            (status, outcome)
        }
    })
}

/// Whether an admitted decision leaves more than `ratio` of its limit used, as the
/// reference's near-limit statistic: used > ⌊capacity × ratio⌋, capacity being the burst
/// of a token bucket and `requests_per_unit` otherwise.
fn near_limit(limit: &Limit, d: &Decision, ratio: f64) -> bool {
    let capacity = match limit.algorithm {
        Algorithm::TokenBucket { burst } => u64::from(burst.get()),
        _ => limit.rpu(),
    };
    let used = capacity.saturating_sub(u64::from(d.remaining));
    // Exact enough: capacity < 2^32, so the product has all its integer digits.
    let threshold = (capacity as f64 * ratio).floor() as u64;
    used > threshold
}

pub(super) fn no_limit_status(remaining: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: None,
        limit_remaining: remaining,
        duration_until_reset: None,
        quota: None,
    }
}

pub(super) fn limited_status(
    name: &str,
    limit: &Limit,
    shadow: bool,
    d: &Decision,
) -> DescriptorStatus {
    DescriptorStatus {
        // Quirk: shadow mode decides and counts but always answers OK.
        code: if d.allowed || shadow {
            Code::Ok
        } else {
            Code::OverLimit
        } as i32,
        current_limit: Some(RateLimit {
            name: name.to_owned(),
            requests_per_unit: limit.requests_per_unit.get(),
            unit: pb_unit(limit.unit) as i32,
            unit_multiplier: unit_multiplier(limit.window()),
        }),
        // Quirk: an over-limit descriptor reports nothing remaining, as the reference
        // does, even when a cheaper request would fit (the duration says when one does).
        limit_remaining: if d.allowed { d.remaining } else { 0 },
        duration_until_reset: Some(duration(d.reset_in_ns)),
        // Our lease: the grant taken with the admission, spendable until
        // valid_until. Unlike the RLS v3 comment on this field, a caller that has spent it
        // before valid_until asks again; it does not treat the descriptor as over.
        quota: d.grant.map(|g| Quota {
            requests: g.hits,
            expiration_specifier: Some(ExpirationSpecifier::ValidUntil(timestamp(
                g.valid_until_ns,
            ))),
            id: String::new(),
        }),
    }
}

/// An instant in ns since the Unix epoch as a protobuf `Timestamp`.
pub(super) fn timestamp(ns: u64) -> prost_types::Timestamp {
    let (seconds, nanos) = floodgate_common::unit::to_parts(ns);
    prost_types::Timestamp { seconds, nanos }
}

/// An override of zero requests: over, nothing remaining, and (never fitting) reported to
/// reset after one whole unit, so a caller caching the denial asks again then.
pub(super) fn blocked_status(unit: Unit) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::OverLimit as i32,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: 0,
            unit: pb_unit(unit) as i32,
            unit_multiplier: None,
        }),
        limit_remaining: 0,
        duration_until_reset: Some(duration(unit.period_ns())),
        quota: None,
    }
}

/// Quirk: a window of several units travels as its unit and `unit_multiplier` (field 4,
/// a `UInt32Value`, as Envoy's proposal for such windows defines it), sent only when the
/// multiplier is not 1, so that a plain unit's answer is byte for byte what it was. A
/// proxy that does not know the field skips it and sees the unit alone.
pub(super) fn unit_multiplier(window: Window) -> Option<u32> {
    let m = u32::from(window.multiplier.get());
    (m > 1).then_some(m)
}

/// Quirk: the response's `RateLimit.Unit` has no WEEK. A week limit is reported as UNKNOWN
/// with its true `requests_per_unit`: Envoy then leaves the window out of its
/// `x-ratelimit-limit` quota policy instead of claiming a wrong one (DAY with a divided
/// count would be wrong for bursts).
pub(super) fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Unknown,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

pub(super) fn duration(ns: u64) -> prost_types::Duration {
    let (seconds, nanos) = floodgate_common::unit::to_parts(ns);
    prost_types::Duration { seconds, nanos }
}
