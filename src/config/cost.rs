//! A rule's cost: the validated types and their checks.
//!
//! A cost comes from a request header (known before the upstream is called), or from the
//! response (known only once it is done: an LLM API's tokens, in a header, a JSON body or
//! the events of a server-sent-events stream). See the README's "Limiting LLM APIs by
//! tokens" for how a response cost is admitted and charged.

use super::validate::header_name;
use super::wire;
use super::{ConfigError, Limit};

/// The most JSON paths one response cost may sum.
pub const MAX_JSON_PATHS: usize = 4;
/// The most segments (keys) in one JSON path.
pub const MAX_PATH_SEGMENTS: usize = 8;
/// The longest key in a JSON path.
pub const MAX_SEGMENT_BYTES: usize = 64;
/// Bytes kept of one SSE event or of a JSON body when `max_scan_bytes` is not set: an
/// LLM API's stream events are well under a kilobyte, and its JSON answers a few
/// kilobytes to tens of kilobytes.
pub const DEFAULT_MAX_SCAN_BYTES: u32 = 65_536;
/// The largest accepted `max_scan_bytes` (it bounds the memory of one response).
pub const MAX_MAX_SCAN_BYTES: u32 = 1_048_576;
/// Tokens a request needs to be admitted when `estimate` is not set.
pub const DEFAULT_ESTIMATE: u32 = 1;
/// Tokens charged for a response that reports no usage when `fallback` is not set.
pub const DEFAULT_FALLBACK: u32 = 1;

/// Where a rule's cost comes from, once validated (one of the two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cost {
    /// The value of a request header (absent: 1).
    RequestHeader(String),
    /// What the response reports, charged when it is done.
    Response(ResponseCost),
}

/// A cost the response reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseCost {
    /// Where the response reports it.
    pub source: UsageSource,
    /// Tokens a request needs to be admitted; they are held until the response is done,
    /// then the difference to the real cost is charged or given back (default 1).
    pub estimate: u32,
    /// The cost charged when the response reports none, is not readable, or is cut off
    /// before it reports any (default 1; 0 charges nothing).
    pub fallback: u32,
    /// The most bytes kept of one SSE event or of a JSON body (default 65 536); a longer
    /// one is skipped and counted.
    pub max_scan_bytes: u32,
}

/// Where a response reports its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageSource {
    /// A response header or trailer, lower-case.
    Header(String),
    /// Numbers at these paths of a JSON body or of each SSE event's data, summed. For
    /// each path the last value seen in the response counts.
    Json(Vec<JsonPath>),
}

/// A dotted path to a number in a JSON document, e.g. `usage.total_tokens`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    /// The keys, outermost first.
    pub keys: Vec<String>,
}

impl JsonPath {
    /// The path as configured.
    pub fn dotted(&self) -> String {
        self.keys.join(".")
    }
}

impl super::Config {
    /// Refuses a configuration with a response cost, for a build of the module that does
    /// not read responses (the plain `floodgate.wasm`, which exports no body callback so
    /// that other configurations pay nothing for them).
    pub fn refuse_response_costs(&self) -> Result<(), ConfigError> {
        match self.rules.iter().position(|r| r.response_cost.is_some()) {
            None => Ok(()),
            Some(i) => Err(ConfigError::new(
                format!("rules[{i}].cost.response"),
                "needs floodgate-llm.wasm, the build of the filter that reads responses (this one does not)",
            )),
        }
    }
}

/// Validates a rule's `cost` (`at` is its path, e.g. `rules[0].cost`). `limit` bounds
/// the estimate: a request needing more tokens than the bucket holds would never pass.
pub(super) fn cost(at: &str, c: wire::Cost, limit: &Limit) -> Result<Cost, ConfigError> {
    match (c.header, c.response) {
        (Some(header), None) => Ok(Cost::RequestHeader(header_name(
            &format!("{at}.header"),
            header,
        )?)),
        (None, Some(response)) => {
            // Global rules too: a check-only call at request time (or the estimate),
            // the charge at stream end (see `limiter::charge`).
            Ok(Cost::Response(response_cost(
                &format!("{at}.response"),
                response, limit,
            )?))
        }
        _ => Err(ConfigError::new(
            at,
            "exactly one of `header` (a request header) or `response` (what the response reports) is required",
        )),
    }
}

