//! The plugin configuration exactly as users write it (JSON), before validation.
//!
//! Strict on purpose: every struct refuses unknown fields, so a misspelled key is an
//! error naming it instead of a silently ignored setting. Values are checked afterwards,
//! in [`super::validate`], which turns these types into ones that cannot be wrong.

use super::json::Number;

/// The top-level plugin configuration.
#[derive(Debug, Default)]
pub struct Config {
    pub rules: Vec<Rule>,
    pub response: Option<Response>,
    pub max_buckets: Option<u64>,
    pub max_descriptor_value_bytes: Option<u64>,
    pub failure_mode: Option<FailureMode>,
    pub failure_status: Option<u64>,
    pub rls: Option<Rls>,
}

/// The rate limit service global rules ask.
#[derive(Debug, Default)]
pub struct Rls {
    pub cluster: String,
    pub domain: String,
    pub timeout_ms: Option<u64>,
    pub failure_mode: Option<FailureMode>,
    pub cache_over_limit: Option<bool>,
    pub over_limit_cache_slots: Option<u64>,
    pub over_limit_cache_max_seconds: Option<u64>,
    pub lease_slots: Option<u64>,
    pub max_grant_requests: Option<u64>,
    pub max_grant_valid_ms: Option<u64>,
}

/// A global limit: decided by the rate limit service, which holds the numbers.
#[derive(Debug)]
pub struct Global {
    /// The local bucket that decides the rule while the service cannot.
    pub fallback: Option<Local>,
    /// Whether the rule asks the service for quota leases (default true).
    pub quota: Option<bool>,
}

/// Where a request's cost (tokens or hits it takes) comes from: a request header, or
/// what the response reports (exactly one).
#[derive(Debug)]
pub struct Cost {
    pub header: Option<String>,
    pub response: Option<ResponseCost>,
}

/// A cost known only once the response is done (e.g. an LLM API's tokens).
#[derive(Debug, Default)]
pub struct ResponseCost {
    /// A response header (or trailer) holding the cost.
    pub header: Option<String>,
    /// A dotted path to a number in a JSON body or in each SSE event, or a list of them
    /// to sum.
    pub json: Option<JsonPaths>,
    /// Tokens a request needs (and holds) to be admitted; default 1.
    pub estimate: Option<u64>,
    /// Tokens charged when the response reports no usage; default: the estimate.
    pub fallback: Option<u64>,
    /// The most one response is charged.
    pub max: Option<u64>,
    /// Accepted and ignored (with a warning): it bounded a copy the scanner no longer
    /// keeps, and configurations that set it must keep loading.
    pub max_scan_bytes: Option<u64>,
}

/// One JSON path, or several whose values are summed: `"a.b"` or `["a.b", "c.d"]`.
///
#[derive(Debug)]
pub struct JsonPaths(pub Vec<String>);

/// One rate-limit rule.
#[derive(Debug, Default)]
pub struct Rule {
    pub name: String,
    pub matcher: Option<Match>,
    pub descriptors: Vec<Entry>,
    pub local: Option<Local>,
    pub global: Option<Global>,
    pub concurrency: Option<Concurrency>,
    pub cost: Option<Cost>,
    pub shadow: Option<bool>,
}

/// Which requests a rule applies to.
#[derive(Debug)]
pub struct Match {
    pub path_prefix: Option<String>,
    pub methods: Option<Vec<String>>,
}

/// One descriptor entry: a key and where its value comes from.
#[derive(Debug, Default)]
pub struct Entry {
    pub key: String,
    pub header: Option<String>,
    pub value: Option<String>,
    pub source: Option<Source>,
}

/// Request attributes a descriptor value can be taken from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    Path,
    Method,
    Authority,
    RemoteAddress,
}

/// A concurrency limit: requests in flight per descriptor, in this Envoy (`max`), or
/// fleet-wide (`"global": {}`, the rate limit service's limit).
#[derive(Debug)]
pub struct Concurrency {
    /// Required in the per-Envoy form, refused in the fleet-wide one (validation says so).
    pub max: Option<u64>,
    pub max_duration_seconds: Option<u64>,
    /// `"global": {}` was given: the fleet-wide form.
    pub global: bool,
}

/// A local token bucket (a local rule's, or a global rule's fallback).
#[derive(Debug)]
pub struct Local {
    pub capacity: u64,
    pub refill_per_second: Number,
}

/// How rejections look.
#[derive(Debug, Default)]
pub struct Response {
    pub status: Option<u64>,
    pub body: Option<String>,
    pub headers_on_allowed: Option<bool>,
    /// Read as a string and matched in validation: an enum's derived deserializer,
    /// instantiated for every deserializer wrapper, costs the module kilobytes.
    pub headers: Option<String>,
    /// As `headers`.
    pub body_format: Option<String>,
    /// A fraction of the exact wait; validated in `validate::response`.
    pub retry_after_jitter: Option<Number>,
}

/// What to do when the limiter itself fails.
#[derive(Debug, Clone, Copy)]
pub enum FailureMode {
    Allow,
    Deny,
}

mod read;
pub(super) use read::config;
