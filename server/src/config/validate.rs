//! Turns the wire configuration into validated types, naming the field of each error.

use super::rule::{self, FromDescriptor};
use super::source::Files;
use super::wire;
use super::{metadata, nesting, wildcard};
use super::{
    Config, ConfigError, Domain, KeyNodes, Level, LoadOptions, Node, Quota, Rule, RuleKind,
    Supported, MAX_DEPTH, MAX_QUOTA_REQUESTS, MAX_QUOTA_VALID_MS,
};
use crate::algorithm::Algorithm;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

pub(super) fn config(files: &Files, options: &LoadOptions) -> Result<Config, ConfigError> {
    let mut domains: HashMap<String, Domain> = HashMap::new();
    for (file, text) in &files.files {
        let parsed = parse_yaml(file, text)?;
        if let Some(first) = domains
            .get_mut(&parsed.domain)
            .filter(|_| options.merge_domains)
        {
            // `--merge-domains` (the reference's MERGE_DOMAIN_CONFIG): this file's
            // descriptors join the domain's top level; a sibling defined twice is still a
            // duplicate, reported at this file's descriptor.
            first.uses_replaces |= any_replaces(&parsed.descriptors);
            level_into(top(file, options), parsed.descriptors, &mut first.root)?;
            continue;
        }
        let domain = domain(file, parsed, options)?;
        if let Some(first) = domains.get(&*domain.name) {
            return Err(ConfigError::new(
                file,
                "domain",
                format!(
                    "duplicate domain {:?}, already defined in {}",
                    &*domain.name,
                    first.file.display()
                ),
            ));
        }
        domains.insert(domain.name.to_string(), domain);
    }
    Ok(Config { domains })
}

/// Parses YAML into the wire types; type and unknown-key errors keep serde's wording with
/// our `file: path:` in front.
fn parse_yaml(file: &Path, text: &str) -> Result<wire::File, ConfigError> {
    // Before the parser, which takes quadratic time over deeply nested flow collections.
    nesting::check(text).map_err(|at| {
        ConfigError::new(
            file,
            "",
            format!(
                "invalid YAML: flow collections ([...] or {{...}}) nest deeper than {} levels at line {} column {}",
                nesting::MAX_FLOW_DEPTH,
                at.line,
                at.column
            ),
        )
    })?;
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| ConfigError::new(file, "", format!("invalid YAML: {e}")))?;
    if value.is_null() {
        return Err(ConfigError::new(file, "", "the file is empty"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        ConfigError::new(file, path, e.into_inner().to_string())
    })
}

fn domain(file: &Path, w: wire::File, options: &LoadOptions) -> Result<Domain, ConfigError> {
    if w.domain.is_empty() {
        return Err(ConfigError::new(
            file,
            "domain",
            "is required and must not be empty",
        ));
    }
    let uses_replaces = any_replaces(&w.descriptors);
    let root = level(top(file, options), w.descriptors)?;
    Ok(Domain {
        name: Arc::from(w.domain),
        file: file.to_path_buf(),
        root,
        uses_replaces,
    })
}

/// Whether a limit anywhere in `descriptors` has `replaces`.
fn any_replaces(descriptors: &[wire::Descriptor]) -> bool {
    descriptors.iter().any(|d| {
        d.rate_limit
            .as_ref()
            .is_some_and(|r| !r.replaces.is_empty())
            || any_replaces(&d.descriptors)
    })
}

/// Where a level sits in the tree: its field path, the configured path its nodes' metric
/// names extend, and whether a node above asked for per-limit series (`value_to_metric`).
struct Place<'a> {
    file: &'a Path,
    /// Field path prefix, e.g. `descriptors[0].`.
    fields: String,
    /// Configured path prefix, e.g. `tenant_acme.`.
    metric: String,
    value_to_metric: bool,
    depth: usize,
    /// The algorithms the store can enforce (`None`: all).
    supported: Option<Supported>,
}

/// The place of a file's top level.
fn top<'a>(file: &'a Path, options: &LoadOptions) -> Place<'a> {
    Place {
        file,
        fields: String::new(),
        metric: String::new(),
        value_to_metric: false,
        depth: 1,
        supported: options.supported,
    }
}

fn level(place: Place<'_>, descriptors: Vec<wire::Descriptor>) -> Result<Level, ConfigError> {
    let mut out = Level::default();
    level_into(place, descriptors, &mut out)?;
    Ok(out)
}

/// Adds `descriptors` to the level `out` (empty, or a domain's top level being merged).
fn level_into(
    place: Place<'_>,
    descriptors: Vec<wire::Descriptor>,
    out: &mut Level,
) -> Result<(), ConfigError> {
    if descriptors.is_empty() {
        return Ok(());
    }
    let file = place.file;
    let here = format!("{}descriptors", place.fields);
    if place.depth > MAX_DEPTH {
        return Err(ConfigError::new(
            file,
            here,
            format!("descriptors nest deeper than {MAX_DEPTH} levels"),
        ));
    }
    for (i, d) in descriptors.into_iter().enumerate() {
        let at = format!("{here}[{i}]");
        let key = d.key.clone();
        let (value, pattern, node) = descriptor(&place, &at, d)?;
        let nodes = out.by_key.entry(key.clone()).or_default();
        insert(file, &at, nodes, &key, value, pattern, node)?;
    }
    Ok(())
}

