//! Degraded mode end to end: a real Envoy loading floodgate.wasm, the real
//! floodgate-server killed and started again on the same port, and an upstream that
//! counts. A global rule with a fallback is decided by its local bucket while the server
//! is down, and by the server again once it is back; a rule without one keeps
//! `rls.failure_mode`.

use floodgate_integration::client::{get, statuses};
use floodgate_integration::fake_rls::{Scripted, Silent};
use floodgate_integration::{burst, client, configs, wait, Envoy, Reply, Server, Upstream};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

/// The server's limit: a bucket of 3 per tenant, refilling 3 an hour. A token bucket, not
/// the default fixed window: a test crossing a window's boundary would find a fixed
/// window's count started afresh (more admitted than the 3), and this bucket gives back
/// no whole request within a test (one every 20 minutes).
const THREE_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 3
      algorithm: token_bucket
";

/// How a burst of 20 fared against a fallback of 5: exactly 5 admitted, the rest 429
/// with the fallback's headers, and only the admitted reached the upstream.
fn assert_fallback_decided(replies: &[Reply], upstream: &Upstream, tenant: &str) {
    let counts = statuses(replies);
    assert_eq!(counts.get(&200), Some(&5), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&15), "{counts:?}");
    for r in replies.iter().filter(|r| r.status == 429) {
        // From the fallback bucket: a token every 20 s.
        assert!((1..=20).contains(&retry_after(r)), "{r:?}");
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    }
    assert_eq!(
        upstream.count_for(tenant),
        5,
        "only the admitted reached it"
    );
}

/// One token every 20 s: the burst of a test never sees a refill.
const FALLBACK_RATE: f64 = 0.05;

/// Two global rules: `/guarded/` with a fallback of 5, `/plain/` without one.
fn plugin(failure_mode: &str) -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                "failure_mode": failure_mode},
        "rules": [
            {"name": "guarded", "match": {"path_prefix": "/guarded/"},
             "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
             "global": {"fallback": {"capacity": 5, "refill_per_second": FALLBACK_RATE}}},
            {"name": "plain", "match": {"path_prefix": "/plain/"},
             "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
             "global": {}}
        ],
        "failure_status": 503
    })
}

async fn envoy(plugin: &Value, upstream: &Upstream, rls: SocketAddr) -> Envoy {
    Envoy::start(&configs::floodgate_global(plugin, upstream.addr(), rls), 2).await
}

