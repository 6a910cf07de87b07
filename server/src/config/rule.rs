//! One `rate_limit` as written, checked into a [`Rule`]: units, limits, our algorithms, and
//! the reference's `replaces`. Every error names the field.

use super::wire::{self, AlgorithmName};
use super::{ConfigError, Rule, Supported, MAX_CONCURRENCY, MAX_LOG_LIMIT};
use crate::algorithm::{Algorithm, Limit, Unit, Window, MAX_WINDOW_SECONDS};
use std::num::{NonZeroU16, NonZeroU32};
use std::path::Path;
use std::sync::Arc;

/// What a rule takes from its descriptor rather than from its `rate_limit`.
#[derive(Debug, Default)]
pub(super) struct FromDescriptor {
    /// `shadow_mode`.
    pub shadow: bool,
    /// `quota_mode`.
    pub quota_mode: bool,
    /// `metadata`, converted.
    pub metadata: Option<Arc<prost_types::Struct>>,
    /// The per-limit series name, when `detailed_metric` or `value_to_metric` asks for one.
    pub metric: Option<Arc<str>>,
    /// The reference's stat key of the descriptor (see [`Rule::stats_key`]).
    pub stats_key: Arc<str>,
    /// The algorithms the store can enforce (`None`: all).
    pub supported: Option<Supported>,
}

/// Makes the error of a field below the `rate_limit` being checked.
type FieldError<'a> = &'a dyn Fn(String, &str) -> ConfigError;

/// Checks the `rate_limit` at `at` (e.g. `descriptors[0].rate_limit`).
pub(super) fn rule(
    file: &Path,
    at: &str,
    r: wire::RateLimit,
    from: FromDescriptor,
) -> Result<Rule, ConfigError> {
    let err =
        |field: String, message: &str| ConfigError::new(file, format!("{at}.{field}"), message);
    let name: Option<Arc<str>> = r.name.filter(|n| !n.is_empty()).map(Arc::from);
    let replaces = replaces(&err, name.as_deref(), r.replaces)?;
    let rule = |limit: Option<Limit>, blocked: Option<Window>| Rule {
        name,
        limit,
        shadow: from.shadow,
        blocked,
        quota_mode: from.quota_mode,
        replaces: replaces.into(),
        metadata: from.metadata,
        metric: from.metric,
        stats_key: from.stats_key,
        quota: None,
    };
    if r.unlimited {
        // As the reference: a unit next to unlimited is refused; a requests_per_unit
        // alone is accepted and means nothing.
        let extra = [
            (r.unit.is_some(), "unit"),
            (r.unit_multiplier.is_some(), "unit_multiplier"),
            (r.algorithm.is_some(), "algorithm"),
            (r.burst.is_some(), "burst"),
        ];
        if let Some((_, field)) = extra.iter().find(|(set, _)| *set) {
            return Err(err(
                (*field).to_owned(),
                "cannot be combined with unlimited: true",
            ));
        }
        return Ok(rule(None, None));
    }
    let unit = match r.unit.as_deref() {
        None => return Err(err("unit".into(), "is required")),
        Some(u) => unit(u).ok_or_else(|| {
            err(
                "unit".into(),
                &format!(
                    "unknown unit {u:?}, expected second, minute, hour, day, week, month or year"
                ),
            )
        })?,
    };
    let window = window(unit, r.unit_multiplier).map_err(|m| err("unit_multiplier".into(), &m))?;
    let algorithm_name = r.algorithm.unwrap_or(AlgorithmName::FixedWindow);
    if r.burst.is_some() && algorithm_name != AlgorithmName::TokenBucket {
        return Err(err(
            "burst".into(),
            "only applies to algorithm: token_bucket",
        ));
    }
    // As the reference: 0, or no requests_per_unit at all, blocks every request. The
    // algorithm (and its burst) is kept in the file but has nothing to count.
    let Some(requests_per_unit) = r.requests_per_unit.and_then(NonZeroU32::new) else {
        if r.burst == Some(0) {
            return Err(err("burst".into(), "must be greater than 0"));
        }
        return Ok(rule(None, Some(window)));
    };
    let limit = Limit {
        requests_per_unit,
        unit,
        unit_multiplier: window.multiplier,
        algorithm: algorithm(&err, algorithm_name, requests_per_unit, r.burst)?,
    };
    if let Some(s) = from.supported {
        supported(&err, s, limit.algorithm)?;
    }
    Ok(rule(Some(limit), None))
}

