//! How one descriptor's status is written on the wire: the RLS v3 `DescriptorStatus` of a
//! decided, unlimited or blocked descriptor, and the protobuf times and units in it.

use crate::algorithm::{Decision, Limit, Unit, Window, NANOS_PER_SECOND};
use crate::proto::rls::rate_limit_response::{
    quota::ExpirationSpecifier, rate_limit::Unit as PbUnit, Code, DescriptorStatus, Quota,
    RateLimit,
};

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
    prost_types::Timestamp {
        seconds: i64::try_from(ns / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        nanos: i32::try_from(ns % NANOS_PER_SECOND).unwrap_or(0),
    }
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
    prost_types::Duration {
        seconds: i64::try_from(ns / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        nanos: i32::try_from(ns % NANOS_PER_SECOND).unwrap_or(0),
    }
}
