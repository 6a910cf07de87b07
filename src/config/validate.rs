//! Turns the wire configuration into validated types, naming the field of each error.

use super::cost::{self, Cost, Costs};
use super::json::{Number, Rest};
use super::names::{header_name, rule_details, rule_name};
use super::wire;
use super::{
    field, Config, ConfigError, Entry, FailureMode, Limit, Match, RlsConfig, Rule, Source,
    DEFAULT_FAILURE_STATUS, DEFAULT_LEASE_SLOTS, DEFAULT_MAX_BUCKETS,
    DEFAULT_MAX_DESCRIPTOR_VALUE_BYTES, DEFAULT_MAX_GRANT_REQUESTS, DEFAULT_MAX_GRANT_VALID_MS,
    DEFAULT_OVER_LIMIT_CACHE_MAX_SECONDS, DEFAULT_OVER_LIMIT_CACHE_SLOTS, DEFAULT_RLS_TIMEOUT_MS,
    MAX_ENTRIES, MAX_LEASE_SLOTS, MAX_MAX_BUCKETS, MAX_MAX_DESCRIPTOR_VALUE_BYTES,
    MAX_MAX_GRANT_VALID_MS, MAX_OVER_LIMIT_CACHE_MAX_SECONDS, MAX_OVER_LIMIT_CACHE_SLOTS,
    MAX_RLS_TIMEOUT_MS, MAX_RULES,
};
use crate::bucket::{Quota, MAX_RATE_MICRO};
use std::num::NonZeroU32;

mod concurrency;
mod response;
use response::{response, status};

pub(super) fn config(wire: wire::Config) -> Result<Config, ConfigError> {
    if wire.rules.is_empty() {
        return Err(ConfigError::new("rules", "must contain at least one rule"));
    }
    if wire.rules.len() > MAX_RULES {
        return Err(ConfigError::new(
            "rules",
            format!("must contain at most {MAX_RULES} rules"),
        ));
    }
    let max_value = max_descriptor_value_bytes(wire.max_descriptor_value_bytes)?;
    let mut rules: Vec<Rule> = Vec::with_capacity(wire.rules.len());
    let mut costs = Costs::default();
    for (i, r) in wire.rules.into_iter().enumerate() {
        let rule = rule(&format!("rules[{i}]"), r, max_value, &mut costs)?;
        // A scan of the rules so far (at most MAX_RULES): a HashSet of the names brought
        // the standard library's hasher and a table of its own into the module (3 KB).
        if rules.iter().any(|r| r.name == rule.name) {
            return Err(ConfigError::new(
                format!("rules[{i}].name"),
                format!("duplicate rule name {:?}", rule.name),
            ));
        }
        rules.push(rule);
    }
    let first_global = rules.iter().position(|r| r.limit.is_asked());
    let rls = match (wire.rls, first_global) {
        (Some(r), Some(_)) => Some(rls(r)?),
        (None, None) => None,
        (Some(_), None) => {
            return Err(ConfigError::new(
                "rls",
                "no rule is `global`: remove `rls` or add a global rule",
            ))
        }
        (None, Some(i)) => {
            let field = match rules[i].limit {
                Limit::GlobalConcurrency => "concurrency.global",
                _ => "global",
            };
            return Err(ConfigError::new(
                format!("rules[{i}].{field}"),
                "needs the top-level `rls` section (the rate limit service to ask)",
            ));
        }
    };
    Ok(Config {
        rules,
        response: response(wire.response)?,
        max_buckets: max_buckets(wire.max_buckets)?,
        max_descriptor_value_bytes: max_value,
        failure_mode: failure_mode(wire.failure_mode),
        failure_status: match wire.failure_status {
            None => DEFAULT_FAILURE_STATUS,
            Some(s) => status("failure_status", s)?,
        },
        rls,
        json_paths: costs.paths,
        warnings: costs.warnings,
    })
}

fn failure_mode(mode: Option<wire::FailureMode>) -> FailureMode {
    match mode {
        None | Some(wire::FailureMode::Allow) => FailureMode::Allow,
        Some(wire::FailureMode::Deny) => FailureMode::Deny,
    }
}

