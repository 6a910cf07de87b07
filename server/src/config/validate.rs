//! Turns the wire configuration into validated types, naming the field of each error.

use super::nesting;
use super::source::Files;
use super::wire::{self, AlgorithmName};
use super::{
    Config, ConfigError, Domain, KeyNodes, Level, LoadOptions, Node, Quota, Rule, MAX_DEPTH,
    MAX_LOG_LIMIT, MAX_QUOTA_REQUESTS, MAX_QUOTA_VALID_MS,
};
use crate::algorithm::{Algorithm, Limit, Unit};
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
            level_into(file, "", parsed.descriptors, 1, &mut first.root)?;
            continue;
        }
        let domain = domain(file, parsed)?;
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

fn domain(file: &Path, w: wire::File) -> Result<Domain, ConfigError> {
    if w.domain.is_empty() {
        return Err(ConfigError::new(
            file,
            "domain",
            "is required and must not be empty",
        ));
    }
    let root = level(file, "", w.descriptors, 1)?;
    Ok(Domain {
        name: Arc::from(w.domain),
        file: file.to_path_buf(),
        root,
    })
}

fn level(
    file: &Path,
    parent: &str,
    descriptors: Vec<wire::Descriptor>,
    depth: usize,
) -> Result<Level, ConfigError> {
    let mut out = Level::default();
    level_into(file, parent, descriptors, depth, &mut out)?;
    Ok(out)
}

/// Adds `descriptors` to the level `out` (empty, or a domain's top level being merged).
fn level_into(
    file: &Path,
    parent: &str,
    descriptors: Vec<wire::Descriptor>,
    depth: usize,
    out: &mut Level,
) -> Result<(), ConfigError> {
    if descriptors.is_empty() {
        return Ok(());
    }
    let here = format!("{parent}descriptors");
    if depth > MAX_DEPTH {
        return Err(ConfigError::new(
            file,
            here,
            format!("descriptors nest deeper than {MAX_DEPTH} levels"),
        ));
    }
    for (i, d) in descriptors.into_iter().enumerate() {
        let at = format!("{here}[{i}]");
        if d.key.is_empty() {
            return Err(ConfigError::new(
                file,
                format!("{at}.key"),
                "is required and must not be empty",
            ));
        }
        let mut rule = match d.rate_limit {
            None => None,
            Some(r) => Some(rule(file, &format!("{at}.rate_limit"), r, d.shadow_mode)?),
        };
        if let Some(q) = d.quota {
            let quota = quota(file, &format!("{at}.quota"), q, rule.as_ref())?;
            if let Some(r) = rule.as_mut() {
                r.quota = Some(quota);
            }
        }
        let node = Node {
            rule,
            children: level(file, &format!("{at}."), d.descriptors, depth + 1)?,
        };
        let nodes = out.by_key.entry(d.key.clone()).or_default();
        let value = d.value.map(|v| v.0).filter(|v| !v.is_empty());
        insert(file, &at, nodes, &d.key, value, node)?;
    }
    for nodes in out.by_key.values_mut() {
        // Longest prefix first: the most specific wildcard wins.
        nodes
            .prefix
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    }
    Ok(())
}

fn insert(
    file: &Path,
    at: &str,
    nodes: &mut KeyNodes,
    key: &str,
    value: Option<String>,
    node: Node,
) -> Result<(), ConfigError> {
    let duplicate = |what: String| {
        ConfigError::new(
            file,
            at,
            format!("duplicate descriptor: {what} is already defined at this level"),
        )
    };
    match value {
        None => {
            if nodes.any.is_some() {
                return Err(duplicate(format!("key {key:?} without a value")));
            }
            nodes.any = Some(Box::new(node));
        }
        Some(v) => match v.find('*') {
            None => {
                if nodes.exact.contains_key(&v) {
                    return Err(duplicate(format!("key {key:?} value {v:?}")));
                }
                nodes.exact.insert(v, node);
            }
            Some(star) if star == v.len() - 1 => {
                let prefix = v[..star].to_owned();
                if nodes.prefix.iter().any(|(p, _)| *p == prefix) {
                    return Err(duplicate(format!("key {key:?} value {v:?}")));
                }
                nodes.prefix.push((prefix, node));
            }
            Some(_) => {
                return Err(ConfigError::new(
                    file,
                    format!("{at}.value"),
                    format!("bad wildcard {v:?}: `*` is only allowed as the last character"),
                ));
            }
        },
    }
    Ok(())
}