/// The names a limit called `name` replaces.
fn replaces(
    err: FieldError<'_>,
    name: Option<&str>,
    entries: Vec<wire::Replaces>,
) -> Result<Vec<Arc<str>>, ConfigError> {
    let mut replaces = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let field = format!("replaces[{i}].name");
        match entry.name.filter(|n| !n.is_empty()) {
            // The reference's two errors: an empty entry, and a limit replacing itself.
            None => return Err(err(field, "is required and must not be empty")),
            Some(n) if name == Some(n.as_str()) => {
                return Err(err(field, "a limit cannot replace itself (its own name)"))
            }
            Some(n) => replaces.push(Arc::from(n)),
        }
    }
    Ok(replaces)
}

/// Refuses `algorithm` unless the store in use (`--store`) can enforce it.
fn supported(err: FieldError<'_>, s: Supported, algorithm: Algorithm) -> Result<(), ConfigError> {
    let name = algorithm.name();
    if s.algorithms.contains(&name) {
        return Ok(());
    }
    Err(err(
        "algorithm".into(),
        &format!(
            "{name} is not supported by the {} store, which supports {}",
            s.store,
            s.algorithms.join(" and ")
        ),
    ))
}

/// The algorithm `name` names for a limit of `requests_per_unit`, with its `burst`.
fn algorithm(
    err: FieldError<'_>,
    name: AlgorithmName,
    requests_per_unit: NonZeroU32,
    burst: Option<u32>,
) -> Result<Algorithm, ConfigError> {
    Ok(match name {
        AlgorithmName::FixedWindow => Algorithm::FixedWindow,
        AlgorithmName::SlidingWindowCounter => Algorithm::SlidingWindowCounter,
        AlgorithmName::Concurrency => {
            if requests_per_unit.get() > MAX_CONCURRENCY {
                return Err(err(
                    "requests_per_unit".into(),
                    &format!(
                        "concurrency reads every hold on each call: at most {MAX_CONCURRENCY} in flight"
                    ),
                ));
            }
            Algorithm::Concurrency
        }
        AlgorithmName::SlidingWindowLog => {
            if requests_per_unit.get() > MAX_LOG_LIMIT {
                return Err(err(
                    "requests_per_unit".into(),
                    &format!(
                        "sliding_window_log stores every request: at most {MAX_LOG_LIMIT} per unit \
                         (use sliding_window_counter for larger limits)"
                    ),
                ));
            }
            Algorithm::SlidingWindowLog
        }
        AlgorithmName::TokenBucket => {
            let burst = match burst {
                None => requests_per_unit,
                Some(b) => NonZeroU32::new(b)
                    .ok_or_else(|| err("burst".into(), "must be greater than 0"))?,
            };
            Algorithm::TokenBucket { burst }
        }
    })
}

/// The window of `multiplier` (absent: 1) `unit`s: at least one unit, at most 65,535 of
/// them (a longer window is one in a longer unit), and at most [`MAX_WINDOW_SECONDS`].
fn window(unit: Unit, multiplier: Option<u32>) -> Result<Window, String> {
    let m = multiplier.unwrap_or(1);
    if m == 0 {
        return Err("must be at least 1 (a window of whole units)".to_owned());
    }
    let Some(multiplier) = u16::try_from(m).ok().and_then(NonZeroU16::new) else {
        return Err(format!(
            "must be at most {}: give a window this long in a longer unit",
            u16::MAX
        ));
    };
    let window = Window { unit, multiplier };
    if window.seconds() > MAX_WINDOW_SECONDS {
        return Err(format!(
            "{m} {}s make a window of {} s, longer than the longest, ten years ({MAX_WINDOW_SECONDS} s)",
            unit.name(),
            window.seconds()
        ));
    }
    Ok(window)
}

/// Unit names, in any case as the reference service accepts them. A month is 30 days and
/// a year 365, as the reference counts them.
fn unit(name: &str) -> Option<Unit> {
    match name.to_ascii_lowercase().as_str() {
        "second" => Some(Unit::Second),
        "minute" => Some(Unit::Minute),
        "hour" => Some(Unit::Hour),
        "day" => Some(Unit::Day),
        "week" => Some(Unit::Week),
        "month" => Some(Unit::Month),
        "year" => Some(Unit::Year),
        _ => None,
    }
}
