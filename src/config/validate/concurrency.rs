//! A concurrency rule's limit: `"concurrency": {"max": N, "max_duration_seconds": S}`.

use crate::config::{
    wire, Concurrency, ConfigError, DEFAULT_MAX_DURATION_SECONDS, MAX_CONCURRENCY,
    MAX_MAX_DURATION_SECONDS,
};

/// Validates `c` (`at` is its path, e.g. `rules[0].concurrency`).
pub(super) fn limit(at: &str, c: wire::Concurrency) -> Result<Concurrency, ConfigError> {
    if c.global {
        return Err(ConfigError::new(
            format!("{at}.global"),
            "the fleet-wide form is not supported yet: leave `global` out to limit requests in flight in this Envoy",
        ));
    }
    let max = match c.max {
        0 => return Err(ConfigError::new(format!("{at}.max"), "must be at least 1")),
        m if m > u64::from(MAX_CONCURRENCY) => {
            return Err(ConfigError::new(
                format!("{at}.max"),
                format!("must be at most {MAX_CONCURRENCY}"),
            ))
        }
        m => m as u32,
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
    Ok(Concurrency {
        max,
        max_duration_ms: u64::from(seconds) * 1000,
    })
}

#[cfg(test)]
mod tests;
