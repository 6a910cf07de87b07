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
    pub over_limit_cache_max_seconds: Option<u64>,
    #[serde(default)]
    pub lease_slots: Option<u64>,
    #[serde(default)]
    pub max_grant_requests: Option<u64>,
    #[serde(default)]
    pub max_grant_valid_ms: Option<u64>,
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

/// Where a request's cost (tokens or hits it takes) comes from: a request header, or
/// what the response reports (exactly one).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cost {
    #[serde(default)]
    pub header: Option<String>,
    #[serde(default)]
    pub response: Option<ResponseCost>,
}

/// A cost known only once the response is done (e.g. an LLM API's tokens).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseCost {
    /// A response header (or trailer) holding the cost.
    #[serde(default)]
    pub header: Option<String>,
    /// A dotted path to a number in a JSON body or in each SSE event, or a list of them
    /// to sum.
    #[serde(default)]
    pub json: Option<JsonPaths>,
    /// Tokens a request needs (and holds) to be admitted; default 1.
    #[serde(default)]
    pub estimate: Option<u64>,
    /// Tokens charged when the response reports no usage; default: the estimate.
    #[serde(default)]
    pub fallback: Option<u64>,
    /// The most one response is charged.
    #[serde(default)]
    pub max: Option<u64>,
    /// Accepted and ignored (with a warning): it bounded a copy the scanner no longer
    /// keeps, and configurations that set it must keep loading.
    #[serde(default)]
    pub max_scan_bytes: Option<u64>,
}

/// One JSON path, or several whose values are summed: `"a.b"` or `["a.b", "c.d"]`.
///
/// Written by hand rather than `untagged`, so that a wrong type gets a message saying
/// what is expected instead of "data did not match any variant".
#[derive(Debug)]
pub struct JsonPaths(pub Vec<String>);

impl<'de> Deserialize<'de> for JsonPaths {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsonPaths, D::Error> {
        struct Paths;
        impl<'de> serde::de::Visitor<'de> for Paths {
            type Value = JsonPaths;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a dotted path (\"usage.total_tokens\") or a list of paths to sum")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<JsonPaths, E> {
                Ok(JsonPaths(vec![v.to_string()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<JsonPaths, A::Error> {
                let mut paths = Vec::new();
                while let Some(p) = seq.next_element::<String>()? {
                    paths.push(p);
                }
                Ok(JsonPaths(paths))
            }
        }
        d.deserialize_any(Paths)
    }
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
    /// A fraction of the exact wait; validated in `validate::response`.
    #[serde(default)]
    pub retry_after_jitter: Option<f64>,
}

/// What to do when the limiter itself fails.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    Allow,
    Deny,
}