fn response_cost(
    at: &str,
    r: wire::ResponseCost,
    limit: &Limit,
) -> Result<ResponseCost, ConfigError> {
    let source = match (r.header, r.json) {
        (Some(header), None) => UsageSource::Header(header_name(&format!("{at}.header"), header)?),
        (None, Some(paths)) => UsageSource::Json(json_paths(&format!("{at}.json"), paths.0)?),
        _ => {
            return Err(ConfigError::new(
                at,
                "exactly one of `header` (a response header or trailer) or `json` (paths in a JSON body or SSE events) is required",
            ))
        }
    };
    let capacity = match limit {
        Limit::Local(quota) => quota.capacity(),
        Limit::Global { fallback, .. } => fallback.map_or(u32::MAX, |q| q.capacity()),
    };
    let estimate = match r.estimate {
        None => DEFAULT_ESTIMATE,
        Some(0) => {
            return Err(ConfigError::new(
                format!("{at}.estimate"),
                "must be at least 1",
            ))
        }
        Some(e) if e > u64::from(capacity) => {
            return Err(ConfigError::new(
                format!("{at}.estimate"),
                format!("must be at most the bucket's capacity ({capacity}): a request needing more would never be admitted"),
            ))
        }
        Some(e) => e as u32,
    };
    let fallback = match r.fallback {
        None => DEFAULT_FALLBACK,
        Some(f) => u32::try_from(f).map_err(|_| {
            ConfigError::new(
                format!("{at}.fallback"),
                format!("must be at most {}", u32::MAX),
            )
        })?,
    };
    let max_scan_bytes = match r.max_scan_bytes {
        None => DEFAULT_MAX_SCAN_BYTES,
        Some(0) => {
            return Err(ConfigError::new(
                format!("{at}.max_scan_bytes"),
                "must be at least 1",
            ))
        }
        Some(n) if n > u64::from(MAX_MAX_SCAN_BYTES) => {
            return Err(ConfigError::new(
                format!("{at}.max_scan_bytes"),
                format!("must be at most {MAX_MAX_SCAN_BYTES}"),
            ))
        }
        Some(n) => n as u32,
    };
    Ok(ResponseCost {
        source,
        estimate,
        fallback,
        max_scan_bytes,
    })
}

fn json_paths(at: &str, paths: Vec<String>) -> Result<Vec<JsonPath>, ConfigError> {
    if paths.is_empty() {
        return Err(ConfigError::new(at, "must contain at least one path"));
    }
    if paths.len() > MAX_JSON_PATHS {
        return Err(ConfigError::new(
            at,
            format!("must contain at most {MAX_JSON_PATHS} paths"),
        ));
    }
    let single = paths.len() == 1;
    let mut out: Vec<JsonPath> = Vec::with_capacity(paths.len());
    for (k, path) in paths.into_iter().enumerate() {
        let here = if single {
            at.to_string()
        } else {
            format!("{at}[{k}]")
        };
        let parsed = json_path(&here, &path)?;
        if out.contains(&parsed) {
            return Err(ConfigError::new(
                here,
                format!("duplicate path {path:?} (it would be counted twice)"),
            ));
        }
        out.push(parsed);
    }
    Ok(out)
}

fn json_path(at: &str, path: &str) -> Result<JsonPath, ConfigError> {
    let keys: Vec<String> = path.split('.').map(str::to_string).collect();
    if keys.len() > MAX_PATH_SEGMENTS {
        return Err(ConfigError::new(
            at,
            format!("{path:?} has more than {MAX_PATH_SEGMENTS} keys"),
        ));
    }
    for key in &keys {
        let valid = !key.is_empty()
            && key.len() <= MAX_SEGMENT_BYTES
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ConfigError::new(
                at,
                format!("{path:?} is not a dotted path of keys (letters, digits, `_`, `-`; at most {MAX_SEGMENT_BYTES} each), e.g. \"usage.total_tokens\""),
            ));
        }
    }
    Ok(JsonPath { keys })
}
