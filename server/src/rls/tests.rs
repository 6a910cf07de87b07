//! The protocol layer over the real memory store and a fake clock. `reference` holds the
//! answers that are envoyproxy/ratelimit's, and the operator options.

use super::status::no_limit_status;
use super::*;
use crate::clock::ManualClock;
use crate::config::source::Files;
use crate::proto::rls::rate_limit_response::rate_limit::Unit as PbUnit;
use crate::proto::{Entry, RateLimitDescriptor};
use crate::store::memory::MemoryStore;
use std::path::PathBuf;

const S: u64 = 1_000_000_000;

const CONFIG: &str = r#"
domain: web
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 2, name: per-user }
  - key: ip
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: plan
    rate_limit: { unit: week, requests_per_unit: 100, algorithm: token_bucket }
  - key: internal
    rate_limit: { unlimited: true }
"#;

fn service(capacity: usize, headers: bool) -> RlsService<MemoryStore<ManualClock>> {
    let headers = if headers {
        ResponseHeaders::Draft03
    } else {
        ResponseHeaders::None
    };
    let options = Options {
        headers,
        ..Options::default()
    };
    service_with(capacity, options)
}

fn service_with(capacity: usize, options: Options) -> RlsService<MemoryStore<ManualClock>> {
    let files = Files {
        root: PathBuf::from("t.yaml"),
        files: vec![(PathBuf::from("t.yaml"), CONFIG.to_owned())],
    };
    let config = config::Shared::new(config::parse(&files).unwrap());
    let store = MemoryStore::with_clock(capacity, ManualClock::new(1_000 * S + S / 4));
    RlsService::new(config, store, Arc::new(Metrics::new("memory")), options)
}

fn desc(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        limit: None,
        hits_addend: hits,
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: hits,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_request_hits_addend_of_zero_means_one_and_a_descriptor_overrides_it() {
    let svc = service(100, false);
    let user = || desc(&[("user", "a")], None);
    let r = block_on(svc.decide(request("web", vec![user()], 0))).unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 1, "0 counted as 1");
    let r = block_on(svc.decide(request("web", vec![desc(&[("user", "b")], Some(2))], 1))).unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 0,
        "the descriptor's 2 beat the request's 1"
    );
    let r = block_on(svc.decide(request("web", vec![desc(&[("user", "c")], None)], 3))).unwrap();
    assert_eq!(
        r.overall_code,
        Code::OverLimit as i32,
        "the request's 3 exceed 2"
    );
}

#[test]
fn a_descriptor_hits_addend_of_zero_is_check_only() {
    let svc = service(100, false);
    let probe = |v: &str| desc(&[("user", v)], Some(0));
    // The request's 0 still means 1 for the descriptors without their own.
    let r = block_on(svc.decide(request("web", vec![probe("a")], 0))).unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 2, "nothing counted");
    let r = block_on(svc.decide(request("web", vec![probe("a")], 5))).unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 2,
        "the request's 5 do not apply"
    );
    for left in [1, 0] {
        let r =
            block_on(svc.decide(request("web", vec![desc(&[("user", "a")], None)], 0))).unwrap();
        assert_eq!(r.statuses[0].limit_remaining, left);
    }
    // Full: the probe is over, and a request it belongs to consumes nothing.
    let other = || desc(&[("user", "b")], None);
    let r = block_on(svc.decide(request("web", vec![probe("a"), other()], 0))).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    let r = block_on(svc.decide(request("web", vec![other()], 0))).unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 1, "b was not consumed");
}

