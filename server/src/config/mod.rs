//! Rate limit configuration: loading, validation and the validated tree that requests are
//! matched against.
//!
//! Two stages, as everywhere in floodgate: [`wire`] is the YAML exactly as written (strict,
//! unknown keys refused), [`validate`] turns it into a [`Config`] that cannot be wrong (no
//! zero limits, no half-specified units, no ambiguous siblings). Every error names the file
//! and the field path: `rules/api.yaml: descriptors[0].rate_limit.unit: unknown unit ...`.
//! [`source`] reads a file or a directory (one domain per file); [`matching`] walks a request
//! descriptor down the tree, [`wildcard`] matches `*` patterns in linear time. [`nesting`]
//! refuses, in linear time, YAML the parser would take quadratic time over. [`rule`] checks
//! one `rate_limit`, [`metadata`] turns a descriptor's `metadata` into protobuf.

pub mod matching;
mod metadata;
pub mod nesting;
mod rule;
pub mod source;
mod validate;
pub mod wildcard;
pub mod wire;

#[cfg(test)]
mod tests;

/// A validated `quota` (only on a limited rule): the lease terms the stores grant by.
pub use crate::algorithm::lease::Quota;
use crate::algorithm::{Limit, Window};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The deepest descriptor nesting accepted; Envoy descriptors are a handful of entries.
pub const MAX_DEPTH: usize = 16;

/// The largest `requests_per_unit` for `sliding_window_log`, which stores one entry per
/// admitted request (16 bytes each) for a whole unit.
pub const MAX_LOG_LIMIT: u32 = 100_000;

/// The largest `requests_per_unit` for `concurrency`: every call on a counter reads its
/// live holds (the memory store scans them, the Redis script reads the sorted set), so
/// the limit bounds that work; ten thousand streams of one key at once is far past any
/// upstream's needs.
pub const MAX_CONCURRENCY: u32 = 10_000;

/// The most hits one grant may take (`quota.requests`). A grant is hits taken from everyone
/// else for one caller; a million is far beyond any useful lease and keeps the arithmetic
/// small.
pub const MAX_QUOTA_REQUESTS: u32 = 1_000_000;

/// The longest a grant may be spent (`quota.valid_ms`): one hour. Leased hits unspent at
/// expiry are lost to everyone, and a lowered limit takes this long to bind every caller.
pub const MAX_QUOTA_VALID_MS: u64 = 3_600_000;

/// A configuration error: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or directory) at fault.
    pub file: PathBuf,
    /// The field path inside the file, e.g. `descriptors[1].rate_limit.unit`; empty when
    /// the whole file is at fault.
    pub path: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(file: &Path, path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.path,
                self.message
            )
        }
    }
}

impl std::error::Error for ConfigError {}

/// A validated configuration: every domain by name.
#[derive(Debug, Default)]
pub struct Config {
    domains: HashMap<String, Domain>,
}

impl Config {
    /// The domain Envoy names, if configured.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Configured domain names, for logs and metrics.
    pub fn domain_names(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// Every `(domain, configured path)` with its own decision series (`detailed_metric`,
    /// `value_to_metric`), so the series can exist before traffic.
    pub fn limit_series(&self) -> Vec<(&Arc<str>, &Arc<str>)> {
        fn walk<'c>(
            domain: &'c Arc<str>,
            level: &'c Level,
            out: &mut Vec<(&'c Arc<str>, &'c Arc<str>)>,
        ) {
            for nodes in level.by_key.values() {
                let wildcards = nodes.wildcards.iter().map(|(_, n)| n);
                for node in nodes
                    .exact
                    .values()
                    .chain(wildcards)
                    .chain(nodes.any.as_deref())
                {
                    if let Some(path) = node.rule.as_ref().and_then(|r| r.metric.as_ref()) {
                        out.push((domain, path));
                    }
                    walk(domain, &node.children, out);
                }
            }
        }
        let mut out = Vec::new();
        for d in self.domains.values() {
            walk(&d.name, &d.root, &mut out);
        }
        out
    }
}

/// One domain's descriptor tree.
#[derive(Debug)]
pub struct Domain {
    /// The domain name, shared with counter keys and metrics.
    pub name: Arc<str>,
    /// The file it came from, for logs.
    pub file: PathBuf,
    root: Level,
    /// Whether any limit here has `replaces` (else a request needs no replacing pass).
    uses_replaces: bool,
}

impl Domain {
    /// Whether any limit of this domain replaces others.
    pub fn uses_replaces(&self) -> bool {
        self.uses_replaces
    }
}

