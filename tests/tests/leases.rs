//! Quota leases end to end: real Envoys loading floodgate.wasm, the real floodgate-server
//! (memory, or Redis behind two replicas) granting leases, and an upstream that counts.
//! Calls are read from the server's own `/metrics`, never inferred from the filter's.

use floodgate_integration::client::{get, statuses, Reply};
use floodgate_integration::soak::redis::Redis;
use floodgate_integration::{burst, client, configs, wait, Envoy, Server, Upstream};
use futures::future::join_all;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Hits one grant takes (`quota.requests` below).
const N: usize = 10;
/// The tenant's limit.
const LIMIT: usize = 300;

/// 300 per hour for each tenant, leased 10 at a time for a minute.
const LEASED: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 300
    quota: { requests: 10, valid_ms: 60000 }
";

/// The same limit with no `quota`: the service never grants.
const UNLEASED: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 300
";

/// Leases of 100 that expire after 1.5 s, under a limit never reached.
const SHORT_LEASES: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 100000
    quota: { requests: 100, valid_ms: 1500 }
";

/// One global rule per tenant; leases are on by default.
fn plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                "failure_mode": "deny"},
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {}
        }],
        "failure_status": 503
    })
}

async fn envoy(upstream: SocketAddr, server: &Server) -> Envoy {
    let yaml = configs::floodgate_global(&plugin(), upstream, server.grpc());
    Envoy::start(&yaml, 2).await
}

/// Returns once at least 30 s are left in the current hour, more than a storm below takes
/// on a loaded machine: the limits are fixed windows of an hour, whose count would start
/// afresh at a boundary inside a storm (more than [`LIMIT`] admitted), and whose grants
/// end at the window's end whatever their `valid_ms` (a grant cut short calls again).
async fn clear_of_the_hours_end() {
    wait::clear_of_window_end(Duration::from_secs(3_600), Duration::from_secs(30)).await;
}

/// Decisions the server made (calls it answered), OK and over limit together.
async fn calls(server: &Server) -> u64 {
    let ok = server
        .metric(r#"floodgate_requests_total{result="ok"}"#)
        .await;
    let over = server
        .metric(r#"floodgate_requests_total{result="over_limit"}"#)
        .await;
    (ok + over) as u64
}

/// `total` GETs for tenant `acme` spread over `urls`, `clients` clients per URL each
/// sending one at a time.
async fn storm(urls: &[String], clients: usize, total: usize) -> Vec<Reply> {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks = urls.iter().flat_map(|url| {
        let next = next.clone();
        (0..clients).map(move |_| {
            let (next, url, c) = (next.clone(), url.clone(), client());
            tokio::spawn(async move {
                let mut replies = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    replies.push(get(&c, &url, &[("x-tenant-id", "acme")]).await);
                }
                replies
            })
        })
    });
    join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.expect("client task"))
        .collect()
}

/// Clients per Envoy in the storms below: at most this many of the tenant's requests
/// are in flight in one Envoy at once, so at most this many calls (`c` in the bound
/// of `docs/leases-and-over-limit-cache.md`).
const CLIENTS: usize = 8;

/// The bound on what one Envoy holds unspent (`docs/leases-and-over-limit-cache.md`):
/// below half a grant when the last refill started, plus that refill and every call in
/// flight then, each at most `N`.
fn held_bound() -> usize {
    N.div_ceil(2) + N * (1 + CLIENTS)
}

