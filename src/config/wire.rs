//! The plugin configuration exactly as users write it (JSON), before validation.
//!
//! Strict on purpose: every struct refuses unknown fields, so a misspelled key is an
//! error naming it instead of a silently ignored setting. Values are checked afterwards,
//! in [`super::validate`], which turns these types into ones that cannot be wrong.

use serde::Deserialize;

/// The top-level plugin configuration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub response: Option<Response>,
    #[serde(default)]
    pub max_buckets: Option<u64>,
    #[serde(default)]
    pub max_descriptor_value_bytes: Option<u64>,
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
    #[serde(default)]
    pub failure_status: Option<u64>,
    #[serde(default)]
    pub rls: Option<Rls>,
}

/// The rate limit service global rules ask.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rls {
    pub cluster: String,
    pub domain: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
    #[serde(default)]
    pub cache_over_limit: Option<bool>,
    #[serde(default)]
    pub over_limit_cache_slots: Option<u64>,
    #[serde(default)]
    pub lease_slots: Option<u64>,
}

/// A global limit: decided by the rate limit service, which holds the numbers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Global {
    /// The local bucket that decides the rule while the service cannot.
    #[serde(default)]
    pub fallback: Option<Local>,
    /// Whether the rule asks the service for quota leases (default true).
    #[serde(default)]
    pub quota: Option<bool>,
}

/// Where a request's cost (tokens or hits it takes) comes from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cost {
    pub header: String,
}

/// One rate-limit rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub name: String,
    #[serde(default, rename = "match")]
    pub matcher: Option<Match>,
    pub descriptors: Vec<Entry>,
    #[serde(default)]
    pub local: Option<Local>,
    #[serde(default)]
    pub global: Option<Global>,
    #[serde(default)]
    pub cost: Option<Cost>,
    #[serde(default)]
    pub shadow: Option<bool>,
}

/// Which requests a rule applies to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default)]
    pub path_prefix: Option<String>,
    #[serde(default)]
    pub methods: Option<Vec<String>>,
}

/// One descriptor entry: a key and where its value comes from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub key: String,
    #[serde(default)]
    pub header: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub source: Option<Source>,
}

/// Request attributes a descriptor value can be taken from.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Path,
    Method,
    Authority,
    RemoteAddress,
}

/// A local token bucket (a local rule's, or a global rule's fallback).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Local {
    pub capacity: u64,
    pub refill_per_second: f64,
}

/// How rejections look.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    #[serde(default)]
    pub status: Option<u64>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub headers_on_allowed: Option<bool>,
    /// Read as a string and matched in validation: an enum's derived deserializer,
    /// instantiated for every deserializer wrapper, costs the module kilobytes.
    #[serde(default)]
    pub headers: Option<String>,
    /// As `headers`.
    #[serde(default)]
    pub body_format: Option<String>,
}

/// What to do when the limiter itself fails.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    Allow,
    Deny,
}
