//! Conversion tests: a resource means what the same file means.

use super::*;
use crate::proto::rls_conf::{Quota, RateLimitReplace};

fn any(c: &RateLimitConfig) -> prost_types::Any {
    prost_types::Any {
        type_url: TYPE_URL.to_owned(),
        value: c.encode_to_vec(),
    }
}

fn policy(unit: RateLimitUnit, rpu: u32) -> Option<RateLimitPolicy> {
    Some(RateLimitPolicy {
        unit: unit as i32,
        requests_per_unit: rpu,
        ..Default::default()
    })
}

#[test]
fn every_key_means_what_the_file_says() {
    let resource = RateLimitConfig {
        name: "api".into(),
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            key: "tenant".into(),
            value: "acme".into(),
            rate_limit: Some(RateLimitPolicy {
                unit: RateLimitUnit::Minute as i32,
                requests_per_unit: 10,
                name: "per_tenant".into(),
                algorithm: "token_bucket".into(),
                burst: 20,
                unit_multiplier: 5,
                ..Default::default()
            }),
            detailed_metric: true,
            quota: Some(Quota {
                requests: 3,
                valid_ms: 500,
            }),
            descriptors: vec![RateLimitDescriptor {
                key: "path".into(),
                rate_limit: Some(RateLimitPolicy {
                    unit: RateLimitUnit::Year as i32,
                    requests_per_unit: 7,
                    replaces: vec![RateLimitReplace {
                        name: "per_tenant".into(),
                    }],
                    ..Default::default()
                }),
                shadow_mode: true,
                quota_mode: true,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let yaml = r#"
domain: d
descriptors:
  - key: tenant
    value: acme
    rate_limit: { unit: minute, requests_per_unit: 10, name: per_tenant, algorithm: token_bucket, burst: 20, unit_multiplier: 5 }
    detailed_metric: true
    quota: { requests: 3, valid_ms: 500 }
    descriptors:
      - key: path
        rate_limit: { unit: year, requests_per_unit: 7, replaces: [{ name: per_tenant }] }
        shadow_mode: true
        quota_mode: true
"#;
    let from_xds = parse_resources(&[any(&resource)], &LoadOptions::default()).unwrap();
    let files = source::Files {
        root: PathBuf::from("xds"),
        files: vec![(PathBuf::from("xds:api"), yaml.to_owned())],
    };
    let from_file = config::parse(&files).unwrap();
    for entries in [
        vec![("tenant", "acme")],
        vec![("tenant", "acme"), ("path", "/x")],
    ] {
        let a = from_xds.domain("d").unwrap().find(entries.iter().copied());
        let b = from_file.domain("d").unwrap().find(entries.iter().copied());
        assert!(a.is_some());
        assert_eq!(a, b, "{entries:?}");
    }
}

#[test]
fn an_invalid_resource_is_refused_with_its_field_path() {
    let resource = RateLimitConfig {
        name: "bad".into(),
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            key: "k".into(),
            rate_limit: Some(RateLimitPolicy {
                unit: 42,
                requests_per_unit: 1,
                ..Default::default()
            }),
            ..Default::default()
        }],
    };
    let e = parse_resources(&[any(&resource)], &LoadOptions::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("xds:bad: descriptors[0].rate_limit"),
        "{text}"
    );
}

#[test]
fn two_resources_with_one_domain_are_refused() {
    let one = RateLimitConfig {
        name: "a".into(),
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            key: "k".into(),
            rate_limit: policy(RateLimitUnit::Second, 1),
            ..Default::default()
        }],
    };
    let two = RateLimitConfig {
        name: "b".into(),
        ..one.clone()
    };
    assert!(parse_resources(&[any(&one), any(&two)], &LoadOptions::default()).is_err());
    let merged = LoadOptions {
        merge_domains: true,
        ..Default::default()
    };
    assert!(parse_resources(&[any(&one)], &merged).is_ok());
}

#[test]
fn a_resource_of_another_type_is_refused() {
    let mut wrong = any(&RateLimitConfig::default());
    wrong.type_url = "type.googleapis.com/envoy.config.cluster.v3.Cluster".into();
    let e = parse_resources(&[wrong], &LoadOptions::default()).unwrap_err();
    assert_eq!(e.path, "type_url");
}
