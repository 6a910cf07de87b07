//! Global mode end to end: real Envoys loading floodgate.wasm ask a rate limit service
//! over gRPC (the real floodgate-server, or a scripted or hung one where the test needs a
//! behaviour the real one does not have), in front of an upstream that counts.

use floodgate_integration::client::{get, statuses};
use floodgate_integration::fake_rls::{Scripted, Silent};
use floodgate_integration::{burst, client, configs, grpc_client, Envoy, Server, Upstream};
use floodgate_server::proto::rls::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use floodgate_server::proto::rls::RateLimitResponse;
use floodgate_server::proto::HeaderValue;
use futures::future::join_all;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A bucket of 30 per tenant refilling 30 an hour: unlike a fixed window, no boundary where
/// the count starts afresh mid-burst, and no whole request given back within a test.
const THIRTY_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 30, algorithm: token_bucket}
";

/// One global rule on `x-tenant-id` (with an `x-cost` cost header).
fn global(timeout_ms: u64, failure_mode: &str) -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": timeout_ms,
                "failure_mode": failure_mode},
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "cost": {"header": "x-cost"},
            "global": {}
        }],
        "failure_status": 503
    })
}

async fn envoy(plugin: &Value, upstream: &Upstream, rls: SocketAddr) -> Envoy {
    Envoy::start(&configs::floodgate_global(plugin, upstream.addr(), rls), 2).await
}

fn header(key: &str, value: &str) -> HeaderValue {
    HeaderValue {
        key: key.into(),
        value: value.into(),
        raw_value: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_envoys_share_one_global_limit() {
    let server = Server::start(THIRTY_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    // Generous timeout and fail closed: a slow debug build must show up as 503s, never
    // as requests slipping through.
    let plugin = global(2_000, "deny");
    let a = envoy(&plugin, &upstream, server.grpc()).await;
    let b = envoy(&plugin, &upstream, server.grpc()).await;
    let c = client();
    let (url_a, url_b) = (a.url("ingress", "/"), b.url("ingress", "/"));
    let calls = (0..100).map(|i| {
        let url = if i % 2 == 0 { &url_a } else { &url_b };
        get(&c, url, &[("x-tenant-id", "acme")])
    });
    let replies = join_all(calls).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&200), Some(&30), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&70), "{counts:?}");
    assert_eq!(
        upstream.count(),
        30,
        "rejected requests must never reach the upstream"
    );
    for r in replies.iter().filter(|r| r.status == 429) {
        let wait: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .expect("seconds");
        assert!((1..=120).contains(&wait), "retry-after {wait}");
    }
    floodgate_integration::wait::until("the answers counted", Duration::from_secs(10), || async {
        let (sa, sb) = (a.stats().await, b.stats().await);
        let sum =
            |name: &str| sa.get(name).copied().unwrap_or(0) + sb.get(name).copied().unwrap_or(0);
        // A rejection is the service's answer or, once one is in, the over-limit cache's.
        let counted = (
            sum("wasmcustom.floodgate.rls.ok"),
            sum("wasmcustom.floodgate.rls.over_limit")
                + sum("wasmcustom.floodgate.over_limit_cached"),
        );
        (counted == (30, 70)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ok_answer_adds_the_services_headers() {
    let rls = Scripted::start(RateLimitResponse {
        overall_code: Code::Ok as i32,
        request_headers_to_add: vec![header("x-rls-note", "checked")],
        response_headers_to_add: vec![header("x-rls-quota", "7")],
        ..RateLimitResponse::default()
    })
    .await;
    let upstream = Upstream::start().await;
    let envoy = envoy(&global(1_000, "deny"), &upstream, rls.addr()).await;
    let reply = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme"), ("x-cost", "4")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-rls-quota"), Some("7"));
    assert_eq!(
        upstream.headers()[0].get("x-rls-note").map(String::as_str),
        Some("checked")
    );
    let sent = rls.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].domain, "edge");
    assert_eq!(sent[0].descriptors[0].entries[0].key, "tenant");
    assert_eq!(sent[0].descriptors[0].entries[0].value, "acme");
    assert_eq!(sent[0].descriptors[0].hits_addend, Some(4));
}

