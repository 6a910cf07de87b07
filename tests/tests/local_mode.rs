//! Local mode end to end: a real Envoy (two workers) loading the built floodgate.wasm,
//! in front of an upstream that counts what reaches it.

use floodgate_integration::client::{get, statuses};
use floodgate_integration::{burst, client, configs, grpc_client, Envoy, Upstream};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn per_tenant(capacity: u64, refill: f64) -> Value {
    json!({"rules": [{
        "name": "per-tenant",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": capacity, "refill_per_second": refill}
    }]})
}

async fn start(plugin: &Value) -> (Envoy, Upstream) {
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&configs::floodgate_local(plugin, upstream.addr()), 2).await;
    (envoy, upstream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_200_gets_exactly_the_capacity_across_workers() {
    let (envoy, upstream) = start(&per_tenant(50, 0.0)).await;
    let url = envoy.url("ingress", "/api/items");
    let replies = burst(&client(), &url, &[("x-tenant-id", "acme")], 200).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&200), Some(&50), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&150), "{counts:?}");
    assert_eq!(
        upstream.count(),
        50,
        "rejected requests must never reach the upstream"
    );

    // Another tenant has its own bucket.
    let other = burst(&client(), &url, &[("x-tenant-id", "globex")], 10).await;
    assert_eq!(statuses(&other).get(&200), Some(&10));
    assert_eq!(upstream.count_for("globex"), 10);

    envoy.expect_stat("wasmcustom.floodgate.denied", 150).await;
    envoy.expect_stat("wasmcustom.floodgate.allowed", 60).await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.per-tenant.denied", 150)
        .await;
    envoy.expect_stat("wasmcustom.floodgate.buckets", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rejections_carry_retry_after_and_ratelimit_headers() {
    let (envoy, _upstream) = start(&per_tenant(2, 0.5)).await;
    let url = envoy.url("ingress", "/");
    let c = client();
    for _ in 0..2 {
        assert_eq!(get(&c, &url, &[("x-tenant-id", "a")]).await.status, 200);
    }
    let denied = get(&c, &url, &[("x-tenant-id", "a")]).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.body, "rate limited\n");
    assert_eq!(denied.header("retry-after"), Some("2"));
    assert_eq!(denied.header("x-ratelimit-limit"), Some("2"));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(denied.header("x-ratelimit-reset"), Some("4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rule_whose_header_is_absent_does_not_apply() {
    let (envoy, upstream) = start(&per_tenant(1, 0.0)).await;
    let url = envoy.url("ingress", "/");
    let replies = burst(&client(), &url, &[], 20).await;
    assert_eq!(statuses(&replies).get(&200), Some(&20));
    assert_eq!(upstream.count(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refill_brings_tokens_back_at_the_configured_rate() {
    let rate = 20.0;
    // A bucket of 20 holds a second of refill, so a client that stalls (a loaded machine)
    // loses no token unless it stalls for a whole second: what is counted is the refill,
    // not how fast the client can ask.
    let (envoy, upstream) = start(&per_tenant(20, rate)).await;
    let url = envoy.url("ingress", "/");
    let c = client();
    let ask = || async { get(&c, &url, &[("x-tenant-id", "r")]).await.status == 200 };
    // Drain the bucket, then ask as fast as we can for a while.
    while ask().await {}
    let before = upstream.count();
    let start = Instant::now();
    let mut admitted = 0u64;
    while start.elapsed() < Duration::from_millis(1500) {
        if ask().await {
            admitted += 1;
        }
    }
    // Tokens refilled since the last ask are still in the bucket: take them too, so that
    // the bucket is empty again at both ends of the measured time.
    while ask().await {
        admitted += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(upstream.count() - before, admitted);
    let expected = rate * elapsed;
    assert!(
        (admitted as f64) <= expected + 1.0 && (admitted as f64) >= expected - 2.0,
        "{admitted} admitted in {elapsed:.3}s at {rate}/s (expected about {expected:.1})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shadow_rules_never_reject_but_count() {
    let mut plugin = per_tenant(1, 0.0);
    plugin["rules"][0]["shadow"] = json!(true);
    let (envoy, upstream) = start(&plugin).await;
    let replies = burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "s")],
        30,
    )
    .await;
    assert_eq!(statuses(&replies).get(&200), Some(&30));
    assert_eq!(upstream.count(), 30);
    envoy
        .expect_stat("wasmcustom.floodgate.shadow_denied", 29)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.per-tenant.shadow_denied", 29)
        .await;
    envoy.expect_stat("wasmcustom.floodgate.denied", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_requests_are_rejected_with_resource_exhausted() {
    let (envoy, upstream) = start(&per_tenant(1, 0.0)).await;
    let url = envoy.url("ingress", "/demo.Greeter/SayHello");
    let c = grpc_client();
    let call = || {
        c.post(&url)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("x-tenant-id", "g")
            .body(vec![0u8, 0, 0, 0, 0])
            .send()
    };
    call().await.expect("first call");
    let denied = call().await.expect("second call");
    assert_eq!(denied.status().as_u16(), 200, "gRPC errors travel in a 200");
    let headers = denied.headers();
    assert_eq!(
        headers.get("grpc-status").map(|v| v.as_bytes()),
        Some(&b"8"[..])
    );
    assert_eq!(
        headers.get("retry-after"),
        None,
        "no refill, so no retry time"
    );
    assert_eq!(upstream.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn allowed_responses_carry_headers_when_configured() {
    let mut plugin = per_tenant(10, 1.0);
    plugin["response"] = json!({"headers_on_allowed": true});
    let (envoy, _upstream) = start(&plugin).await;
    let reply = get(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "h")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-ratelimit-limit"), Some("10"));
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("9"));
    assert_eq!(reply.header("x-ratelimit-reset"), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_invalid_configuration_is_refused_naming_the_field() {
    let upstream = Upstream::start().await;
    let yaml = configs::floodgate_local(&per_tenant(0, 1.0), upstream.addr());
    let (status, log) = Envoy::refuse(&yaml).await;
    assert!(!status.success());
    assert!(
        log.contains("invalid configuration: rules[0].local.capacity: must be at least 1"),
        "the log must name the field:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_rule_metrics_reach_prometheus_with_a_rule_tag() {
    let (envoy, _upstream) = start(&per_tenant(1, 0.0)).await;
    burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "p")],
        3,
    )
    .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rule.per-tenant.denied", 2)
        .await;
    let text = envoy.prometheus().await;
    assert!(
        text.contains("floodgate_rule_denied{rule=\"per-tenant\"} 2"),
        "{text}"
    );
    assert!(text.contains("floodgate_denied{} 2"), "{text}");
}

/// 100 000 distinct tenants: the bucket table stays at its cap and Envoy's memory flat.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_distinct_tenants_keeps_memory_bounded() {
    let mut plugin = per_tenant(5, 1.0);
    plugin["max_buckets"] = json!(1000);
    let (envoy, upstream) = start(&plugin).await;
    let url = envoy.url("ingress", "/");
    let c = client();
    let send = |from: usize, to: usize| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            let mut tasks = Vec::new();
            for lane in 0..32 {
                let (c, url) = (c.clone(), url.clone());
                tasks.push(tokio::spawn(async move {
                    for i in (from + lane..to).step_by(32) {
                        let tenant = format!("tenant-{i}");
                        let reply = get(&c, &url, &[("x-tenant-id", &tenant)]).await;
                        assert_eq!(reply.status, 200, "a new tenant has a full bucket");
                    }
                }));
            }
            for t in tasks {
                t.await.expect("lane");
            }
        }
    };
    send(0, 20_000).await;
    let rss_early = envoy.rss_kib();
    send(20_000, 100_000).await;
    let rss_late = envoy.rss_kib();
    eprintln!("rss {rss_early} -> {rss_late} KiB");
    assert_eq!(upstream.count(), 100_000);
    envoy
        .expect_stat("wasmcustom.floodgate.allowed", 100_000)
        .await;
    let buckets = envoy
        .stat("wasmcustom.floodgate.buckets")
        .await
        .expect("gauge");
    assert!(buckets <= 1000, "{buckets} buckets for a cap of 1000");
    assert!(
        rss_late <= rss_early + 8 * 1024,
        "Envoy grew from {rss_early} KiB to {rss_late} KiB over 80 000 new tenants"
    );
}
