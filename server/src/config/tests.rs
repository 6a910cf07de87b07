//! Matching tests over small configurations written inline.

use super::source::Files;
use super::{parse, Config, Rule};
use crate::algorithm::{Algorithm, Unit, Window};
use std::path::PathBuf;

fn config(yaml: &str) -> Config {
    let files = Files {
        root: PathBuf::from("test.yaml"),
        files: vec![(PathBuf::from("test.yaml"), yaml.to_owned())],
    };
    match parse(&files) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

fn find<'c>(c: &'c Config, entries: &[(&str, &str)]) -> Option<&'c Rule> {
    c.domain("d").unwrap().find(entries.iter().copied())
}

fn rpu(rule: Option<&Rule>) -> Option<u32> {
    rule.and_then(|r| r.limit)
        .map(|l| l.requests_per_unit.get())
}

const TREE: &str = r#"
domain: d
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 100 }
    descriptors:
      - key: path
        value: /api/*
        rate_limit: { unit: second, requests_per_unit: 20 }
      - key: path
        value: /api/admin*
        rate_limit: { unit: second, requests_per_unit: 2 }
      - key: path
        value: /api/health
        rate_limit: { unlimited: true, name: health }
      - key: path
        rate_limit: { unit: second, requests_per_unit: 50, algorithm: token_bucket, burst: 5 }
  - key: tenant
    value: acme
    rate_limit: { unit: hour, requests_per_unit: 7, algorithm: sliding_window_log }
  - key: remote_address
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 3, name: per-ip }
  - key: group
    descriptors:
      - key: user
        rate_limit: { unit: day, requests_per_unit: 9 }
"#;

#[test]
fn exact_value_beats_key_only() {
    let c = config(TREE);
    assert_eq!(rpu(find(&c, &[("tenant", "acme")])), Some(7));
    assert_eq!(rpu(find(&c, &[("tenant", "other")])), Some(100));
}

#[test]
fn nested_entries_walk_down_and_the_first_wildcard_in_configuration_order_wins() {
    let c = config(TREE);
    assert_eq!(
        rpu(find(&c, &[("tenant", "x"), ("path", "/api/users")])),
        Some(20)
    );
    // As the reference: `/api/*` is written before `/api/admin*`, so it wins, although
    // the other is longer.
    assert_eq!(
        rpu(find(&c, &[("tenant", "x"), ("path", "/api/admin/1")])),
        Some(20)
    );
    assert_eq!(
        rpu(find(&c, &[("tenant", "x"), ("path", "/other")])),
        Some(50)
    );
    let tb = find(&c, &[("tenant", "x"), ("path", "/other")]).unwrap();
    assert_eq!(tb.limit.unwrap().unit, Unit::Second);
    assert!(matches!(
        tb.limit.unwrap().algorithm,
        Algorithm::TokenBucket { burst } if burst.get() == 5
    ));
}

#[test]
fn unlimited_matches_without_a_limit() {
    let c = config(TREE);
    let rule = find(&c, &[("tenant", "x"), ("path", "/api/health")]).unwrap();
    assert_eq!(rule.limit, None);
    assert_eq!(rule.name.as_deref(), Some("health"));
}

#[test]
fn shadow_mode_is_carried_on_the_rule() {
    let c = config(TREE);
    let rule = find(&c, &[("remote_address", "10.0.0.1")]).unwrap();
    assert!(rule.shadow);
    assert_eq!(rule.name.as_deref(), Some("per-ip"));
    assert!(!find(&c, &[("tenant", "x")]).unwrap().shadow);
}

#[test]
fn no_match_means_no_limit() {
    let c = config(TREE);
    assert!(find(&c, &[("unknown", "x")]).is_none(), "unknown key");
    assert!(find(&c, &[]).is_none(), "no entries");
    assert!(
        find(&c, &[("group", "g")]).is_none(),
        "stops on a node without a limit"
    );
    assert_eq!(rpu(find(&c, &[("group", "g"), ("user", "u")])), Some(9));
    assert!(
        find(&c, &[("group", "g"), ("user", "u"), ("extra", "e")]).is_none(),
        "deeper than the tree"
    );
    assert!(
        find(&c, &[("path", "/api/x")]).is_none(),
        "child key at the top level"
    );
    assert!(c.domain("other").is_none());
}

#[test]
fn numeric_values_match_as_text() {
    let c = config(
        "domain: d\ndescriptors:\n  - key: status\n    value: 429\n    rate_limit: { unit: SECOND, requests_per_unit: 1 }\n",
    );
    assert_eq!(rpu(find(&c, &[("status", "429")])), Some(1));
}

const REFERENCE_KEYS: &str = r#"
domain: d
descriptors:
  - key: file
    value: docs/*
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: file
    value: img/*
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: route
    value: api/*
    value_to_metric: true
    share_threshold: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: client
    detailed_metric: true
    rate_limit:
      name: per-client
      unit: month
      requests_per_unit: 0
      replaces: [{ name: other }, { name: third }]
  - key: plan
    value: pro
    quota_mode: true
    rate_limit: { unit: YEAR }
    metadata: { tier: pro }
  - key: internal
    rate_limit: { unlimited: true, requests_per_unit: 5 }
"#;

/// The entries as the counter of their match counts them.
fn counted<'a>(c: &'a Config, entries: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let domain = c.domain("d").unwrap();
    let found = domain.lookup(entries.iter().copied()).unwrap();
    found.counted(entries.iter().copied()).collect()
}

#[test]
fn share_threshold_counts_every_matching_value_as_the_wildcard() {
    let c = config(REFERENCE_KEYS);
    let shared = counted(&c, &[("file", "docs/a")]);
    assert_eq!(shared, counted(&c, &[("file", "docs/b")]));
    assert_eq!(shared, [("file", "docs/*")]);
    // Without share_threshold, each value has its own counter.
    assert_ne!(
        counted(&c, &[("file", "img/a")]),
        counted(&c, &[("file", "img/b")])
    );
    // A shared wildcard above the limit shares the level it is on, not the ones below.
    assert_eq!(
        counted(&c, &[("route", "api/x"), ("method", "GET")]),
        counted(&c, &[("route", "api/y"), ("method", "GET")])
    );
    assert_ne!(
        counted(&c, &[("route", "api/x"), ("method", "GET")]),
        counted(&c, &[("route", "api/x"), ("method", "PUT")])
    );
}

#[test]
fn per_limit_series_are_named_by_configured_paths() {
    let c = config(REFERENCE_KEYS);
    let metric = |entries: &[(&str, &str)]| find(&c, entries).unwrap().metric.clone();
    assert_eq!(metric(&[("client", "10.0.0.1")]).as_deref(), Some("client"));
    assert_eq!(
        metric(&[("route", "api/x"), ("method", "GET")]).as_deref(),
        Some("route_api/*.method"),
        "value_to_metric above the limit"
    );
    assert_eq!(metric(&[("file", "docs/a")]), None);
}

#[test]
fn blocks_units_quota_replaces_and_metadata_are_carried_on_the_rule() {
    use super::RuleKind;
    let c = config(REFERENCE_KEYS);
    let client = find(&c, &[("client", "x")]).unwrap();
    assert_eq!(client.kind(), RuleKind::Blocked(Window::of(Unit::Month)));
    let replaces: Vec<&str> = client.replaces.iter().map(|n| &**n).collect();
    assert_eq!(replaces, ["other", "third"]);
    let pro = find(&c, &[("plan", "pro")]).unwrap();
    assert_eq!(
        pro.kind(),
        RuleKind::Blocked(Window::of(Unit::Year)),
        "no requests_per_unit"
    );
    assert!(pro.quota_mode);
    assert!(pro.metadata.as_ref().unwrap().fields.contains_key("tier"));
    assert_eq!(
        find(&c, &[("internal", "x")]).unwrap().kind(),
        RuleKind::Unlimited
    );
}

#[test]
fn a_quota_belongs_to_the_rule_beside_it() {
    let c = config(
        r#"
domain: d
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 300 }
    quota: { requests: 10, valid_ms: 60000 }
    descriptors:
      - key: path
        rate_limit: { unit: second, requests_per_unit: 5 }
"#,
    );
    let q = find(&c, &[("tenant", "a")]).unwrap().quota.unwrap();
    assert_eq!((q.requests.get(), q.valid_ms), (10, 60_000));
    let child = find(&c, &[("tenant", "a"), ("path", "/")]).unwrap();
    assert_eq!(child.quota, None, "a quota is not inherited");
}