/// The issue's scenario against `servers` (one per Envoy; one server for both, or
/// replicas sharing Redis).
async fn two_envoys(servers: [&Server; 2]) {
    let upstream = Upstream::start().await;
    let envoys = [
        envoy(upstream.addr(), servers[0]).await,
        envoy(upstream.addr(), servers[1]).await,
    ];
    let urls: Vec<String> = envoys.iter().map(|e| e.url("ingress", "/")).collect();
    clear_of_the_hours_end().await;
    let replies = storm(&urls, CLIENTS, 1_200).await;
    let counts = statuses(&replies);
    let admitted = counts.get(&200).copied().unwrap_or(0);
    let logs = || format!("{}\n{}", servers[0].log(), envoys[0].log());
    assert!(
        admitted <= LIMIT,
        "{counts:?}: leasing admitted more than the limit"
    );
    assert!(
        admitted >= LIMIT - 2 * held_bound(),
        "{counts:?}: under-admitted by more than the bound\n{}",
        logs()
    );
    let mut errors = Vec::new();
    for e in &envoys {
        let stats = e.stats().await;
        errors.extend(
            stats
                .into_iter()
                .filter(|(k, v)| k.contains("rls.error") && *v > 0),
        );
    }
    assert_eq!(
        admitted + counts.get(&429).copied().unwrap_or(0),
        1_200,
        "{counts:?}, call failures {errors:?}\n{}",
        logs()
    );
    assert_eq!(
        upstream.count(),
        admitted as u64,
        "the upstream sees the admitted"
    );
    let calls = calls(servers[0]).await
        + if servers[0].grpc() == servers[1].grpc() {
            0
        } else {
            calls(servers[1]).await
        };
    assert!(calls * 10 <= 1_200, "{calls} calls for 1200 requests");
    // The filter flushes its counters once a second.
    let from_grants = wait::until(
        "requests decided from grants",
        Duration::from_secs(10),
        || {
            let envoys = &envoys;
            async move {
                let mut n = 0;
                for e in envoys {
                    n += e
                        .stat("wasmcustom.floodgate.lease.allowed")
                        .await
                        .unwrap_or(0);
                }
                (n > 0).then_some(n)
            }
        },
    )
    .await;
    eprintln!("admitted {admitted}, {calls} calls, {from_grants} decided from grants");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_across_two_envoys_hold_the_limit_with_few_calls() {
    let server = Server::start(LEASED, &[]);
    two_envoys([&server, &server]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_across_two_envoys_over_redis_with_two_replicas() {
    let redis = Redis::start().expect("redis-server");
    let a = Server::start(LEASED, &["--redis-url", &redis.url()]);
    let b = Server::start(LEASED, &["--redis-url", &redis.url()]);
    two_envoys([&a, &b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_request_is_decided_from_a_grant_after_valid_until() {
    let server = Server::start(SHORT_LEASES, &[]);
    let upstream = Upstream::start().await;
    let envoy = envoy(upstream.addr(), &server).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let acme = [("x-tenant-id", "acme")];
    // The grant must live its whole 1.5 s: an hour's end would cut it short.
    clear_of_the_hours_end().await;
    // One call brings a grant of 100; the next requests spend it with no call.
    assert_eq!(get(&c, &url, &acme).await.status, 200);
    let after_first = calls(&server).await;
    for _ in 0..5 {
        assert_eq!(get(&c, &url, &acme).await.status, 200);
    }
    assert_eq!(calls(&server).await, after_first, "decided from the grant");
    envoy
        .expect_stat("wasmcustom.floodgate.lease.allowed", 5)
        .await;
    // The grant's valid_until passes: time itself is the condition, no readiness to poll.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert_eq!(get(&c, &url, &acme).await.status, 200);
    assert_eq!(
        calls(&server).await,
        after_first + 1,
        "the first request after valid_until calls"
    );
    envoy
        .expect_stat("wasmcustom.floodgate.lease.allowed", 5)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_service_that_never_grants_gets_a_call_per_request_as_before() {
    let server = Server::start(UNLEASED, &[]);
    let upstream = Upstream::start().await;
    let envoy = envoy(upstream.addr(), &server).await;
    let replies = burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme")],
        40,
    )
    .await;
    assert_eq!(statuses(&replies).get(&200), Some(&40));
    assert_eq!(upstream.count(), 40);
    assert_eq!(calls(&server).await, 40);
    envoy
        .expect_stat("wasmcustom.floodgate.rls.calls", 40)
        .await;
    assert_eq!(
        envoy.stat("wasmcustom.floodgate.lease.allowed").await,
        Some(0)
    );
    assert_eq!(
        envoy.stat("wasmcustom.floodgate.lease.grants").await,
        Some(0)
    );
}

/// Envoy's own filter never asks for quota: against a configuration with `quota` it gets
/// exactly what it gets without, and the server grants nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoys_native_filter_gets_the_same_counts_with_quota_configured() {
    let mut seen = Vec::new();
    for limits in [UNLEASED, LEASED] {
        let server = Server::start(limits, &[]);
        let upstream = Upstream::start().await;
        let yaml = configs::native_ratelimit(
            "edge",
            "x-tenant-id",
            "tenant",
            upstream.addr(),
            server.grpc(),
        );
        let envoy = Envoy::start(&yaml, 2).await;
        clear_of_the_hours_end().await;
        let replies = storm(&[envoy.url("ingress", "/")], CLIENTS, 400).await;
        let counts = statuses(&replies);
        seen.push((
            counts.get(&200).copied(),
            counts.get(&429).copied(),
            upstream.count(),
        ));
        assert_eq!(calls(&server).await, 400, "one call per request");
        assert_eq!(
            server
                .metric(r#"floodgate_quota_granted_hits_total{domain="edge"}"#)
                .await,
            0.0
        );
    }
    assert_eq!(seen[0], (Some(LIMIT), Some(100), LIMIT as u64));
    assert_eq!(seen[0], seen[1]);
}
