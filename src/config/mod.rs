//! The plugin configuration: parsed once in the root context, validated strictly.
//!
//! Parsing has two stages. [`wire`] mirrors the JSON users write and refuses unknown
//! fields; [`validate`] checks every value and builds the types below, which cannot hold
//! a wrong value (a zero capacity, a bad status code, a duplicate rule name). Every error
//! names the field path, e.g. `rules[0].local.capacity: must be at least 1`, and Envoy
//! refuses the filter when `on_configure` reports it.

mod cost;
mod json;
mod names;
mod response;
mod validate;
mod wire;

pub use cost::{
    JsonPath, ResponseCost, UsageSource, DEFAULT_ESTIMATE, DEFAULT_MAX_RESPONSE_COST,
    MAX_DISTINCT_JSON_PATHS, MAX_JSON_PATHS, MAX_PATH_SEGMENTS, MAX_SEGMENT_BYTES,
};

pub use names::DETAILS;
pub use response::{BodyFormat, HeaderFields, ResponseConfig, MAX_JITTER_PPM};

use crate::bucket::Quota;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Buckets kept per Envoy when `max_buckets` is not set.
pub const DEFAULT_MAX_BUCKETS: u32 = 10_000;
/// The largest `max_buckets` accepted (each bucket costs about 100 bytes of shared data).
pub const MAX_MAX_BUCKETS: u32 = 1_000_000;
/// The longest descriptor value accepted when `max_descriptor_value_bytes` is not set:
/// long enough for any path a browser or API client sends in practice (the query string
/// is not part of it), short enough that a client cannot make the rate limit service
/// keep kilobytes per key.
pub const DEFAULT_MAX_DESCRIPTOR_VALUE_BYTES: usize = 1024;
/// The largest `max_descriptor_value_bytes` accepted (Envoy's default limit on all
/// request headers together is 60 KiB).
pub const MAX_MAX_DESCRIPTOR_VALUE_BYTES: usize = 65_536;
/// The most rules one configuration may hold.
pub const MAX_RULES: usize = 64;
/// The most descriptor entries one rule may hold.
pub const MAX_ENTRIES: usize = 16;
/// The status sent when `response.status` is not set.
pub const DEFAULT_STATUS: u16 = 429;
/// The body sent when `response.body` is not set.
pub const DEFAULT_BODY: &str = "rate limited\n";
/// The status of a request rejected because a limiter failed, as Envoy's own filter.
pub const DEFAULT_FAILURE_STATUS: u16 = 500;
/// How long a request waits for the rate limit service when `rls.timeout_ms` is not set.
pub const DEFAULT_RLS_TIMEOUT_MS: u32 = 20;
/// Denials the over-limit cache holds when `rls.over_limit_cache_slots` is not set.
pub const DEFAULT_OVER_LIMIT_CACHE_SLOTS: u32 = 1024;
/// The largest accepted `rls.over_limit_cache_slots`.
pub const MAX_OVER_LIMIT_CACHE_SLOTS: u32 = 65_536;
/// How long a remembered denial is trusted at most when
/// `rls.over_limit_cache_max_seconds` is not set: a service that restarted with empty
/// memory, or was reconfigured, is asked again within this time.
pub const DEFAULT_OVER_LIMIT_CACHE_MAX_SECONDS: u32 = 60;
/// The largest accepted `rls.over_limit_cache_max_seconds` (one day).
pub const MAX_OVER_LIMIT_CACHE_MAX_SECONDS: u32 = 86_400;
/// Grants the lease table holds when `rls.lease_slots` is not set.
pub const DEFAULT_LEASE_SLOTS: u32 = 1024;
/// The largest accepted `rls.lease_slots`.
pub const MAX_LEASE_SLOTS: u32 = 65_536;
/// The most hits of one grant the lease table keeps when `rls.max_grant_requests` is not
/// set: floodgate-server's own bound on `quota.requests`.
pub const DEFAULT_MAX_GRANT_REQUESTS: u32 = 1_000_000;
/// How long one grant may be spent at most when `rls.max_grant_valid_ms` is not set:
/// floodgate-server's own bound on `quota.valid_ms`, one hour.
pub const DEFAULT_MAX_GRANT_VALID_MS: u32 = 3_600_000;
/// The largest accepted `rls.max_grant_valid_ms` (one day).
pub const MAX_MAX_GRANT_VALID_MS: u32 = 86_400_000;
/// The longest accepted `rls.timeout_ms`.
pub const MAX_RLS_TIMEOUT_MS: u32 = 60_000;