#[test]
fn one_status_per_descriptor_in_order() {
    let svc = service(100, false);
    let r = block_on(svc.decide(request(
        "web",
        vec![
            desc(&[("nomatch", "x")], None),
            desc(&[("user", "a")], None),
            desc(&[("internal", "yes")], None),
            desc(&[], None),
        ],
        0,
    )))
    .unwrap();
    assert_eq!(r.statuses.len(), 4);
    assert_eq!(r.statuses[0], no_limit_status(0));
    let limit = r.statuses[1].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit),
        ("per-user", 2)
    );
    assert_eq!(limit.unit, PbUnit::Second as i32);
    assert_eq!(r.statuses[1].limit_remaining, 1);
    assert_eq!(
        r.statuses[1].duration_until_reset,
        Some(prost_types::Duration {
            seconds: 0,
            nanos: 750_000_000
        })
    );
    assert_eq!(r.statuses[2], no_limit_status(u32::MAX), "unlimited");
    assert_eq!(r.statuses[3], no_limit_status(0), "no entries");
    assert_eq!(r.overall_code, Code::Ok as i32);
}

#[test]
fn over_limit_shows_in_the_status_and_overall() {
    let svc = service(100, false);
    for _ in 0..2 {
        block_on(svc.decide(request("web", vec![desc(&[("user", "a")], None)], 0))).unwrap();
    }
    let r = block_on(svc.decide(request(
        "web",
        vec![
            desc(&[("nomatch", "x")], None),
            desc(&[("user", "a")], None),
        ],
        0,
    )))
    .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].code, Code::Ok as i32);
    assert_eq!(r.statuses[1].code, Code::OverLimit as i32);
    assert!(
        r.response_headers_to_add.is_empty(),
        "headers are off by default"
    );
}

#[test]
fn over_limit_duration_is_until_one_hit_fits_and_zero_when_one_fits_now() {
    let svc = service(100, false);
    let user = |v: &str, hits| request("web", vec![desc(&[("user", v)], hits)], 0);
    for _ in 0..2 {
        block_on(svc.decide(user("a", None))).unwrap();
    }
    let r = block_on(svc.decide(user("a", Some(2)))).unwrap();
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    let until = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
    assert_eq!(
        r.statuses[0].duration_until_reset,
        until(0, 750_000_000),
        "the window's end"
    );
    // One of 2 used: a cost of 2 is over, but one hit would be admitted now.
    block_on(svc.decide(user("b", None))).unwrap();
    let r = block_on(svc.decide(user("b", Some(2)))).unwrap();
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].duration_until_reset, until(0, 0));
}

#[test]
fn shadow_mode_answers_ok_and_counts_the_would_be_rejection() {
    let svc = service(100, false);
    let ip = || desc(&[("ip", "1.2.3.4")], None);
    block_on(svc.decide(request("web", vec![ip()], 0))).unwrap();
    let r = block_on(svc.decide(request("web", vec![ip()], 0))).unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let text = svc.metrics.render();
    assert!(
        text.contains("floodgate_decisions_total{domain=\"web\",result=\"shadow_over_limit\"} 1"),
        "{text}"
    );
    assert!(text.contains("floodgate_decisions_total{domain=\"web\",result=\"ok\"} 1"));
}

#[test]
fn a_week_is_reported_as_unknown_with_its_true_count() {
    let svc = service(100, true);
    let r = block_on(svc.decide(request("web", vec![desc(&[("plan", "free")], None)], 0))).unwrap();
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.unit, limit.requests_per_unit),
        (PbUnit::Unknown as i32, 100)
    );
    assert_eq!(r.response_headers_to_add[0].value, "100");
}

#[test]
fn draft03_headers_describe_the_tightest_enforced_limit() {
    let svc = service(100, true);
    let r = block_on(svc.decide(request(
        "web",
        vec![
            desc(&[("plan", "free")], None),
            desc(&[("user", "a")], None),
            desc(&[("ip", "1")], None),
        ],
        0,
    )))
    .unwrap();
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        headers,
        [
            ("x-ratelimit-limit", "2"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset", "1"),
        ]
    );
}

#[test]
fn an_empty_domain_is_invalid_argument() {
    let svc = service(100, false);
    let e = block_on(svc.decide(request("", vec![desc(&[("user", "a")], None)], 0))).unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[test]
fn an_unknown_domain_limits_nothing() {
    let svc = service(100, false);
    let r = block_on(svc.decide(request("other", vec![desc(&[("user", "a")], None)], 0))).unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses, [no_limit_status(0)]);
}

