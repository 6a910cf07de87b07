//! Matching tests over small configurations written inline.

use super::source::Files;
use super::{parse, Config, Rule};
use crate::algorithm::{Algorithm, Unit};
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