/// A validated plugin configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The rules, in configuration order (also the order their headers are preferred in).
    pub rules: Vec<Rule>,
    /// How rejections look.
    pub response: ResponseConfig,
    /// How many buckets this Envoy may keep in shared data (default 10 000).
    pub max_buckets: NonZeroU32,
    /// The longest descriptor value a request may bring (default 1024 bytes); a longer
    /// one refuses the request, so that it cannot buy a fresh bucket or bloat the rate
    /// limit service's keys.
    pub max_descriptor_value_bytes: usize,
    /// What happens when the local limiter cannot decide (default: allow).
    pub failure_mode: FailureMode,
    /// HTTP status of a request rejected because a limiter failed (default 500).
    pub failure_status: u16,
    /// The rate limit service, present exactly when some rule is global.
    pub rls: Option<RlsConfig>,
    /// Every distinct JSON path the rules' response costs read, once: a response is
    /// scanned a single time for all the paths its rules read
    /// ([`UsageSource::Json`] holds indexes in this table).
    pub json_paths: Vec<JsonPath>,
    /// Settings accepted but without effect, each with why: the host logs them when it
    /// loads the configuration, so that nobody relies on them unawares.
    pub warnings: Vec<String>,
}

/// The rate limit service (RLS v3) that global rules ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlsConfig {
    /// The Envoy cluster of the service (it must speak HTTP/2).
    pub cluster: String,
    /// The domain sent with every call.
    pub domain: String,
    /// How long a request may wait for the answer (default 20 ms).
    pub timeout_ms: u32,
    /// What happens when the service cannot answer (default: allow).
    pub failure_mode: FailureMode,
    /// The over-limit cache (`rls.cache_over_limit`, on by default): how many denials
    /// this Envoy remembers so that it need not ask again; `None`: switched off.
    pub over_limit_cache_slots: Option<NonZeroU32>,
    /// The longest a remembered denial is trusted before the service is asked again,
    /// whatever reset it reported (`rls.over_limit_cache_max_seconds`, default 60 s).
    pub over_limit_cache_max_seconds: u32,
    /// How many (rule, descriptor values) the lease table holds grants for
    /// (`rls.lease_slots`, default 1024); used only when some rule leases.
    pub lease_slots: NonZeroU32,
    /// The most hits of one grant kept, the rest dropped (`rls.max_grant_requests`,
    /// default 1 000 000): a hostile or buggy service cannot make one grant decide
    /// millions of requests.
    pub max_grant_requests: u32,
    /// The longest one grant may be spent from its arrival (`rls.max_grant_valid_ms`,
    /// default one hour), whatever `valid_until` said.
    pub max_grant_valid_ms: u32,
}

/// What limits a rule's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A token bucket in this Envoy's shared data.
    Local(Quota),
    /// The rate limit service's answer for the rule's descriptor.
    Global {
        /// The token bucket (in this Envoy's shared data) that decides the rule while
        /// the service cannot answer; `None`: `rls.failure_mode` decides.
        fallback: Option<Quota>,
        /// Whether the rule asks the service for quota leases (`global.quota`, default
        /// true); see [`Rule::asks_for_lease`].
        lease: bool,
    },
    /// At most `max` requests of one descriptor in flight at once in this Envoy
    /// (`"concurrency": {"max": N}`, see [`crate::shared::concurrency`]).
    Concurrency(Concurrency),
    /// At most the rate limit service's limit of requests of one descriptor in flight at
    /// once across the fleet (`"concurrency": {"global": {}}`): each admitted request holds
    /// its slots on the service under an id the filter mints, and releases them when its
    /// stream ends. The limit is the service's alone (its YAML), so the filter keeps no
    /// number of its own; while the service cannot answer, `rls.failure_mode` decides.
    GlobalConcurrency,
}

impl Limit {
    /// Whether the rule is decided by the rate limit service: a global rule or a
    /// fleet-wide concurrency rule. Both go into the request's one call.
    pub fn is_asked(&self) -> bool {
        matches!(self, Limit::Global { .. } | Limit::GlobalConcurrency)
    }

    /// Whether the rule limits requests in flight, in this Envoy or fleet-wide (its
    /// replies say `qu="concurrent-requests"` and promise no `retry-after`).
    pub fn is_concurrency(&self) -> bool {
        matches!(self, Limit::Concurrency(_) | Limit::GlobalConcurrency)
    }
}