#[test]
fn a_store_error_is_unavailable() {
    let svc = service(0, false);
    let e =
        block_on(svc.decide(request("web", vec![desc(&[("user", "a")], None)], 0))).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    assert!(svc
        .metrics
        .render()
        .contains("floodgate_errors_total{kind=\"store_full\"} 1"));
    // Requests with nothing to count never reach the store.
    let r = block_on(svc.decide(request("web", vec![desc(&[("nomatch", "a")], None)], 0)));
    assert!(r.is_ok());
}

fn service_of(yaml: &str) -> RlsService<MemoryStore<ManualClock>> {
    let files = Files {
        root: PathBuf::from("t.yaml"),
        files: vec![(PathBuf::from("t.yaml"), yaml.to_owned())],
    };
    let config = config::Shared::new(config::parse(&files).unwrap());
    let store = MemoryStore::with_clock(100, ManualClock::new(1_000 * S));
    RlsService::new(
        config,
        store,
        Arc::new(Metrics::new("memory")),
        Options::default(),
    )
}

const REPLACING: &str = r#"
domain: web
descriptors:
  - key: a
    rate_limit: { name: a, unit: minute, requests_per_unit: 1, replaces: [{ name: b }] }
  - key: b
    rate_limit: { name: b, unit: minute, requests_per_unit: 1, replaces: [{ name: a }] }
  - key: c
    rate_limit: { name: c, unit: minute, requests_per_unit: 1, replaces: [{ name: open }] }
  - key: open
    rate_limit: { name: open, unlimited: true }
"#;

#[test]
fn limits_replacing_each_other_both_drop_and_unlimited_is_never_dropped() {
    let svc = service_of(REPLACING);
    let ask = |descs: &[&str]| {
        let descriptors = descs.iter().map(|k| desc(&[(k, "x")], None)).collect();
        block_on(svc.decide(request("web", descriptors, 0))).unwrap()
    };
    for _ in 0..3 {
        let r = ask(&["a", "b"]);
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert!(r
            .statuses
            .iter()
            .all(|s| s.current_limit.is_none() && s.limit_remaining == 0));
    }
    let r = ask(&["c", "open"]);
    assert_eq!(
        r.statuses[1].limit_remaining,
        u32::MAX,
        "unlimited stays unlimited"
    );
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().name, "c");
    // The replaced requests counted nothing: `a` alone still has its one request.
    assert_eq!(ask(&["a"]).overall_code, Code::Ok as i32);
    assert_eq!(ask(&["a"]).overall_code, Code::OverLimit as i32);
}

mod concurrency;
mod reference;
mod windows;
#[test]
fn a_charge_counts_past_the_limit_and_says_where_it_stands() {
    let svc = service(100, false);
    let call = |hits, charge: Option<&str>| {
        let mut req = tonic::Request::new(request("web", vec![desc(&[("user", "a")], hits)], 0));
        if let Some(v) = charge {
            req.metadata_mut().insert(CHARGE_HEADER, v.parse().unwrap());
        }
        block_on(svc.should_rate_limit(req)).map(tonic::Response::into_inner)
    };
    // 2 per second: a charge of 5 is counted anyway, up to one limit of debt (4), which
    // fills the next window too: over the limit until it ends (the clock is a quarter
    // into this one).
    let r = call(Some(5), Some("1")).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let reset = r.statuses[0].duration_until_reset.unwrap();
    assert_eq!((reset.seconds, reset.nanos), (1, 750_000_000));
    let r = call(Some(0), None).unwrap();
    assert_eq!(
        r.overall_code,
        Code::OverLimit as i32,
        "a check sees the debt"
    );
    // Without the header the same cost is refused and counts nothing.
    let r = call(Some(5), None).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let err = call(Some(1), Some("yes")).unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(err.message(), "x-floodgate-charge must be 1");
}