/// The seconds of a rejection's `retry-after`.
fn retry_after(reply: &Reply) -> u64 {
    reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("a 429 without retry-after: {reply:?}"))
        .parse()
        .expect("whole seconds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_limiter_leaves_the_fallback_to_decide() {
    let mut server = Server::start(THREE_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let envoy = envoy(&plugin("deny"), &upstream, server.grpc()).await;
    server.stop();

    let replies = burst(
        &client(),
        &envoy.url("ingress", "/guarded/x"),
        &[("x-tenant-id", "acme")],
        20,
    )
    .await;
    assert_fallback_decided(&replies, &upstream, "acme");
    envoy
        .expect_stat("wasmcustom.floodgate.rls.error.unavailable", 20)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.fallback.allowed", 5)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.fallback.denied", 15)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.guarded.denied", 15)
        .await;
    assert_eq!(
        envoy.stat("wasmcustom.floodgate.failure_mode_denied").await,
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_limiter_takes_the_rule_back() {
    let mut server = Server::start(THREE_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let envoy = envoy(&plugin("deny"), &upstream, server.grpc()).await;
    let c = client();
    let url = envoy.url("ingress", "/guarded/x");
    server.stop();
    // Down: tenant b's fallback admits its 5, then nothing.
    let mut down = Vec::new();
    for _ in 0..6 {
        down.push(get(&c, &url, &[("x-tenant-id", "b")]).await.status);
    }
    assert_eq!(down, [200, 200, 200, 200, 200, 429]);

    // A new process on the same port, ready (its ready line) before this returns.
    server.restart(&[]);
    // Envoy reconnects on the next call; probe with another tenant until the server has
    // decided one.
    wait::until("the server answering", Duration::from_secs(10), || {
        let (c, url, server) = (c.clone(), url.clone(), &server);
        async move {
            get(&c, &url, &[("x-tenant-id", "probe")]).await;
            let decided = server
                .metric("floodgate_requests_total{result=\"ok\"}")
                .await;
            (decided >= 1.0).then_some(())
        }
    })
    .await;

    // Back: the server's bucket of 3 decides b again, whatever its empty fallback says.
    let mut back = Vec::new();
    for _ in 0..5 {
        back.push(get(&c, &url, &[("x-tenant-id", "b")]).await);
    }
    let codes: Vec<u16> = back.iter().map(|r| r.status).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429]);
    for r in back.iter().filter(|r| r.status == 429) {
        assert_eq!(
            r.header("x-ratelimit-limit"),
            Some("3"),
            "the server's limit"
        );
        // The server's next token, 20 minutes after the first of the 3 (less the seconds
        // since), not the fallback's (at most 20 s away).
        assert!((21..=1_200).contains(&retry_after(r)), "{r:?}");
    }
    assert_eq!(upstream.count_for("b"), 5 + 3);
    // The first rejection is the server's; the second, the over-limit cache's.
    assert_eq!(
        server
            .metric("floodgate_requests_total{result=\"over_limit\"}")
            .await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rule_without_a_fallback_keeps_the_failure_mode() {
    let mut server = Server::start(THREE_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let closed = envoy(&plugin("deny"), &upstream, server.grpc()).await;
    let open = envoy(&plugin("allow"), &upstream, server.grpc()).await;
    server.stop();
    let c = client();

    let denied = burst(
        &c,
        &closed.url("ingress", "/plain/x"),
        &[("x-tenant-id", "d")],
        8,
    )
    .await;
    assert_eq!(
        statuses(&denied).get(&503),
        Some(&8),
        "{:?}",
        statuses(&denied)
    );
    assert_eq!(denied[0].body, "rate limiter unavailable\n");
    assert_eq!(upstream.count_for("d"), 0);
    closed
        .expect_stat("wasmcustom.floodgate.failure_mode_denied", 8)
        .await;

    let allowed = burst(
        &c,
        &open.url("ingress", "/plain/x"),
        &[("x-tenant-id", "o")],
        8,
    )
    .await;
    assert_eq!(
        statuses(&allowed).get(&200),
        Some(&8),
        "{:?}",
        statuses(&allowed)
    );
    assert_eq!(upstream.count_for("o"), 8);
    open.expect_stat("wasmcustom.floodgate.failure_mode_allowed", 8)
        .await;
    for envoy in [&closed, &open] {
        envoy
            .expect_stat("wasmcustom.floodgate.rls.error.unavailable", 8)
            .await;
        assert_eq!(
            envoy.stat("wasmcustom.floodgate.fallback.allowed").await,
            Some(0)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_or_failing_limiter_leaves_the_fallback_to_decide() {
    let upstream = Upstream::start().await;
    let c = client();

    // No answer within rls.timeout_ms.
    let silent = Silent::start().await;
    let mut hung_plugin = plugin("deny");
    hung_plugin["rls"]["timeout_ms"] = json!(200);
    let hung = envoy(&hung_plugin, &upstream, silent.addr()).await;
    let url = hung.url("ingress", "/guarded/x");
    let replies = burst(&c, &url, &[("x-tenant-id", "hung")], 20).await;
    assert_fallback_decided(&replies, &upstream, "hung");
    hung.expect_stat("wasmcustom.floodgate.rls.error.timeout", 20)
        .await;

    // An error status.
    let failing = Scripted::failing(tonic::Code::Internal, "store broken").await;
    let broken = envoy(&plugin("deny"), &upstream, failing.addr()).await;
    let url = broken.url("ingress", "/guarded/x");
    let replies = burst(&c, &url, &[("x-tenant-id", "broken")], 20).await;
    assert_fallback_decided(&replies, &upstream, "broken");
    broken
        .expect_stat("wasmcustom.floodgate.rls.error.status", 20)
        .await;
    assert_eq!(failing.calls(), 20, "every request still asked the service");
}