/// The most requests in flight `concurrency.max` may allow.
pub const MAX_CONCURRENCY: u32 = 1_000_000;
/// How long a request holds its concurrency slot at most when
/// `concurrency.max_duration_seconds` is not set: a stream still open after that stops
/// counting, so that a holder that vanished (a VM that trapped, a lost callback) frees
/// its slot by itself.
pub const DEFAULT_MAX_DURATION_SECONDS: u32 = 300;
/// The largest accepted `concurrency.max_duration_seconds` (one day).
pub const MAX_MAX_DURATION_SECONDS: u32 = 86_400;

/// A concurrency limit: slots held by requests in flight, per descriptor, in this Envoy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// Requests (slots, with a cost) in flight at once per descriptor, at least 1.
    pub max: u32,
    /// The longest one request holds its slots, in milliseconds (from
    /// `max_duration_seconds`): the deadline after which a hold is reclaimed.
    pub max_duration_ms: u64,
}

/// One rate-limit rule: which requests, which descriptor, which limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Unique name, used in metric names and logs; `[A-Za-z0-9_-]`, at most 64 bytes.
    pub name: String,
    /// The response code details of a rejection by this rule alone
    /// (`floodgate_rate_limited{name}`, see [`crate::reply::rejection_details`]): made
    /// once here and shared by every such reply, which then builds no string for them.
    pub details: Arc<str>,
    /// Which requests the rule applies to.
    pub matcher: Match,
    /// The descriptor entries; a request missing any one of them is not limited by the rule.
    pub entries: Vec<Entry>,
    /// The limit applied per distinct descriptor value.
    pub limit: Limit,
    /// The request header holding the request's cost (tokens it takes); `None`: 1.
    pub cost_header: Option<String>,
    /// A cost the response reports (then `cost_header` is `None`): the request is
    /// admitted on [`ResponseCost::estimate`] tokens, and charged what the response
    /// reports when it is done.
    pub response_cost: Option<ResponseCost>,
    /// Decide and count, but never reject.
    pub shadow: bool,
}

impl Rule {
    /// Whether this rule asks the rate limit service for quota leases and spends them:
    /// a global rule, enforced (the service grants nothing for a shadow rule, which
    /// never rejects), that did not say `"global": {"quota": false}`. The one place this
    /// is decided, so that a rule whose cost is known only later can opt out here.
    /// A rule whose cost the response reports never leases: a grant is spent at
    /// admission, before its cost is known, and the service must see every stream-end
    /// charge for the budget to hold.
    pub fn asks_for_lease(&self) -> bool {
        matches!(self.limit, Limit::Global { lease: true, .. })
            && !self.shadow
            && self.response_cost.is_none()
    }
}

/// Which requests a rule applies to; the default matches every request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// The path (without query string) must start with this.
    pub path_prefix: Option<String>,
    /// The method must be one of these (upper case); empty means any method.
    pub methods: Vec<String>,
}

/// One descriptor entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The descriptor key, as sent to a rate limit service.
    pub key: String,
    /// Where the value comes from.
    pub source: Source,
}

/// Where a descriptor value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A request header, by lower-case name; an absent or empty header means no value.
    Header(String),
    /// A constant.
    Value(String),
    /// The request path without its query string.
    Path,
    /// The request method.
    Method,
    /// The `:authority` (Host) of the request.
    Authority,
    /// The client's IP address, without port.
    RemoteAddress,
}

/// What happens to a request when the limiter cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Let the request through (fail open).
    Allow,
    /// Reject it (fail closed).
    Deny,
}

/// A configuration error: the field path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Path of the offending field, e.g. `rules[0].local.capacity`; empty for the whole.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// Out of line: the checks build an error at a hundred sites, and the conversions
    /// inlined into each were 2 KB of the module.
    #[inline(never)]
    fn new(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The path of field `name` under `at`: `{at}.{name}`, written by hand. The checks name
/// the field of every error they return, and a `format!` at each of those sites was
/// code of its own in the module.
#[inline(never)]
pub(crate) fn field(at: &str, name: &str) -> String {
    let mut path = String::with_capacity(at.len() + 1 + name.len());
    path.push_str(at);
    path.push('.');
    path.push_str(name);
    path
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Parses and validates the plugin configuration JSON.
    pub fn parse(json: &[u8]) -> Result<Config, ConfigError> {
        if json.iter().all(u8::is_ascii_whitespace) {
            return Err(ConfigError::new(
                "",
                "configuration is empty: expected a JSON object with `rules`",
            ));
        }
        let value = json::parse(json).map_err(|e| ConfigError::new(e.path, e.message))?;
        validate::config(wire::config(value)?)
    }
}

#[cfg(test)]
mod tests;
