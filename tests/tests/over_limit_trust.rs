//! What a remembered denial may reject, and for how long, end to end: real Envoys loading
//! floodgate.wasm, the real floodgate-server (memory store) and an upstream that counts.
//!
//! The service decides a request from all of its descriptors together (`replaces` drops
//! a limit another descriptor's limit replaces; a `quota_mode` limit rejects only with
//! every other quota-mode limit of the request), so a denial is remembered for the whole
//! set of descriptors it was given, never for one descriptor on its own. And a denial is
//! trusted for at most `rls.over_limit_cache_max_seconds`, whatever reset the service
//! reported: a service that restarts with empty memory is asked again within that time.

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, wait, Envoy, Server, Upstream};
use serde_json::{json, Value};
use std::time::Duration;

/// Two global rules: the tenant, and the plan when the request says one.
fn plugin(extra_rls: Value) -> Value {
    let mut rls = json!({"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                         "failure_mode": "deny"});
    if let (Some(rls), Some(extra)) = (rls.as_object_mut(), extra_rls.as_object()) {
        rls.extend(extra.clone());
    }
    json!({
        "rls": rls,
        "rules": [
            {"name": "tenant", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
             "global": {"quota": false}},
            {"name": "plan", "descriptors": [{"key": "plan", "header": "x-plan"}],
             "global": {"quota": false}}
        ],
        "failure_status": 503
    })
}

/// floodgate-server on `limits`, an upstream, and an Envoy in front with `plugin`.
///
/// The limits of this file are token buckets refilling in an hour what they hold, not the
/// default fixed windows: a test crossing a window's boundary would find a fixed window's
/// count started afresh (a request admitted where a denial is asserted, a cached denial's
/// reset cut short), and these buckets give back no whole request within a test.
async fn start(limits: &str, plugin: &Value) -> (Server, Upstream, Envoy) {
    let server = Server::start(limits, &[]);
    let upstream = Upstream::start().await;
    let yaml = configs::floodgate_global(plugin, upstream.addr(), server.grpc());
    let envoy = Envoy::start(&yaml, 2).await;
    (server, upstream, envoy)
}

/// The statuses of `n` requests sent one after the other with `headers`.
async fn send(envoy: &Envoy, headers: &[(&str, &str)], n: usize) -> Vec<u16> {
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(get(&c, &url, headers).await.status);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_denial_of_the_default_limit_does_not_reject_what_a_replacing_limit_admits() {
    let (_server, upstream, envoy) = start(
        "
domain: edge
descriptors:
  - key: tenant
    rate_limit: {name: tenant-default, unit: hour, requests_per_unit: 2, algorithm: token_bucket}
  - key: plan
    value: premium
    rate_limit:
      unit: hour
      requests_per_unit: 100
      algorithm: token_bucket
      replaces: [{name: tenant-default}]
",
        &plugin(json!({})),
    )
    .await;
    let premium = [("x-tenant-id", "acme"), ("x-plan", "premium")];
    let plain = [("x-tenant-id", "acme")];
    assert_eq!(send(&envoy, &premium, 4).await, [200; 4]);
    assert_eq!(send(&envoy, &plain, 3).await, [200, 200, 429]);
    // The service replaces tenant-default for premium requests: it admits them, and so
    // must the proxy, whatever it remembers about plain ones.
    assert_eq!(send(&envoy, &premium, 4).await, [200; 4]);
    assert_eq!(upstream.count(), 10);
    // Plain requests are still rejected, from the cache.
    assert_eq!(send(&envoy, &plain, 2).await, [429; 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_denial_of_a_soft_limit_does_not_reject_a_request_another_soft_limit_admits() {
    let (_server, upstream, envoy) = start(
        "
domain: edge
descriptors:
  - key: tenant
    value: acme
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
  - key: plan
    value: burst
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: token_bucket}
",
        &plugin(json!({})),
    )
    .await;
    let alone = [("x-tenant-id", "acme")];
    let with_burst = [("x-tenant-id", "acme"), ("x-plan", "burst")];
    // Alone, the tenant's soft limit is every quota-mode limit of the request: over.
    assert_eq!(send(&envoy, &alone, 3).await, [200, 429, 429]);
    // With the burst plan beside it, one soft limit still has room: admitted.
    assert_eq!(send(&envoy, &with_burst, 3).await, [200; 3]);
    assert_eq!(upstream.count(), 4);
}

/// A bucket of 2 refilling 2 an hour: two requests, then every other is denied for half an
/// hour. (A fixed window of an hour would admit more past its boundary, and within 3 s of
/// it answer a `retry-after` no longer than the cap.)
const TWO_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_service_is_asked_again_by_every_envoy_within_the_cap() {
    const CAP_S: u64 = 3;
    let plugin = plugin(json!({"over_limit_cache_max_seconds": CAP_S}));
    let mut server = Server::start(TWO_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let yaml = configs::floodgate_global(&plugin, upstream.addr(), server.grpc());
    let envoys = [Envoy::start(&yaml, 2).await, Envoy::start(&yaml, 2).await];
    let acme = [("x-tenant-id", "acme")];
    for envoy in &envoys {
        assert_eq!(send(envoy, &acme, 1).await, [200]);
    }
    for envoy in &envoys {
        let r = get(&client(), &envoy.url("ingress", "/"), &acme).await;
        assert_eq!(r.status, 429);
        // The service's own word on when to come back: up to half an hour, not the cap.
        let wait: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .expect("s");
        assert!(wait > CAP_S && wait <= 1_800, "retry-after {wait}");
        // Remembered now: rejected from the cache.
        assert_eq!(send(envoy, &acme, 2).await, [429, 429]);
        envoy
            .expect_stat("wasmcustom.floodgate.over_limit_cached", 2)
            .await;
    }
    // The service comes back with empty memory: it admits two more requests for acme,
    // and each Envoy, asking again within the cap, gets one of them.
    server.restart(&[]);
    for envoy in &envoys {
        let (c, url) = (client(), envoy.url("ingress", "/"));
        wait::until(
            "the restarted service to be asked again",
            Duration::from_secs(CAP_S + 20),
            || async { (get(&c, &url, &acme).await.status == 200).then_some(()) },
        )
        .await;
    }
    assert_eq!(upstream.count(), 4);
}
