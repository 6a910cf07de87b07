//! Quota leases on the wire: the real binary, a real tonic client sending the
//! `x-floodgate-quota` header as gRPC metadata, on the memory store and on a real Redis.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::quota::ExpirationSpecifier;
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::redis::RedisServer;
use support::{ask, descriptor, envoy_request, eventually, Server};
use tonic::transport::Channel;

/// Two domains with the same limits; only `leased` has quotas.
const CONFIG: &str = r#"
domain: leased
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 25 }
    quota: { requests: 10, valid_ms: 60000 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 25, algorithm: sliding_window_log }
    quota: { requests: 10, valid_ms: 30000 }
"#;

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("leased.yaml");
    let tmp = dir.join(".leased.yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Calls ShouldRateLimit with `x-floodgate-quota: header`.
async fn ask_leasing(
    client: &mut RateLimitServiceClient<Channel>,
    req: RateLimitRequest,
    header: &str,
) -> RateLimitResponse {
    let mut call = tonic::Request::new(req);
    call.metadata_mut()
        .insert("x-floodgate-quota", header.parse().unwrap());
    client.should_rate_limit(call).await.unwrap().into_inner()
}

/// Granted hits and valid_until (ns since the epoch) of the first status.
fn grant(r: &RateLimitResponse) -> Option<(u32, u128)> {
    let q = r.statuses[0].quota.as_ref()?;
    let Some(ExpirationSpecifier::ValidUntil(t)) = &q.expiration_specifier else {
        panic!("no valid_until: {q:?}");
    };
    Some((
        q.requests,
        t.seconds as u128 * 1_000_000_000 + t.nanos as u128,
    ))
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// 25 per hour with a quota of 10, asked five times: 10, 10, 2, then over; admitted plus
/// granted is 25 exactly, and each grant is valid for its `valid_ms` from the decision.
async fn grants_follow_what_remains(server: &Server) {
    let mut client = server.client().await;
    for (key, valid_ms) in [("tenant", 60_000u128), ("user", 30_000)] {
        let req = || envoy_request("leased", vec![descriptor(&[(key, "a")])]);
        let mut seen = Vec::new();
        let mut total = 0;
        for _ in 0..5 {
            let before = now_ns();
            let r = ask_leasing(&mut client, req(), "0").await;
            let after = now_ns();
            let g = grant(&r);
            if let Some((_, until)) = g {
                // The store decided between sending and answer; 1 ms of slack for Redis's
                // clock against ours.
                let slack = 1_000_000;
                assert!(until + slack >= before + valid_ms * 1_000_000, "{key}");
                assert!(until <= after + valid_ms * 1_000_000 + slack, "{key}");
            }
            if r.overall_code == Code::Ok as i32 {
                total += 1 + g.map_or(0, |g| g.0);
            }
            seen.push((
                r.overall_code == Code::Ok as i32,
                g.map_or(0, |g| g.0),
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
            ],
            "{key}"
        );
        assert_eq!(total, 25, "{key}");
    }
    assert_eq!(
        server
            .metric("floodgate_quota_granted_hits_total{domain=\"leased\"}")
            .await,
        Some(44.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_on_the_memory_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &[]);
    grants_follow_what_remains(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_on_redis() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &write_config(dir.path(), CONFIG),
        &["--redis-url", &redis.url()],
    );
    grants_follow_what_remains(&server).await;
}

/// What Envoy's native filter sends (no header) gets exactly the answers of the same
/// configuration without `quota`, and never a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_header_a_quota_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let leased = Server::start(&write_config(dir.path(), CONFIG), &[]);
    let other = tempfile::tempdir().unwrap();
    let plain_config = CONFIG.replace("    quota:", "    # quota:");
    let plain = Server::start(&write_config(other.path(), &plain_config), &[]);
    let (mut a, mut b) = (leased.client().await, plain.client().await);
    let shape = |r: &RateLimitResponse| {
        assert!(r.statuses.iter().all(|s| s.quota.is_none()), "{r:?}");
        let statuses: Vec<_> = r
            .statuses
            .iter()
            .map(|s| (s.code, s.limit_remaining, s.current_limit.clone()))
            .collect();
        (r.overall_code, statuses)
    };
    for i in 0..30 {
        let req = envoy_request(
            "leased",
            vec![
                descriptor(&[("tenant", "t")]),
                descriptor(&[("user", if i % 2 == 0 { "x" } else { "y" })]),
            ],
        );
        let (ra, rb) = (
            ask(&mut a, req.clone()).await.unwrap(),
            ask(&mut b, req).await.unwrap(),
        );
        assert_eq!(shape(&ra), shape(&rb), "request {i}");
    }
    assert_eq!(
        leased
            .metric("floodgate_quota_granted_hits_total{domain=\"leased\"}")
            .await,
        Some(0.0)
    );
}

/// A malformed header is answered with no grant and counted; a check-only refill
/// (`hits_addend` 0 with the header) grants without a hit of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_headers_and_check_only_refills() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &[]);
    let mut client = server.client().await;
    let req = |v: &str| envoy_request("leased", vec![descriptor(&[("tenant", v)])]);
    for header in ["1", "0,0", "zero"] {
        let r = ask_leasing(&mut client, req("m"), header).await;
        assert_eq!(r.overall_code, Code::Ok as i32, "{header:?}");
        assert_eq!(grant(&r), None, "{header:?}");
    }
    assert_eq!(
        server
            .metric("floodgate_quota_header_malformed_total")
            .await,
        Some(3.0)
    );
    let mut refill = req("r");
    refill.descriptors[0].hits_addend = Some(0);
    let r = ask_leasing(&mut client, refill, "0").await;
    assert_eq!(grant(&r).map(|g| g.0), Some(10));
    assert_eq!(r.statuses[0].limit_remaining, 15, "no hit of its own");
}

/// After a reload that lowers the limit, new grants follow the new limit. (Grants made
/// before are the client's, until their valid_until.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reload_grants_follow_the_new_limit() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), CONFIG);
    let server = Server::start(dir.path(), &["--watch-interval-ms", "50"]);
    let mut client = server.client().await;
    let req = || envoy_request("leased", vec![descriptor(&[("tenant", "r")])]);
    let r = ask_leasing(&mut client, req(), "0").await;
    assert_eq!(grant(&r).map(|g| g.0), Some(10));
    write_config(
        dir.path(),
        &CONFIG.replacen("requests_per_unit: 25 }", "requests_per_unit: 4 }", 1),
    );
    eventually(Duration::from_secs(20), "the reload", || async {
        server
            .metric("floodgate_config_reloads_total{result=\"success\"}")
            .await
            >= Some(1.0)
    })
    .await;
    let r = ask_leasing(&mut client, req(), "0").await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        4
    );
    assert_eq!(
        grant(&r).map(|g| g.0),
        Some(3),
        "4 − 1: sized by the new limit"
    );
    let r = ask_leasing(&mut client, req(), "0").await;
    assert_eq!((r.overall_code, grant(&r)), (Code::OverLimit as i32, None));
}

/// `--refuse-quota`: a caller that asks for a lease is decided as if it had not asked (no
/// grant, one hit counted), never refused outright, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_quota_is_decided_without_a_lease() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &["--refuse-quota"]);
    let mut client = server.client().await;
    let req = || envoy_request("leased", vec![descriptor(&[("tenant", "t")])]);
    for left in [24, 23] {
        let r = ask_leasing(&mut client, req(), "0").await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert_eq!(grant(&r), None);
        assert_eq!(
            r.statuses[0].limit_remaining, left,
            "one hit, nothing ahead"
        );
    }
    assert_eq!(
        server.metric("floodgate_quota_header_refused_total").await,
        Some(2.0)
    );
    assert_eq!(
        server
            .metric("floodgate_quota_granted_hits_total{domain=\"leased\"}")
            .await,
        Some(0.0)
    );
}