fn rls(r: wire::Rls) -> Result<RlsConfig, ConfigError> {
    if r.cluster.is_empty() {
        return Err(ConfigError::new("rls.cluster", "must not be empty"));
    }
    if r.domain.is_empty() {
        return Err(ConfigError::new("rls.domain", "must not be empty"));
    }
    let timeout_ms = match r.timeout_ms {
        None => DEFAULT_RLS_TIMEOUT_MS,
        Some(0) => return Err(ConfigError::new("rls.timeout_ms", "must be at least 1")),
        Some(t) if t > u64::from(MAX_RLS_TIMEOUT_MS) => {
            return Err(ConfigError::new(
                "rls.timeout_ms",
                format!("must be at most {MAX_RLS_TIMEOUT_MS}"),
            ))
        }
        Some(t) => t as u32,
    };
    Ok(RlsConfig {
        cluster: r.cluster,
        domain: r.domain,
        timeout_ms,
        failure_mode: failure_mode(r.failure_mode),
        over_limit_cache_slots: over_limit_cache(r.cache_over_limit, r.over_limit_cache_slots)?,
        over_limit_cache_max_seconds: bounded(
            "rls.over_limit_cache_max_seconds",
            r.over_limit_cache_max_seconds,
            u64::from(DEFAULT_OVER_LIMIT_CACHE_MAX_SECONDS),
            u64::from(MAX_OVER_LIMIT_CACHE_MAX_SECONDS),
            "(one day)",
        )
        .map(|s| u32::try_from(s).unwrap_or(MAX_OVER_LIMIT_CACHE_MAX_SECONDS))?,
        lease_slots: slots(
            "rls.lease_slots",
            r.lease_slots,
            DEFAULT_LEASE_SLOTS,
            MAX_LEASE_SLOTS,
        )?,
        max_grant_requests: bounded(
            "rls.max_grant_requests",
            r.max_grant_requests,
            u64::from(DEFAULT_MAX_GRANT_REQUESTS),
            u64::from(u32::MAX),
            "",
        )
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))?,
        max_grant_valid_ms: bounded(
            "rls.max_grant_valid_ms",
            r.max_grant_valid_ms,
            u64::from(DEFAULT_MAX_GRANT_VALID_MS),
            u64::from(MAX_MAX_GRANT_VALID_MS),
            "(one day)",
        )
        .map(|n| u32::try_from(n).unwrap_or(MAX_MAX_GRANT_VALID_MS))?,
    })
}

/// The over-limit cache's size, or `None` when it is switched off.
fn over_limit_cache(
    on: Option<bool>,
    slots: Option<u64>,
) -> Result<Option<NonZeroU32>, ConfigError> {
    let n = self::slots(
        "rls.over_limit_cache_slots",
        slots,
        DEFAULT_OVER_LIMIT_CACHE_SLOTS,
        MAX_OVER_LIMIT_CACHE_SLOTS,
    )?;
    Ok(on.unwrap_or(true).then_some(n))
}

/// A whole number (field `at`): `default` when unset, 1 to `max`; `max_note` follows the
/// maximum in the error, saying what it is.
fn bounded(
    at: &str,
    n: Option<u64>,
    default: u64,
    max: u64,
    max_note: &str,
) -> Result<u64, ConfigError> {
    match n.unwrap_or(default) {
        0 => Err(ConfigError::new(at, "must be at least 1")),
        n if n > max => Err(ConfigError::new(
            at,
            format!("must be at most {max} {max_note}").trim_end(),
        )),
        n => Ok(n),
    }
}

/// A table size in shared data (field `at`): `default` when unset, 1 to `max`.
fn slots(at: &str, n: Option<u64>, default: u32, max: u32) -> Result<NonZeroU32, ConfigError> {
    let n = n.unwrap_or(u64::from(default));
    if n > u64::from(max) {
        return Err(ConfigError::new(at, format!("must be at most {max}")));
    }
    u32::try_from(n)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or_else(|| ConfigError::new(at, "must be at least 1"))
}

fn rule(at: &str, r: wire::Rule, max_value: usize, costs: &mut Costs) -> Result<Rule, ConfigError> {
    let name = rule_name(&field(at, "name"), r.name)?;
    let matcher = match r.matcher {
        None => Match::default(),
        Some(m) => matcher(&field(at, "match"), m)?,
    };
    if r.descriptors.is_empty() {
        return Err(ConfigError::new(
            field(at, "descriptors"),
            "must contain at least one entry",
        ));
    }
    if r.descriptors.len() > MAX_ENTRIES {
        return Err(ConfigError::new(
            field(at, "descriptors"),
            format!("must contain at most {MAX_ENTRIES} entries"),
        ));
    }
    let entries = r
        .descriptors
        .into_iter()
        .enumerate()
        .map(|(j, e)| entry(&format!("{at}.descriptors[{j}]"), e, max_value))
        .collect::<Result<Vec<_>, _>>()?;
    let limit = match (r.local, r.global, r.concurrency) {
        (Some(local), None, None) => Limit::Local(quota(&field(at, "local"), local)?),
        (None, Some(global), None) => Limit::Global {
            fallback: match global.fallback {
                None => None,
                Some(fallback) => Some(quota(&field(at, "global.fallback"), fallback)?),
            },
            lease: global.quota.unwrap_or(true),
        },
        (None, None, Some(c)) => {
            concurrency::limit(&field(at, "concurrency"), c)?
        }
        _ => {
            return Err(ConfigError::new(
                at,
                "exactly one of `local` (a token bucket in this Envoy), `global` (the rate limit service) or `concurrency` (requests in flight) is required",
            ))
        }
    };
    let (cost_header, response_cost) = match r.cost {
        None => (None, None),
        Some(c) => match cost::cost(&field(at, "cost"), c, &limit, costs)? {
            Cost::RequestHeader(header) => (Some(header), None),
            Cost::Response(response) => (None, Some(response)),
        },
    };
    Ok(Rule {
        details: rule_details(&name),
        name,
        matcher,
        entries,
        limit,
        cost_header,
        response_cost,
        shadow: r.shadow.unwrap_or(false),
    })
}