/// The node of the descriptor `d` at `at` in `place`, with its value and wildcard.
fn descriptor(
    place: &Place<'_>,
    at: &str,
    d: wire::Descriptor,
) -> Result<(Option<String>, Option<wildcard::Pattern>, Node), ConfigError> {
    let file = place.file;
    if d.key.is_empty() {
        return Err(ConfigError::new(
            file,
            format!("{at}.key"),
            "is required and must not be empty",
        ));
    }
    let value = d.value.map(|v| v.0).filter(|v| !v.is_empty());
    let pattern = value.as_deref().and_then(wildcard::Pattern::new);
    if d.share_threshold && pattern.is_none() {
        return Err(ConfigError::new(
            file,
            format!("{at}.share_threshold"),
            "only applies to a wildcard value (one with a `*`)",
        ));
    }
    // The reference's stat name for this node: `key` or `key_value`, dot-joined.
    let metric = match &value {
        Some(v) => format!("{}{}_{v}", place.metric, d.key),
        None => format!("{}{}", place.metric, d.key),
    };
    let value_to_metric = place.value_to_metric || d.value_to_metric;
    let metadata = match &d.metadata {
        Some(m) if !m.is_empty() => Some(Arc::new(metadata::to_struct(m).map_err(
            |(path, message)| ConfigError::new(file, format!("{at}.metadata{path}"), message),
        )?)),
        _ => None,
    };
    let mut rule = match d.rate_limit {
        None => None,
        Some(r) => {
            let from = FromDescriptor {
                shadow: d.shadow_mode,
                quota_mode: d.quota_mode,
                metadata,
                metric: (d.detailed_metric || value_to_metric).then(|| Arc::from(metric.as_str())),
                stats_key: Arc::from(metric.as_str()),
                supported: place.supported,
            };
            Some(rule::rule(file, &format!("{at}.rate_limit"), r, from)?)
        }
    };
    if let Some(q) = d.quota {
        let quota = quota(file, &format!("{at}.quota"), q, rule.as_ref())?;
        if let Some(r) = rule.as_mut() {
            r.quota = Some(quota);
        }
    }
    let children = level(
        Place {
            file,
            fields: format!("{at}."),
            metric: format!("{metric}."),
            value_to_metric,
            depth: place.depth + 1,
            supported: place.supported,
        },
        d.descriptors,
    )?;
    let node = Node {
        rule,
        shared_as: d
            .share_threshold
            .then(|| value.as_deref().map(Arc::from))
            .flatten(),
        children,
    };
    Ok((value, pattern, node))
}

fn insert(
    file: &Path,
    at: &str,
    nodes: &mut KeyNodes,
    key: &str,
    value: Option<String>,
    pattern: Option<wildcard::Pattern>,
    node: Node,
) -> Result<(), ConfigError> {
    let duplicate = |what: String| {
        ConfigError::new(
            file,
            at,
            format!("duplicate descriptor: {what} is already defined at this level"),
        )
    };
    match (value, pattern) {
        (None, _) => {
            if nodes.any.is_some() {
                return Err(duplicate(format!("key {key:?} without a value")));
            }
            nodes.any = Some(Box::new(node));
        }
        (Some(v), Some(p)) => {
            if nodes.wildcards.iter().any(|(q, _)| *q == p) {
                return Err(duplicate(format!("key {key:?} value {v:?}")));
            }
            // Configuration order is kept: the first matching wildcard wins.
            nodes.wildcards.push((p, node));
        }
        (Some(v), None) => {
            if nodes.exact.contains_key(&v) {
                return Err(duplicate(format!("key {key:?} value {v:?}")));
            }
            nodes.exact.insert(v, node);
        }
    }
    Ok(())
}

/// Validates a descriptor's `quota` against the rule beside it (`None`: no `rate_limit`).
fn quota(file: &Path, at: &str, q: wire::Quota, rule: Option<&Rule>) -> Result<Quota, ConfigError> {
    match rule {
        None => return Err(ConfigError::new(file, at, "needs a rate_limit beside it")),
        Some(r) if r.kind() == RuleKind::Unlimited => {
            return Err(ConfigError::new(
                file,
                at,
                "cannot be combined with rate_limit.unlimited: true (nothing to lease)",
            ))
        }
        Some(r) if r.limit.is_some_and(|l| l.algorithm == Algorithm::Concurrency) => {
            return Err(ConfigError::new(
                file,
                at,
                "cannot be combined with algorithm: concurrency (a hold is taken per request, never leased)",
            ))
        }
        Some(_) => {}
    }
    let requests = match q.requests {
        None => {
            return Err(ConfigError::new(
                file,
                format!("{at}.requests"),
                "is required",
            ))
        }
        Some(n) if n > MAX_QUOTA_REQUESTS => {
            return Err(ConfigError::new(
                file,
                format!("{at}.requests"),
                format!("must be at most {MAX_QUOTA_REQUESTS}"),
            ))
        }
        Some(n) => NonZeroU32::new(n).ok_or_else(|| {
            ConfigError::new(file, format!("{at}.requests"), "must be greater than 0")
        })?,
    };
    let valid_ms = match q.valid_ms {
        None => {
            return Err(ConfigError::new(
                file,
                format!("{at}.valid_ms"),
                "is required",
            ))
        }
        Some(0) => {
            return Err(ConfigError::new(
                file,
                format!("{at}.valid_ms"),
                "must be greater than 0",
            ))
        }
        Some(ms) if ms > MAX_QUOTA_VALID_MS => {
            return Err(ConfigError::new(
                file,
                format!("{at}.valid_ms"),
                format!("must be at most {MAX_QUOTA_VALID_MS} (one hour)"),
            ))
        }
        Some(ms) => ms,
    };
    Ok(Quota { requests, valid_ms })
}