fn rule(file: &Path, at: &str, r: wire::RateLimit, shadow: bool) -> Result<Rule, ConfigError> {
    let name = r.name.filter(|n| !n.is_empty()).map(Arc::from);
    if r.unlimited {
        let extra = [
            (r.requests_per_unit.is_some(), "requests_per_unit"),
            (r.unit.is_some(), "unit"),
            (r.algorithm.is_some(), "algorithm"),
            (r.burst.is_some(), "burst"),
        ];
        if let Some((_, field)) = extra.iter().find(|(set, _)| *set) {
            return Err(ConfigError::new(
                file,
                format!("{at}.{field}"),
                "cannot be combined with unlimited: true",
            ));
        }
        return Ok(Rule {
            name,
            limit: None,
            shadow,
            quota: None,
        });
    }
    let unit = match r.unit.as_deref() {
        None => return Err(ConfigError::new(file, format!("{at}.unit"), "is required")),
        Some(u) => unit(u).ok_or_else(|| {
            ConfigError::new(
                file,
                format!("{at}.unit"),
                format!("unknown unit {u:?}, expected second, minute, hour, day or week"),
            )
        })?,
    };
    let rpu_at = format!("{at}.requests_per_unit");
    let requests_per_unit = match r.requests_per_unit {
        None => {
            return Err(ConfigError::new(
                file,
                rpu_at,
                "is required (or set unlimited: true)",
            ))
        }
        Some(n) => NonZeroU32::new(n).ok_or_else(|| {
            ConfigError::new(
                file,
                &rpu_at,
                "must be greater than 0 (use unlimited: true for no limit)",
            )
        })?,
    };
    let algorithm_name = r.algorithm.unwrap_or(AlgorithmName::FixedWindow);
    if r.burst.is_some() && algorithm_name != AlgorithmName::TokenBucket {
        return Err(ConfigError::new(
            file,
            format!("{at}.burst"),
            "only applies to algorithm: token_bucket",
        ));
    }
    let algorithm = match algorithm_name {
        AlgorithmName::FixedWindow => Algorithm::FixedWindow,
        AlgorithmName::SlidingWindowCounter => Algorithm::SlidingWindowCounter,
        AlgorithmName::SlidingWindowLog => {
            if requests_per_unit.get() > MAX_LOG_LIMIT {
                return Err(ConfigError::new(
                    file,
                    rpu_at,
                    format!(
                        "sliding_window_log stores every request: at most {MAX_LOG_LIMIT} per unit \
                         (use sliding_window_counter for larger limits)"
                    ),
                ));
            }
            Algorithm::SlidingWindowLog
        }
        AlgorithmName::TokenBucket => {
            let burst = match r.burst {
                None => requests_per_unit,
                Some(b) => NonZeroU32::new(b).ok_or_else(|| {
                    ConfigError::new(file, format!("{at}.burst"), "must be greater than 0")
                })?,
            };
            Algorithm::TokenBucket { burst }
        }
    };
    Ok(Rule {
        name,
        limit: Some(Limit {
            requests_per_unit,
            unit,
            algorithm,
        }),
        shadow,
        quota: None,
    })
}

/// Validates a descriptor's `quota` against the rule beside it (`None`: no `rate_limit`).
fn quota(file: &Path, at: &str, q: wire::Quota, rule: Option<&Rule>) -> Result<Quota, ConfigError> {
    match rule {
        None => return Err(ConfigError::new(file, at, "needs a rate_limit beside it")),
        Some(Rule { limit: None, .. }) => {
            return Err(ConfigError::new(
                file,
                at,
                "cannot be combined with rate_limit.unlimited: true (nothing to lease)",
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

/// Unit names, in any case as the reference service accepts them.
fn unit(name: &str) -> Option<Unit> {
    match name.to_ascii_lowercase().as_str() {
        "second" => Some(Unit::Second),
        "minute" => Some(Unit::Minute),
        "hour" => Some(Unit::Hour),
        "day" => Some(Unit::Day),
        "week" => Some(Unit::Week),
        _ => None,
    }
}
