//! The protocol's rules, one response at a time.

use super::*;
use crate::proto::rls_conf::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;

fn node() -> Node {
    Node {
        id: "gateway-1".into(),
        ..Default::default()
    }
}

fn resource(domain: &str, unit: i32, rpu: u32) -> prost_types::Any {
    let c = RateLimitConfig {
        name: domain.into(),
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            key: "tenant".into(),
            rate_limit: Some(RateLimitPolicy {
                unit,
                requests_per_unit: rpu,
                ..Default::default()
            }),
            ..Default::default()
        }],
    };
    prost_types::Any {
        type_url: TYPE_URL.into(),
        value: c.encode_to_vec(),
    }
}

fn response(version: &str, nonce: &str, resources: Vec<prost_types::Any>) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version.into(),
        resources,
        canary: false,
        type_url: TYPE_URL.into(),
        nonce: nonce.into(),
    }
}

fn minute() -> i32 {
    RateLimitUnit::Minute as i32
}

#[test]
fn a_stream_opens_with_a_wildcard_subscription_for_our_node() {
    let s = Session::new(node());
    let r = s.subscribe();
    assert_eq!(r.type_url, TYPE_URL);
    assert_eq!(r.node.map(|n| n.id), Some("gateway-1".into()));
    assert!(r.resource_names.is_empty(), "wildcard");
    assert_eq!(
        (r.version_info.as_str(), r.response_nonce.as_str()),
        ("", "")
    );
    assert!(r.error_detail.is_none());
}

#[test]
fn a_valid_push_is_applied_and_acked_with_its_version_and_nonce() {
    let mut s = Session::new(node());
    let reply = s.on_response(
        &response("v1", "n1", vec![resource("edge", minute(), 5)]),
        &LoadOptions::default(),
    );
    let Reply::Apply {
        config,
        version,
        ack,
    } = reply
    else {
        panic!("a valid push was refused");
    };
    assert_eq!(config.domain_names().collect::<Vec<_>>(), ["edge"]);
    assert_eq!(version, "v1");
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("v1", "n1")
    );
    assert!(ack.error_detail.is_none());
    assert_eq!(s.applied(), "v1");
    // A reconnect says what is in force.
    assert_eq!(s.subscribe().version_info, "v1");
}

#[test]
fn an_invalid_push_is_nacked_with_the_field_path_and_the_last_good_version() {
    let mut s = Session::new(node());
    let options = LoadOptions::default();
    let _ = s.on_response(
        &response("v1", "n1", vec![resource("edge", minute(), 5)]),
        &options,
    );
    // Unit 0 is UNKNOWN: a limit without a unit.
    let reply = s.on_response(
        &response("v2", "n2", vec![resource("edge", 0, 5)]),
        &options,
    );
    let Reply::Reject { error, nack } = reply else {
        panic!("applied an invalid push");
    };
    assert_eq!(nack.version_info, "v1", "the version still in force");
    assert_eq!(nack.response_nonce, "n2", "the refused response's nonce");
    let detail = nack.error_detail.expect("error detail");
    assert_eq!(detail.code, INVALID_ARGUMENT);
    assert_eq!(detail.message, error);
    assert!(
        error.starts_with("xds:edge: descriptors[0].rate_limit"),
        "names the resource and field: {error}"
    );
    assert_eq!(s.applied(), "v1");
}

#[test]
fn a_nack_before_anything_was_applied_carries_an_empty_version() {
    let mut s = Session::new(node());
    let mut bad = resource("edge", minute(), 5);
    bad.value = vec![0xff, 0xff];
    let reply = s.on_response(&response("v1", "n1", vec![bad]), &LoadOptions::default());
    let Reply::Reject { error, nack } = reply else {
        panic!("applied an undecodable resource");
    };
    assert!(error.contains("cannot decode"), "{error}");
    assert_eq!(nack.version_info, "");
}

