//! What one request asks of the store, worked out from the configuration and the request
//! alone: which limit applies to each descriptor, and the counter checks to make.

use super::holds::HoldCall;
use super::quota_header::Asked;
use crate::algorithm::{Algorithm, Limit, Unit, Window};
use crate::config::{Domain, Rule, RuleKind};
use crate::proto::rls::RateLimitRequest;
use crate::proto::RateLimitDescriptor;
use crate::store::{Check, CounterKey};
use std::num::{NonZeroU16, NonZeroU32};
use tonic::Status;

/// What applies to one request descriptor.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Applied<'c> {
    /// Nothing matched (or the domain is unknown): OK, no limit.
    Nothing,
    /// A configured `unlimited: true`.
    Unlimited,
    /// A configured limit, decided by the store. For a blocked rule (`requests_per_unit:
    /// 0`) the limit carries only its unit (see [`block_limit`]) and the store's check is
    /// `blocked`.
    Configured(&'c Rule, Limit),
    /// The descriptor's own `limit` override, decided by the store. It replaces whatever
    /// the configuration says for the descriptor: no name, no shadow mode, and no quota
    /// grant (a configured `quota` belongs to the configured limit, not to this one).
    Overridden(Limit),
    /// An override of `requests_per_unit: 0`: every request is over, no store call.
    Blocked(Unit),
}

impl Applied<'_> {
    /// The limit the store decides, if any.
    pub(super) fn limit(&self) -> Option<Limit> {
        match self {
            Applied::Configured(_, l) | Applied::Overridden(l) => Some(*l),
            _ => None,
        }
    }

    /// Whether a store decision over this limit answers OK anyway.
    pub(super) fn shadow(&self) -> bool {
        matches!(self, Applied::Configured(r, _) if r.shadow)
    }

    /// Whether this is a configured quota-mode limit (over only with every other one).
    pub(super) fn quota_mode(&self) -> bool {
        matches!(self, Applied::Configured(r, _) if r.quota_mode)
    }

    /// Whether this is a configured `requests_per_unit: 0` (always over, no counter).
    pub(super) fn configured_block(&self) -> bool {
        matches!(self, Applied::Configured(r, _) if r.blocked.is_some() && r.limit.is_none())
    }
}

/// One request's plan.
#[derive(Debug)]
pub(super) struct Plan<'c> {
    /// What applies to each request descriptor, in request order.
    pub applied: Vec<Applied<'c>>,
    /// One counter check per descriptor the store decides, in request order.
    pub checks: Vec<Check>,
}

/// Matches every descriptor of `req` against `domain` (`None`: unconfigured); the
/// descriptors in `asked` get their configured limit's quota lease if it has one and is
/// enforced. Concurrency descriptors take or release holds as `hold` says (one id for the
/// whole call, the server's own when the caller sent none; `None`, a charge: no hold, so
/// check-only there); a release checks nothing else.
/// `Err` is an INVALID_ARGUMENT for an override no limit can be made of.
pub(super) fn plan<'c>(
    domain: Option<&'c Domain>,
    req: &RateLimitRequest,
    asked: Asked,
    hold: Option<HoldCall>,
) -> Result<Plan<'c>, Status> {
    let Some(dom) = domain else {
        // Quirk: an unknown domain limits nothing, not even a descriptor's own override
        // (the reference looks the domain up first).
        return Ok(Plan {
            applied: vec![Applied::Nothing; req.descriptors.len()],
            checks: Vec::new(),
        });
    };
    // Quirk: a request `hits_addend` of 0 (the proto3 default, what Envoy's native filter
    // sends) means 1.
    let request_hits = u64::from(req.hits_addend.max(1));
    let replaced = replaced_names(dom, req);
    let mut plan = Plan {
        applied: Vec::with_capacity(req.descriptors.len()),
        checks: Vec::new(),
    };
    let mut op = None;
    for (i, d) in req.descriptors.iter().enumerate() {
        let (mut applied, key) = applies(dom, i, d, &replaced)?;
        let concurrency = applied
            .limit()
            .is_some_and(|l| l.algorithm == Algorithm::Concurrency);
        if hold.is_some_and(|h| h.is_release()) && !concurrency {
            // A release decides and counts nothing but holds: answered OK, no limit.
            applied = Applied::Nothing;
        }
        if let (Some(limit), Some(key)) = (applied.limit(), key) {
            let hits = d.hits_addend.unwrap_or(request_hits);
            let mut c = check(&applied, key, limit, hits, asked.contains(i));
            if let (true, Some(hold)) = (concurrency, hold) {
                c.hold = Some(*op.get_or_insert_with(|| hold.op()));
            }
            plan.checks.push(c);
        }
        plan.applied.push(applied);
    }
    Ok(plan)
}

