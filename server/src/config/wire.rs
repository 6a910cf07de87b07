//! The configuration file as written: envoyproxy/ratelimit's YAML format plus our
//! `algorithm` and `burst`. Strict: an unknown key is an error, never ignored. Anything that
//! needs a check beyond its type (empty strings, zero limits, units) is left loose here and
//! checked in [`super::validate`], which can name the offending field.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// One file: one domain and its descriptor tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// The domain Envoy names in its requests.
    #[serde(default)]
    pub domain: String,
    /// Top-level descriptors.
    #[serde(default)]
    pub descriptors: Vec<Descriptor>,
}

/// One node of the descriptor tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    /// The entry key to match.
    #[serde(default)]
    pub key: String,
    /// The entry value to match; absent matches any value, each `*` any run of characters.
    #[serde(default)]
    pub value: Option<Scalar>,
    /// The limit applied when a request descriptor ends at this node.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// Decide and count, but never answer OVER_LIMIT.
    #[serde(default)]
    pub shadow_mode: bool,
    /// A soft limit: the request is over only when every quota-mode limit it matched is.
    #[serde(default)]
    pub quota_mode: bool,
    /// Every value matching this node's wildcard shares one counter (needs a `*` value).
    #[serde(default)]
    pub share_threshold: bool,
    /// Per-limit decision metrics for this node's limit, named by its configured path.
    #[serde(default)]
    pub detailed_metric: bool,
    /// Per-limit decision metrics for the limits at or under this node (the reference's
    /// name; ours never put a client's value in a metric, see `docs/server/configuration.md`).
    #[serde(default)]
    pub value_to_metric: bool,
    /// Returned in the response's dynamic metadata when this node's limit applied and
    /// was not over; any YAML mapping.
    #[serde(default)]
    pub metadata: Option<serde_yaml_ng::Mapping>,
    /// Ours: hits a caller that asks may take ahead as a lease.
    #[serde(default)]
    pub quota: Option<Quota>,
    /// Children, matched against the next entry of a request descriptor.
    #[serde(default)]
    pub descriptors: Vec<Descriptor>,
}

/// A limit as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// second, minute, hour, day, week, month or year (any case, as the reference accepts).
    #[serde(default)]
    pub unit: Option<String>,
    /// Requests per unit; 0 or absent blocks every request.
    #[serde(default)]
    pub requests_per_unit: Option<u32>,
    /// How many units make the window (`unit: minute`, `unit_multiplier: 5`: five
    /// minutes); 1 when absent.
    #[serde(default)]
    pub unit_multiplier: Option<u32>,
    /// Matches, but never limits.
    #[serde(default)]
    pub unlimited: bool,
    /// Reported back in `current_limit.name`.
    #[serde(default)]
    pub name: Option<String>,
    /// Our extension; `fixed_window` when absent.
    #[serde(default)]
    pub algorithm: Option<AlgorithmName>,
    /// Our extension, token_bucket only: bucket size; `requests_per_unit` when absent.
    #[serde(default)]
    pub burst: Option<u32>,
    /// The named limits this one replaces when both apply to one request.
    #[serde(default)]
    pub replaces: Vec<Replaces>,
}

/// One entry of `replaces`: the name of a limit to drop.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replaces {
    /// The replaced limit's `name`.
    #[serde(default)]
    pub name: Option<String>,
}

/// A quota lease as written: `quota: {requests: N, valid_ms: T}` beside `rate_limit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// Hits granted at most per admitted request that asks; 1 to [`super::MAX_QUOTA_REQUESTS`].
    #[serde(default)]
    pub requests: Option<u32>,
    /// How long a grant may be spent, in ms; 1 to [`super::MAX_QUOTA_VALID_MS`].
    #[serde(default)]
    pub valid_ms: Option<u64>,
}

/// The algorithms by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmName {
    /// See [`crate::algorithm::fixed_window`].
    FixedWindow,
    /// See [`crate::algorithm::token_bucket`].
    TokenBucket,
    /// See [`crate::algorithm::sliding_log`].
    SlidingWindowLog,
    /// See [`crate::algorithm::sliding_counter`].
    SlidingWindowCounter,
    /// See [`crate::algorithm::concurrency`].
    Concurrency,
}

/// A descriptor value: a string, or a number or boolean taken as its text (YAML users
/// write `value: 429` and mean the string "429", as the reference service reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct ScalarVisitor;
        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}
