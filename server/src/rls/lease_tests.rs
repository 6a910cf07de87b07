//! Quota leases at the protocol layer: the header, the grant in `DescriptorStatus.quota`,
//! what is left after it, who gets none, the metrics, and reloads.

use super::*;
use crate::clock::ManualClock;
use crate::config::source::Files;
use crate::proto::rls::rate_limit_response::quota::ExpirationSpecifier;
use crate::proto::{Entry, RateLimitDescriptor};
use crate::store::memory::MemoryStore;
use std::path::PathBuf;

const S: u64 = 1_000_000_000;
/// The fake clock: 250 ms into a second.
const NOW: u64 = 1_000 * S + S / 4;

const LEASED: &str = r#"
domain: web
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 25, algorithm: token_bucket }
    quota: { requests: 10, valid_ms: 60000 }
  - key: user
    rate_limit: { unit: second, requests_per_unit: 100 }
    quota: { requests: 10, valid_ms: 5000 }
  - key: ip
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
    quota: { requests: 10, valid_ms: 1000 }
  - key: full
    rate_limit: { unit: hour, requests_per_unit: 1 }
"#;

fn config(yaml: &str) -> config::Config {
    let files = Files {
        root: PathBuf::from("t.yaml"),
        files: vec![(PathBuf::from("t.yaml"), yaml.to_owned())],
    };
    config::parse(&files).unwrap()
}

type Service = RlsService<MemoryStore<ManualClock>>;

fn service(yaml: &str) -> (Service, config::Shared, Arc<Metrics>) {
    let shared = config::Shared::new(config(yaml));
    let metrics = Arc::new(Metrics::new("memory"));
    let store = MemoryStore::with_clock(1_000, ManualClock::new(NOW));
    let svc = RlsService::new(shared.clone(), store, metrics.clone(), Options::default());
    (svc, shared, metrics)
}

fn desc(key: &str, value: &str, hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        limit: None,
        hits_addend: hits,
    }
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "web".into(),
        descriptors,
        hits_addend: 0,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn ask(svc: &Service, header: &str, ds: Vec<RateLimitDescriptor>) -> RateLimitResponse {
    block_on(svc.decide_asking(request(ds), &[header.as_bytes()])).unwrap()
}

/// (granted hits, valid_until in ns) of status `i`, if any.
fn grant(r: &RateLimitResponse, i: usize) -> Option<(u32, u64)> {
    let q = r.statuses[i].quota.as_ref()?;
    let Some(ExpirationSpecifier::ValidUntil(t)) = &q.expiration_specifier else {
        panic!("a grant without valid_until: {q:?}");
    };
    assert!(q.id.is_empty());
    Some((q.requests, t.seconds as u64 * S + t.nanos as u64))
}

fn metric(m: &Metrics, series: &str) -> f64 {
    let text = m.render();
    let line = text
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_caller_that_asks_gets_a_grant_and_the_rest_is_reported() {
    let (svc, _, metrics) = service(LEASED);
    let r = ask(&svc, "0", vec![desc("tenant", "a", None)]);
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(
        grant(&r, 0),
        Some((10, NOW + 60 * S)),
        "a bucket: now + valid_ms"
    );
    assert_eq!(r.statuses[0].limit_remaining, 14, "25 − 1 − 10");
    // A fixed window per second: never past the window's end.
    let r = ask(&svc, "0", vec![desc("user", "a", None)]);
    assert_eq!(grant(&r, 0), Some((10, 1_001 * S)));
    let granted = r#"floodgate_quota_granted_hits_total{domain="web"}"#;
    assert_eq!(metric(&metrics, granted), 20.0);
    // Only the descriptors asked for: index 1 here.
    let r = ask(
        &svc,
        "1",
        vec![desc("user", "b", None), desc("tenant", "b", None)],
    );
    assert_eq!((grant(&r, 0), grant(&r, 1).map(|g| g.0)), (None, Some(10)));
}

#[test]
fn grants_take_no_more_than_remains() {
    let (svc, _, metrics) = service(LEASED);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let r = ask(&svc, "0", vec![desc("tenant", "t", None)]);
        seen.push((
            r.overall_code == Code::Ok as i32,
            grant(&r, 0).map_or(0, |g| g.0),
            r.statuses[0].limit_remaining,
        ));
    }
    assert_eq!(
        seen,
        [
            (true, 10, 14),
            (true, 10, 3),
            (true, 2, 0),
            (false, 0, 0),
            (false, 0, 0)
        ]
    );
    let granted = r#"floodgate_quota_granted_hits_total{domain="web"}"#;
    assert_eq!(
        metric(&metrics, granted),
        22.0,
        "3 admitted + 22 granted = 25"
    );
}