/// What applies when a request descriptor ends at a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The limit's name, reported in `current_limit.name` and matched by `replaces`.
    pub name: Option<Arc<str>>,
    /// The limit; `None` for `unlimited: true`, and for a block (see `blocked`).
    pub limit: Option<Limit>,
    /// Shadow mode: decide and count, but always answer OK.
    pub shadow: bool,
    /// `requests_per_unit: 0` or absent (the reference's "block"): every request is over
    /// the limit, reported with this window; no counter is kept. `None` otherwise.
    pub blocked: Option<Window>,
    /// Quota mode: a soft limit; the request is over only when every quota-mode limit it
    /// matched is (see `docs/server/configuration.md`).
    pub quota_mode: bool,
    /// Names of the limits this one replaces when both apply to one request.
    pub replaces: Arc<[Arc<str>]>,
    /// `metadata`, returned in the response's dynamic metadata when this limit applied
    /// and was not over (with `--response-dynamic-metadata`).
    pub metadata: Option<Arc<prost_types::Struct>>,
    /// The configured path naming this limit's own decision series
    /// (`detailed_metric` / `value_to_metric`), e.g. `tenant_acme.path_/api*`; `None`: the
    /// limit is only counted per domain.
    pub metric: Option<Arc<str>>,
    /// The reference's stat key of this limit, without its domain: the configured path
    /// of `key` or `key_value` names, dot-joined (`tenant_acme.path_/api*`), for the
    /// reference's own series (see [`crate::reference_stats`]).
    pub stats_key: Arc<str>,
    /// The lease a caller that asks may take when admitted; `None`: no grants.
    /// Never granted for a quota-mode or blocked limit.
    pub quota: Option<Quota>,
}

impl Rule {
    /// What the rule does with a request, as one value.
    pub fn kind(&self) -> RuleKind {
        match (self.limit, self.blocked) {
            (Some(limit), _) => RuleKind::Limited(limit),
            (None, Some(window)) => RuleKind::Blocked(window),
            (None, None) => RuleKind::Unlimited,
        }
    }
}

/// The three things a matched rule can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// `unlimited: true`: matches, never limits.
    Unlimited,
    /// Counts against a limit.
    Limited(Limit),
    /// `requests_per_unit: 0`: always over, no counter.
    Blocked(Window),
}

/// The children of one node, indexed for lookup without allocating.
#[derive(Debug, Default)]
struct Level {
    by_key: HashMap<String, KeyNodes>,
}

/// The nodes sharing one key, by how they match the value.
#[derive(Debug, Default)]
struct KeyNodes {
    /// `value: x`: exact matches.
    exact: HashMap<String, Node>,
    /// Values with a `*` anywhere, in configuration order: the first match wins.
    wildcards: Vec<(wildcard::Pattern, Node)>,
    /// No value: any value.
    any: Option<Box<Node>>,
}

/// One node of the tree.
#[derive(Debug, Default)]
struct Node {
    rule: Option<Rule>,
    /// `share_threshold`: the wildcard value as written, counted in place of the
    /// request's value so that every matching value shares one counter.
    shared_as: Option<Arc<str>>,
    children: Level,
}

/// How a configuration is read, beyond its path: the reference's layout settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Several files may define one domain, their descriptors merged into one tree
    /// (`--merge-domains`, the reference's `MERGE_DOMAIN_CONFIG`). Off: a domain defined
    /// twice is an error, naming both files.
    pub merge_domains: bool,
    /// The algorithms the store in use can enforce (`None`: every one): a limit of another
    /// is refused at load, naming the ones it can (the gossip store holds only counts).
    pub supported: Option<Supported>,
}

/// A store's algorithms, for [`LoadOptions::supported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supported {
    /// The store's name, for the error.
    pub store: &'static str,
    /// The algorithms' configuration names.
    pub algorithms: &'static [&'static str],
}

/// Loads and validates the configuration at `path` with the default options: one YAML
/// file, or a directory (see [`source::read`]) whose files each hold one domain.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, &LoadOptions::default())
}

/// Loads and validates the configuration at `path` as `options` say.
pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Config, ConfigError> {
    parse_with(&source::read(path)?, options)
}

/// Validates files already read by [`source::read`], with the default options.
pub fn parse(files: &source::Files) -> Result<Config, ConfigError> {
    parse_with(files, &LoadOptions::default())
}

/// Validates files already read by [`source::read`] as `options` say.
pub fn parse_with(files: &source::Files, options: &LoadOptions) -> Result<Config, ConfigError> {
    validate::config(files, options)
}

/// The configuration in force, swapped whole on reload. Readers take an `Arc` snapshot, so a
/// request is decided under one configuration even if a reload lands meanwhile.
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<std::sync::RwLock<Arc<Config>>>);

impl Shared {
    /// Shares `config`.
    pub fn new(config: Config) -> Shared {
        Shared(Arc::new(std::sync::RwLock::new(Arc::new(config))))
    }

    /// The configuration now in force.
    pub fn get(&self) -> Arc<Config> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts `config` in force for every later request.
    pub fn set(&self, config: Config) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
    }
}