#[test]
fn a_response_of_another_type_is_nacked_not_taken_for_an_empty_set() {
    let mut s = Session::new(node());
    let options = LoadOptions::default();
    let _ = s.on_response(
        &response("v1", "n1", vec![resource("edge", minute(), 5)]),
        &options,
    );
    let mut other = response("v9", "n9", Vec::new());
    other.type_url = "type.googleapis.com/envoy.config.cluster.v3.Cluster".into();
    let Reply::Reject { error, nack } = s.on_response(&other, &options) else {
        panic!("took a cluster response for our configuration");
    };
    assert!(error.starts_with("type_url: expected"), "{error}");
    assert_eq!(
        (nack.version_info.as_str(), nack.type_url.as_str()),
        ("v1", TYPE_URL)
    );
}

#[test]
fn an_empty_set_of_our_type_empties_the_configuration() {
    let mut s = Session::new(node());
    let Reply::Apply { config, .. } =
        s.on_response(&response("v3", "n3", Vec::new()), &LoadOptions::default())
    else {
        panic!("an empty set is a valid state of the world");
    };
    assert_eq!(config.domain_names().count(), 0);
}

#[test]
fn two_resources_with_one_domain_are_refused_as_two_files_would_be() {
    let mut s = Session::new(node());
    let both = vec![resource("edge", minute(), 5), resource("edge", minute(), 6)];
    let reply = s.on_response(&response("v1", "n1", both), &LoadOptions::default());
    assert!(matches!(reply, Reply::Reject { .. }), "{reply:?}");
    let merged = LoadOptions {
        merge_domains: true,
        ..Default::default()
    };
    let both = vec![
        resource("edge", minute(), 5),
        resource("other", minute(), 6),
    ];
    let reply = s.on_response(&response("v2", "n2", both), &merged);
    assert!(matches!(reply, Reply::Apply { .. }), "{reply:?}");
}

#[test]
fn the_backoff_doubles_to_its_cap_and_restarts_after_a_response() {
    let ms = Duration::from_millis;
    let mut b = Backoff::new(ms(100), ms(10_000), 0.0).unwrap();
    let waits: Vec<u64> = (0..9).map(|_| b.failed(0.9).as_millis() as u64).collect();
    assert_eq!(
        waits,
        [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
    );
    b.reset();
    assert_eq!(b.failed(0.0), ms(100));
}

#[test]
fn the_reference_defaults_wait_10_s_doubling_to_60_s_spread_by_half() {
    let mut b = Backoff::default();
    let nominal: Vec<u64> = (0..5).map(|_| b.failed(0.5).as_secs()).collect();
    assert_eq!(nominal, [10, 20, 40, 60, 60]);
    b.reset();
    assert_eq!(b.failed(0.0), Duration::from_secs(5), "10 s less half");
    assert_eq!(b.failed(1.0), Duration::from_secs(30), "20 s and half");
}

#[test]
fn a_random_factor_keeps_every_wait_within_its_spread() {
    let first = Duration::from_secs(2);
    for unit in [0.0, 0.1, 0.25, 0.5, 0.75, 0.999] {
        let mut b = Backoff::new(first, Duration::from_secs(8), 0.25).unwrap();
        for nominal in [2.0, 4.0, 8.0, 8.0] {
            let wait = b.failed(unit).as_secs_f64();
            assert!(
                (nominal * 0.75 - 1e-9..=nominal * 1.25 + 1e-9).contains(&wait),
                "{unit}: {wait} not within 25% of {nominal}"
            );
        }
    }
    // Out-of-range draws are clamped, never a negative or runaway wait.
    let mut b = Backoff::new(first, first, 1.0).unwrap();
    assert_eq!(b.failed(-3.0), Duration::ZERO);
    assert_eq!(b.failed(7.0), first * 2);
}

#[test]
fn a_backoff_that_cannot_work_is_refused_with_the_reason() {
    let s = Duration::from_secs;
    let zero = Backoff::new(Duration::ZERO, s(1), 0.5).unwrap_err();
    assert!(zero.contains("initial interval"), "{zero}");
    let short = Backoff::new(s(10), s(5), 0.5).unwrap_err();
    assert!(short.contains("shorter than the initial"), "{short}");
    for spread in [-0.1, 1.5, f64::NAN] {
        let bad = Backoff::new(s(1), s(2), spread).unwrap_err();
        assert!(bad.contains("random factor"), "{bad}");
    }
}