/// What applies to descriptor `i` of a request in `dom`, and the counter it counts on
/// when a limit applies. This is the one place counter keys are made: a configured
/// limit's from the entries as its match counts them (a `share_threshold` wildcard as
/// written in place of the value), an override's from the entries and the override.
fn applies<'c>(
    dom: &'c Domain,
    i: usize,
    d: &RateLimitDescriptor,
    replaced: &[&str],
) -> Result<(Applied<'c>, Option<CounterKey>), Status> {
    let entries = || d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
    if let Some(a) = overriding(i, d)? {
        let key = a
            .limit()
            .map(|limit| CounterKey::overridden(&dom.name, entries(), &limit));
        return Ok((a, key));
    }
    let Some(found) = dom.lookup(entries()) else {
        return Ok((Applied::Nothing, None));
    };
    let applied = match found.rule.kind() {
        RuleKind::Unlimited => Applied::Unlimited,
        // The reference's `replaces`: a named limit that another matched limit replaces
        // is dropped (answered as no match); `unlimited` stays unlimited.
        _ if found
            .rule
            .name
            .as_deref()
            .is_some_and(|n| replaced.contains(&n)) =>
        {
            Applied::Nothing
        }
        RuleKind::Limited(l) => Applied::Configured(found.rule, l),
        RuleKind::Blocked(window) => Applied::Configured(found.rule, block_limit(window)),
    };
    let key = applied
        .limit()
        .map(|_| CounterKey::new(&dom.name, found.counted(entries())));
    Ok((applied, key))
}

/// The store's check of a descriptor `a` applies `limit` to, counting on `key`: `hits`
/// as the request says, a lease when `asked` and the limit may grant one.
fn check(a: &Applied<'_>, key: CounterKey, limit: Limit, hits: u64, asked: bool) -> Check {
    Check {
        key,
        limit,
        // Quirk: a descriptor's own `hits_addend` (a UInt64Value, so "unset" is
        // distinguishable) overrides the request's, and there 0 means check-only, as
        // envoyproxy/ratelimit defines it: decided (OK when one hit would fit), remaining
        // reported as it stands, nothing counted.
        hits,
        shadow: a.shadow(),
        // Only a configured, enforced, counting limit grants: a shadow limit must not take
        // hits from anyone, a quota-mode one may be over while the request is admitted, a
        // blocked one has no counter, and an override has no `quota` of its own.
        quota: match a {
            Applied::Configured(r, l)
                if !r.shadow
                    && !r.quota_mode
                    && !a.configured_block()
                    && l.algorithm != Algorithm::Concurrency
                    && asked =>
            {
                r.quota
            }
            _ => None,
        },
        quota_mode: a.quota_mode(),
        blocked: a.configured_block(),
        hold: None,
    }
}

/// What a blocked check carries: `requests_per_unit: 0` is no [`Limit`], and the store
/// reads only the window of a blocked check (see [`Check::blocked`]).
fn block_limit(window: Window) -> Limit {
    Limit {
        requests_per_unit: NonZeroU32::MIN,
        unit: window.unit,
        unit_multiplier: window.multiplier,
        algorithm: Algorithm::FixedWindow,
    }
}

/// The names every configured limit a descriptor matched replaces (a descriptor with its
/// own `limit` override matches nothing configured): a first matching pass, only in a
/// domain where some limit has `replaces`.
fn replaced_names<'c>(dom: &'c Domain, req: &RateLimitRequest) -> Vec<&'c str> {
    if !dom.uses_replaces() {
        // The usual case: no extra matching pass, no allocation.
        return Vec::new();
    }
    req.descriptors
        .iter()
        .filter(|d| d.limit.is_none())
        .filter_map(|d| dom.find(d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))))
        .flat_map(|r| r.replaces.iter().map(|n| &**n))
        .collect()
}

/// Quirk: a descriptor's `limit` (Envoy's `limit.override` from dynamic metadata) is used
/// instead of the configuration, even where the configuration has no entry for the
/// descriptor, as the reference does. It is a fixed window, the reference's only
/// algorithm; `requests_per_unit: 0` blocks.
fn overriding(i: usize, d: &RateLimitDescriptor) -> Result<Option<Applied<'static>>, Status> {
    let Some(o) = &d.limit else {
        return Ok(None);
    };
    let unit = override_unit(o.unit).ok_or_else(|| {
        Status::invalid_argument(format!(
            "descriptors[{i}].limit.unit: {} is not a unit (1 second, 2 minute, 3 hour, 4 day, 5 month, 6 year, 7 week)",
            o.unit
        ))
    })?;
    Ok(Some(match NonZeroU32::new(o.requests_per_unit) {
        None => Applied::Blocked(unit),
        // An override's window is one unit: its message has no multiplier.
        Some(requests_per_unit) => Applied::Overridden(Limit {
            requests_per_unit,
            unit,
            unit_multiplier: NonZeroU16::MIN,
            algorithm: Algorithm::FixedWindow,
        }),
    }))
}

/// `envoy.type.v3.RateLimitUnit` on the wire. 0 (unknown) names no period. A month is 30
/// days and a year 365, as in the configuration.
fn override_unit(unit: i32) -> Option<Unit> {
    match unit {
        1 => Some(Unit::Second),
        2 => Some(Unit::Minute),
        3 => Some(Unit::Hour),
        4 => Some(Unit::Day),
        5 => Some(Unit::Month),
        6 => Some(Unit::Year),
        7 => Some(Unit::Week),
        _ => None,
    }
}
