//! A rule's cost: the validated types and their checks.
//!
//! A cost comes from a request header (known before the upstream is called), or from the
//! response (known only once it is done: an LLM API's tokens, in a header, a JSON body or
//! the events of a server-sent-events stream). See `docs/llm-token-budgets.md`
//! for how a response cost is admitted and charged.

use super::names::header_name;
use super::wire;
use super::{field, ConfigError, Limit};

/// The most JSON paths one response cost may sum.
pub const MAX_JSON_PATHS: usize = 4;
/// The most distinct JSON paths all rules together may read: a response is scanned once
/// for every path its rules read, each path one bit of the scanner's state (a `u64`,
/// [`crate::usage::json::MAX_TARGETS`]).
pub const MAX_DISTINCT_JSON_PATHS: usize = 64;
/// The most segments (keys) in one JSON path.
pub const MAX_PATH_SEGMENTS: usize = 8;
/// The longest key in a JSON path.
pub const MAX_SEGMENT_BYTES: usize = 64;
/// Tokens a request needs to be admitted when `estimate` is not set.
pub const DEFAULT_ESTIMATE: u32 = 1;
/// The most one response is charged when `max` is not set (unless the estimate or the
/// fallback is larger): about the largest context window of today's models, so no real
/// answer reaches it, while a buggy or hostile upstream's `4294967295` is charged this
/// instead (and counted).
pub const DEFAULT_MAX_RESPONSE_COST: u32 = 1_000_000;

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
    /// The cost charged when the response reports none, cannot be read, or is cut off
    /// before it reports any (default: the estimate, so that an answer without a usage
    /// keeps what it was admitted on; 0 charges nothing).
    pub fallback: u32,
    /// The most one response is charged: a larger reported cost is charged this, and
    /// counted ([`DEFAULT_MAX_RESPONSE_COST`] unless set; never below the estimate or the
    /// fallback).
    pub max: u32,
}

/// Where a response reports its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageSource {
    /// A response header or trailer, lower-case.
    Header(String),
    /// Numbers at these paths of a JSON body or of each SSE event's data, summed. For
    /// each path the last value seen in the response counts. The paths are indexes in
    /// [`super::Config::json_paths`], the one table of every path the rules read.
    Json(Vec<u8>),
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

/// What validating the rules' costs builds up: the one table of JSON paths, and the
/// settings accepted without effect, for the host to log.
#[derive(Debug, Default)]
pub(super) struct Costs {
    /// Every distinct JSON path the rules read, once.
    pub paths: Vec<JsonPath>,
    /// Why each ignored setting is ignored.
    pub warnings: Vec<String>,
}

/// Validates a rule's `cost` (`at` is its path, e.g. `rules[0].cost`). `limit` bounds
/// the estimate: a request needing more tokens than the bucket holds would never pass.
pub(super) fn cost(
    at: &str,
    c: wire::Cost,
    limit: &Limit,
    costs: &mut Costs,
) -> Result<Cost, ConfigError> {
    match (c.header, c.response) {
        (Some(header), None) => Ok(Cost::RequestHeader(header_name(
            &field(at, "header"),
            header,
        )?)),
        (None, Some(_)) if limit.is_concurrency() => Err(ConfigError::new(
            field(at, "response"),
            "a concurrency rule's cost is the slots a request holds, known when it is admitted: use `cost.header`",
        )),
        (None, Some(response)) => {
            // Global rules too: a check-only call at request time (or the estimate),
            // the charge at stream end (see `limiter::charge`).
            Ok(Cost::Response(response_cost(
                &field(at, "response"),
                response,
                limit,
                costs,
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
    costs: &mut Costs,
) -> Result<ResponseCost, ConfigError> {
    let source = match (r.header, r.json) {
        (Some(header), None) => UsageSource::Header(header_name(&field(at, "header"), header)?),
        (None, Some(paths)) => {
            UsageSource::Json(json_paths(&field(at, "json"), paths.0, &mut costs.paths)?)
        }
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
        Limit::Concurrency(c) => c.max,
        // Refused above: a concurrency rule's cost is known at admission.
        Limit::GlobalConcurrency => u32::MAX,
    };
    let estimate = match r.estimate {
        None => DEFAULT_ESTIMATE,
        Some(0) => {
            return Err(ConfigError::new(
                field(at, "estimate"),
                "must be at least 1",
            ))
        }
        Some(e) if e > u64::from(capacity) => {
            return Err(ConfigError::new(
                field(at, "estimate"),
                format!("must be at most the bucket's capacity ({capacity}): a request needing more would never be admitted"),
            ))
        }
        Some(e) => e as u32,
    };
    let fallback = match r.fallback {
        None => estimate,
        Some(f) => u32::try_from(f).map_err(|_| {
            ConfigError::new(
                field(at, "fallback"),
                format!("must be at most {}", u32::MAX),
            )
        })?,
    };
    let max = match r.max {
        None => DEFAULT_MAX_RESPONSE_COST.max(estimate).max(fallback),
        Some(m) if m < u64::from(estimate.max(fallback)) => {
            return Err(ConfigError::new(
                field(at, "max"),
                format!(
                    "must be at least the estimate ({estimate}) and the fallback ({fallback}): a response may be charged those"
                ),
            ))
        }
        Some(m) => u32::try_from(m).map_err(|_| {
            ConfigError::new(field(at, "max"), format!("must be at most {}", u32::MAX))
        })?,
    };
    if r.max_scan_bytes.is_some() {
        // Configurations written for the scanner that kept a copy of each event or body
        // still load: the setting only bounded that copy, and there is none any more.
        costs.warnings.push(format!(
            "{at}.max_scan_bytes is ignored: responses are scanned as they stream, without keeping a copy, so no size needs a bound (remove it)"
        ));
    }
    Ok(ResponseCost {
        source,
        estimate,
        fallback,
        max,
    })
}

/// Validates a rule's paths and puts each in the table of all rules' paths (once),
/// returning their indexes there.
fn json_paths(
    at: &str,
    paths: Vec<String>,
    table: &mut Vec<JsonPath>,
) -> Result<Vec<u8>, ConfigError> {
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
    let mut ids: Vec<u8> = Vec::with_capacity(paths.len());
    for (k, path) in paths.into_iter().enumerate() {
        let here = if single {
            at.to_string()
        } else {
            format!("{at}[{k}]")
        };
        let parsed = json_path(&here, &path)?;
        let id = match table.iter().position(|p| *p == parsed) {
            Some(id) => id,
            None if table.len() < MAX_DISTINCT_JSON_PATHS => {
                table.push(parsed);
                table.len() - 1
            }
            None => {
                return Err(ConfigError::new(
                    here,
                    format!(
                    "the rules read more than {MAX_DISTINCT_JSON_PATHS} distinct JSON paths in all"
                ),
                ))
            }
        };
        // At most 64 entries: an index always fits.
        let id = id as u8;
        if ids.contains(&id) {
            return Err(ConfigError::new(
                here,
                format!("duplicate path {path:?} (it would be counted twice)"),
            ));
        }
        ids.push(id);
    }
    Ok(ids)
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