fn over_limit() -> RateLimitResponse {
    RateLimitResponse {
        overall_code: Code::OverLimit as i32,
        statuses: vec![DescriptorStatus {
            code: Code::OverLimit as i32,
            current_limit: Some(RateLimit {
                name: "per-tenant".into(),
                requests_per_unit: 10,
                unit: Unit::Minute as i32,
                unit_multiplier: None,
            }),
            limit_remaining: 0,
            duration_until_reset: Some(prost_types::Duration {
                seconds: 42,
                nanos: 0,
            }),
            quota: None,
        }],
        response_headers_to_add: vec![header("x-rls-reason", "tenant quota")],
        raw_body: b"tenant quota exhausted, try later\n".to_vec(),
        ..RateLimitResponse::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_over_limit_answer_carries_the_body_and_headers() {
    let rls = Scripted::start(over_limit()).await;
    let upstream = Upstream::start().await;
    let envoy = envoy(&global(1_000, "allow"), &upstream, rls.addr()).await;
    let reply = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme")],
    )
    .await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.body, "tenant quota exhausted, try later\n");
    assert_eq!(reply.header("retry-after"), Some("42"));
    assert_eq!(reply.header("x-ratelimit-limit"), Some("10"));
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(reply.header("x-ratelimit-reset"), Some("42"));
    assert_eq!(reply.header("x-rls-reason"), Some("tenant quota"));
    // The over-limit cache answers the next ones with the same reply, counting down.
    let again = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme")],
    )
    .await;
    assert_eq!(again.status, 429);
    assert_eq!(again.body, reply.body);
    assert_eq!(again.header("x-rls-reason"), Some("tenant quota"));
    let wait: u64 = again
        .header("retry-after")
        .expect("retry-after")
        .parse()
        .expect("seconds");
    assert!((41..=42).contains(&wait), "retry-after {wait}");

    let grpc = grpc_client()
        .post(envoy.url("ingress", "/demo.Greeter/SayHello"))
        .header("content-type", "application/grpc")
        .header("x-tenant-id", "acme")
        .body(vec![0u8; 5])
        .send()
        .await
        .expect("grpc call");
    assert_eq!(
        grpc.headers().get("grpc-status").map(|v| v.as_bytes()),
        Some(&b"8"[..])
    );
    assert_eq!(upstream.count(), 0);
    envoy
        .expect_stat("wasmcustom.floodgate.rls.over_limit", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.over_limit_cached", 2)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_limiter_takes_the_failure_mode_and_is_counted() {
    let mut server = Server::start(THIRTY_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let open = envoy(&global(1_000, "allow"), &upstream, server.grpc()).await;
    let closed = envoy(&global(1_000, "deny"), &upstream, server.grpc()).await;
    server.stop();

    let allowed = burst(
        &client(),
        &open.url("ingress", "/"),
        &[("x-tenant-id", "a")],
        5,
    )
    .await;
    assert_eq!(statuses(&allowed).get(&200), Some(&5));
    open.expect_stat("wasmcustom.floodgate.failure_mode_allowed", 5)
        .await;
    open.expect_stat("wasmcustom.floodgate.rls.error.unavailable", 5)
        .await;

    let denied = burst(
        &client(),
        &closed.url("ingress", "/"),
        &[("x-tenant-id", "a")],
        5,
    )
    .await;
    assert_eq!(
        statuses(&denied).get(&503),
        Some(&5),
        "{:?}",
        statuses(&denied)
    );
    assert_eq!(denied[0].body, "rate limiter unavailable\n");
    closed
        .expect_stat("wasmcustom.floodgate.failure_mode_denied", 5)
        .await;
    assert_eq!(upstream.count(), 5);

    // The limiter comes back: limiting resumes.
    server.restart(&[]);
    let c = client();
    let url = closed.url("ingress", "/");
    let back =
        floodgate_integration::wait::until("the limiter back", Duration::from_secs(10), || {
            let (c, url) = (c.clone(), url.clone());
            async move {
                let r = get(&c, &url, &[("x-tenant-id", "b")]).await;
                (r.status == 200).then_some(r)
            }
        })
        .await;
    assert_eq!(back.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grpc_error_status_takes_the_failure_mode_and_is_counted() {
    // The status arrives in a trailers-only answer: read from its headers, never mistaken
    // for an answer to decode.
    let rls = Scripted::failing(tonic::Code::Internal, "store broken").await;
    let upstream = Upstream::start().await;
    let closed = envoy(&global(1_000, "deny"), &upstream, rls.addr()).await;
    let open = envoy(&global(1_000, "allow"), &upstream, rls.addr()).await;
    let denied = get(
        &client(),
        &closed.url("ingress", "/"),
        &[("x-tenant-id", "a")],
    )
    .await;
    assert_eq!(denied.status, 503);
    closed
        .expect_stat("wasmcustom.floodgate.rls.error.status", 1)
        .await;
    let allowed = get(
        &client(),
        &open.url("ingress", "/"),
        &[("x-tenant-id", "a")],
    )
    .await;
    assert_eq!(allowed.status, 200);
    open.expect_stat("wasmcustom.floodgate.rls.error.status", 1)
        .await;
    open.expect_stat("wasmcustom.floodgate.failure_mode_allowed", 1)
        .await;
    assert_eq!(rls.calls(), 2);
    assert_eq!(upstream.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_cluster_takes_the_failure_mode() {
    let upstream = Upstream::start().await;
    let mut plugin = global(1_000, "deny");
    plugin["rls"]["cluster"] = json!("no-such-cluster");
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let reply = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "a")],
    )
    .await;
    assert_eq!(reply.status, 503);
    envoy
        .expect_stat("wasmcustom.floodgate.rls.error.not_sent", 1)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_limiter_never_hangs_requests() {
    let rls = Silent::start().await;
    let upstream = Upstream::start().await;
    let timeout = Duration::from_millis(200);
    let envoy = envoy(&global(200, "allow"), &upstream, rls.addr()).await;
    let c = client();
    let url = envoy.url("ingress", "/");
    let calls = (0..10).map(|i| {
        let (c, url) = (&c, &url);
        async move {
            let started = Instant::now();
            let tenant = format!("t{i}");
            let reply = get(c, url, &[("x-tenant-id", &tenant)]).await;
            (reply.status, started.elapsed())
        }
    });
    for (status, took) in join_all(calls).await {
        assert_eq!(status, 200, "failure_mode allow lets it through");
        // Envoy's timers may fire a few milliseconds early (they start from its loop's
        // cached clock); what matters is that the timeout, not a failure, ended the wait.
        assert!(
            took >= timeout * 3 / 4,
            "answered in {took:?}, long before the timeout"
        );
        assert!(took < timeout + Duration::from_millis(800), "took {took:?}");
    }
    envoy
        .expect_stat("wasmcustom.floodgate.rls.error.timeout", 10)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_local_rejection_prevents_the_call() {
    let server = Server::start(THIRTY_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let mut plugin = global(1_000, "deny");
    plugin["rules"].as_array_mut().expect("rules").push(json!({
        "name": "per-client-burst",
        "descriptors": [{"key": "client", "source": "remote_address"}],
        "local": {"capacity": 2, "refill_per_second": 0}
    }));
    let envoy = envoy(&plugin, &upstream, server.grpc()).await;
    let c = client();
    let url = envoy.url("ingress", "/");
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(get(&c, &url, &[("x-tenant-id", "acme")]).await.status);
    }
    assert_eq!(codes, [200, 200, 429, 429, 429, 429]);
    assert_eq!(
        server
            .metric("floodgate_requests_total{result=\"ok\"}")
            .await,
        2.0,
        "only the locally admitted requests were asked about"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cost_header_consumes_that_many() {
    let server = Server::start(THIRTY_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let envoy = envoy(&global(2_000, "deny"), &upstream, server.grpc()).await;
    let c = client();
    let url = envoy.url("ingress", "/");
    let heavy = get(&c, &url, &[("x-tenant-id", "acme"), ("x-cost", "10")]).await;
    assert_eq!(heavy.status, 200);
    let mut admitted = 0;
    for _ in 0..25 {
        if get(&c, &url, &[("x-tenant-id", "acme")]).await.status == 200 {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 20, "a bucket of 30, 10 taken by one request");
    let bad = get(&c, &url, &[("x-tenant-id", "acme"), ("x-cost", "lots")]).await;
    assert_eq!(bad.status, 400);
    envoy
        .expect_stat("wasmcustom.floodgate.invalid_cost", 1)
        .await;
}