fn matcher(at: &str, m: wire::Match) -> Result<Match, ConfigError> {
    if let Some(prefix) = &m.path_prefix {
        if !prefix.starts_with('/') {
            return Err(ConfigError::new(
                field(at, "path_prefix"),
                "must start with `/`",
            ));
        }
    }
    let methods = match m.methods {
        None => Vec::new(),
        Some(methods) if methods.is_empty() => {
            return Err(ConfigError::new(
                field(at, "methods"),
                "must not be empty (leave it out to match every method)",
            ))
        }
        Some(methods) => methods
            .into_iter()
            .enumerate()
            .map(|(k, method)| {
                if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                    Err(ConfigError::new(
                        format!("{at}.methods[{k}]"),
                        format!("{method:?} is not an HTTP method"),
                    ))
                } else {
                    Ok(method.to_ascii_uppercase())
                }
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Match {
        path_prefix: m.path_prefix,
        methods,
    })
}

fn entry(at: &str, e: wire::Entry, max_value: usize) -> Result<Entry, ConfigError> {
    if e.key.is_empty() {
        return Err(ConfigError::new(field(at, "key"), "must not be empty"));
    }
    let source = match (e.header, e.value, e.source) {
        (Some(header), None, None) => Source::Header(header_name(&field(at, "header"), header)?),
        (None, Some(value), None) => {
            if value.is_empty() {
                return Err(ConfigError::new(field(at, "value"), "must not be empty"));
            }
            if value.len() > max_value {
                return Err(ConfigError::new(
                    field(at, "value"),
                    format!("must be at most {max_value} bytes (`max_descriptor_value_bytes`)"),
                ));
            }
            Source::Value(value)
        }
        (None, None, Some(source)) => match source {
            wire::Source::Path => Source::Path,
            wire::Source::Method => Source::Method,
            wire::Source::Authority => Source::Authority,
            wire::Source::RemoteAddress => Source::RemoteAddress,
        },
        _ => {
            return Err(ConfigError::new(
                at,
                "exactly one of `header`, `value` or `source` is required",
            ))
        }
    };
    Ok(Entry { key: e.key, source })
}

fn quota(at: &str, local: wire::Local) -> Result<Quota, ConfigError> {
    let capacity = match u32::try_from(local.capacity) {
        Ok(0) => {
            return Err(ConfigError::new(
                field(at, "capacity"),
                "must be at least 1",
            ))
        }
        Ok(c) => c,
        Err(_) => {
            return Err(ConfigError::new(
                field(at, "capacity"),
                format!("must be at most {}", u32::MAX),
            ))
        }
    };
    let rate_micro = rate_micro(&field(at, "refill_per_second"), &local.refill_per_second)?;
    Quota::new(capacity, rate_micro)
        .ok_or_else(|| ConfigError::new(at, "is not a valid token bucket"))
}

/// A rate in tokens per second as whole millionths, refusing what would be rounded.
fn rate_micro(at: &str, rate: &Number) -> Result<u64, ConfigError> {
    let m = rate.millionths();
    if m.negative {
        return Err(ConfigError::new(at, "must not be negative"));
    }
    let max = MAX_RATE_MICRO / 1_000_000;
    match m.whole {
        Some(w) if w < MAX_RATE_MICRO || (w == MAX_RATE_MICRO && m.rest == Rest::Zero) => {}
        _ => return Err(ConfigError::new(at, format!("must be at most {max}"))),
    }
    match (m.whole, m.rest) {
        (Some(w), Rest::Zero) => Ok(w),
        _ => Err(ConfigError::new(at, "must have at most 6 decimal places")),
    }
}

fn max_buckets(n: Option<u64>) -> Result<NonZeroU32, ConfigError> {
    let n = n.unwrap_or(u64::from(DEFAULT_MAX_BUCKETS));
    if n > u64::from(MAX_MAX_BUCKETS) {
        return Err(ConfigError::new(
            "max_buckets",
            format!("must be at most {MAX_MAX_BUCKETS}"),
        ));
    }
    u32::try_from(n)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or_else(|| ConfigError::new("max_buckets", "must be at least 1"))
}

fn max_descriptor_value_bytes(n: Option<u64>) -> Result<usize, ConfigError> {
    const AT: &str = "max_descriptor_value_bytes";
    match n {
        None => Ok(DEFAULT_MAX_DESCRIPTOR_VALUE_BYTES),
        Some(0) => Err(ConfigError::new(AT, "must be at least 1")),
        Some(n) if n > MAX_MAX_DESCRIPTOR_VALUE_BYTES as u64 => Err(ConfigError::new(
            AT,
            format!("must be at most {MAX_MAX_DESCRIPTOR_VALUE_BYTES}"),
        )),
        Some(n) => Ok(n as usize),
    }
}