#[test]
fn without_the_header_the_answers_are_those_of_a_config_without_quota() {
    let plain = LEASED.replace("    quota:", "    # quota:");
    let (leased, _, _) = service(LEASED);
    let (unleased, _, _) = service(&plain);
    for i in 0..30 {
        let ds = || {
            vec![
                desc("tenant", "x", None),
                desc("user", &format!("{}", i % 3), None),
            ]
        };
        let a = block_on(leased.decide(request(ds()))).unwrap();
        let b = block_on(unleased.decide(request(ds()))).unwrap();
        assert_eq!(a, b, "request {i}");
        assert!(a.statuses.iter().all(|s| s.quota.is_none()));
    }
}

#[test]
fn a_malformed_header_grants_nothing_and_is_counted() {
    let (svc, _, metrics) = service(LEASED);
    for header in ["1", "0,0", "x", "0 ", "-0"] {
        let r = ask(&svc, header, vec![desc("tenant", "m", None)]);
        assert_eq!(r.overall_code, Code::Ok as i32, "{header:?} is answered");
        assert_eq!(grant(&r, 0), None, "{header:?}");
    }
    let r = block_on(svc.decide_asking(request(vec![desc("tenant", "m", None)]), &[b"0", b"0"]));
    assert_eq!(grant(&r.unwrap(), 0), None, "sent twice");
    assert_eq!(
        metric(&metrics, "floodgate_quota_header_malformed_total"),
        6.0
    );
    // Empty: nothing asked, nothing counted.
    let r = ask(&svc, "", vec![desc("tenant", "m", None)]);
    assert_eq!(grant(&r, 0), None);
    assert_eq!(
        metric(&metrics, "floodgate_quota_header_malformed_total"),
        6.0
    );
    assert_eq!(
        r.statuses[0].limit_remaining,
        25 - 7,
        "each counted its own hit only"
    );
}

#[test]
fn a_check_only_refill_grants_without_counting_a_hit() {
    let (svc, _, _) = service(LEASED);
    let r = ask(&svc, "0", vec![desc("tenant", "r", Some(0))]);
    assert_eq!(grant(&r, 0).map(|g| g.0), Some(10));
    assert_eq!(
        r.statuses[0].limit_remaining, 15,
        "25 − 10: no hit of its own"
    );
}

#[test]
fn shadow_items_and_over_limit_requests_get_no_grant() {
    let (svc, _, _) = service(LEASED);
    let r = ask(&svc, "0", vec![desc("ip", "1", None)]);
    assert_eq!((r.overall_code, grant(&r, 0)), (Code::Ok as i32, None));
    assert_eq!(
        r.statuses[0].limit_remaining, 99,
        "a shadow limit counts its own hit"
    );
    ask(&svc, "", vec![desc("full", "f", None)]);
    let r = ask(
        &svc,
        "0",
        vec![desc("tenant", "o", None), desc("full", "f", None)],
    );
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(grant(&r, 0), None);
    let r = ask(&svc, "", vec![desc("tenant", "o", None)]);
    assert_eq!(
        r.statuses[0].limit_remaining, 24,
        "the rejected request took nothing"
    );
}

#[test]
fn after_a_reload_that_lowers_the_limit_new_grants_follow_it() {
    let (svc, shared, _) = service(LEASED);
    let r = ask(&svc, "0", vec![desc("tenant", "l", None)]);
    assert_eq!(grant(&r, 0).map(|g| g.0), Some(10));
    // 25 → 5 per hour: a new limit is a new counter; grants are sized by it.
    shared.set(config(
        &LEASED.replace("requests_per_unit: 25", "requests_per_unit: 5"),
    ));
    let r = ask(&svc, "0", vec![desc("tenant", "l", None)]);
    assert_eq!(grant(&r, 0).map(|g| g.0), Some(4));
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let r = ask(&svc, "0", vec![desc("tenant", "l", None)]);
    assert_eq!(
        (r.overall_code, grant(&r, 0)),
        (Code::OverLimit as i32, None)
    );
}

#[test]
fn quota_mode_and_blocked_limits_grant_nothing() {
    let (svc, _, _) = service(
        r#"
domain: web
descriptors:
  - key: soft
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
    quota: { requests: 10, valid_ms: 1000 }
  - key: banned
    rate_limit: { unit: hour, requests_per_unit: 0 }
    quota: { requests: 10, valid_ms: 1000 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100 }
    quota: { requests: 10, valid_ms: 1000 }
"#,
    );
    // A quota-mode limit may be over while the request is admitted: no lease on it.
    let r = ask(
        &svc,
        "0,1",
        vec![desc("soft", "a", None), desc("user", "a", None)],
    );
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!((grant(&r, 0), grant(&r, 1).map(|g| g.0)), (None, Some(10)));
    assert_eq!(r.statuses[0].limit_remaining, 99, "only its own hit taken");
    // A block has no counter to lease from (and rejects the request).
    let r = ask(&svc, "0", vec![desc("banned", "a", None)]);
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(grant(&r, 0), None);
}
