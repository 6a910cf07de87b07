//! A concurrency rule's limit: `"concurrency": {"max": N, "max_duration_seconds": S}` in
//! this Envoy, or `"concurrency": {"global": {}}` across the fleet.

use crate::config::{
    wire, Concurrency, ConfigError, Limit, DEFAULT_MAX_DURATION_SECONDS, MAX_CONCURRENCY,
    MAX_MAX_DURATION_SECONDS,
};

/// Validates `c` (`at` is its path, e.g. `rules[0].concurrency`): the per-Envoy form,
/// or the fleet-wide one (`"global": {}`), whose limit and hold deadline are the rate
/// limit service's (its YAML), so that the two can never disagree: it takes neither `max`
/// nor `max_duration_seconds`.
pub(super) fn limit(at: &str, c: wire::Concurrency) -> Result<Limit, ConfigError> {
    if c.global {
        let fleet = "the fleet-wide form's limit and hold deadline are the rate limit service's (its `concurrency` limit's `requests_per_unit` and `unit`): leave";
        if c.max.is_some() {
            return Err(ConfigError::new(
                format!("{at}.max"),
                format!("{fleet} `max` out"),
            ));
        }
        if c.max_duration_seconds.is_some() {
            return Err(ConfigError::new(
                format!("{at}.max_duration_seconds"),
                format!("{fleet} `max_duration_seconds` out"),
            ));
        }
        return Ok(Limit::GlobalConcurrency);
    }
    let max = match c.max {
        None => return Err(ConfigError::new(at, "missing field `max`")),
        Some(0) => return Err(ConfigError::new(format!("{at}.max"), "must be at least 1")),
        Some(m) if m > u64::from(MAX_CONCURRENCY) => {
            return Err(ConfigError::new(
                format!("{at}.max"),
                format!("must be at most {MAX_CONCURRENCY}"),
            ))
        }
        Some(m) => m as u32,
    };
    let seconds = match c.max_duration_seconds {
        None => DEFAULT_MAX_DURATION_SECONDS,
        Some(0) => {
            return Err(ConfigError::new(
                format!("{at}.max_duration_seconds"),
                "must be at least 1",
            ))
        }
        Some(s) if s > u64::from(MAX_MAX_DURATION_SECONDS) => {
            return Err(ConfigError::new(
                format!("{at}.max_duration_seconds"),
                format!("must be at most {MAX_MAX_DURATION_SECONDS} (one day)"),
            ))
        }
        Some(s) => s as u32,
    };
    Ok(Limit::Concurrency(Concurrency {
        max,
        max_duration_ms: u64::from(seconds) * 1000,
    }))
}

#[cfg(test)]
mod tests;
