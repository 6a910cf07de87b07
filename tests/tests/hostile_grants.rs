//! Quota leases from a hostile or buggy rate limit service, end to end: a real Envoy
//! loading floodgate.wasm asking a scripted service that grants every call `u32::MAX`
//! hits valid until the year 2100. The filter keeps at most `rls.max_grant_requests` hits
//! of a grant, for at most `rls.max_grant_valid_ms`, and counts each grant it clamps.

use floodgate_integration::client::get;
use floodgate_integration::fake_rls::Scripted;
use floodgate_integration::{client, configs, wait, Envoy, Upstream};
use floodgate_server::proto::rls::rate_limit_response::quota::ExpirationSpecifier;
use floodgate_server::proto::rls::rate_limit_response::{Code, DescriptorStatus, Quota};
use floodgate_server::proto::rls::RateLimitResponse;
use serde_json::{json, Value};
use std::time::Duration;

/// 2100-01-01T00:00:00Z.
const YEAR_2100_S: i64 = 4_102_444_800;

/// OK, with a grant of every hit there is, valid for 75 years.
fn boundless_grant() -> RateLimitResponse {
    RateLimitResponse {
        overall_code: Code::Ok as i32,
        statuses: vec![DescriptorStatus {
            code: Code::Ok as i32,
            quota: Some(Quota {
                requests: u32::MAX,
                expiration_specifier: Some(ExpirationSpecifier::ValidUntil(
                    prost_types::Timestamp {
                        seconds: YEAR_2100_S,
                        nanos: 0,
                    },
                )),
                id: String::new(),
            }),
            ..DescriptorStatus::default()
        }],
        ..RateLimitResponse::default()
    }
}

/// The tenant plugin (leasing by default) with `bounds` in its `rls` section.
fn plugin(bounds: Value) -> Value {
    let mut plugin = configs::global_tenant_plugin();
    if let (Some(rls), Some(bounds)) = (plugin["rls"].as_object_mut(), bounds.as_object()) {
        rls.extend(bounds.clone());
    }
    plugin
}

async fn start(plugin: &Value) -> (Scripted, Upstream, Envoy) {
    let rls = Scripted::start(boundless_grant()).await;
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_global(plugin, upstream.addr(), rls.addr()),
        2,
    )
    .await;
    (rls, upstream, envoy)
}

/// Sends `n` requests for tenant acme one after the other; all must be admitted.
async fn admitted(envoy: &Envoy, n: usize) {
    let (c, url) = (client(), envoy.url("ingress", "/"));
    for _ in 0..n {
        assert_eq!(get(&c, &url, &[("x-tenant-id", "acme")]).await.status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_is_kept_at_the_default_bounds_and_the_clamp_counted() {
    let (rls, upstream, envoy) = start(&plugin(json!({}))).await;
    // 1,000,000 hits for an hour still cover these: one call.
    admitted(&envoy, 99).await;
    assert_eq!(upstream.count(), 99);
    assert_eq!(rls.calls(), 1);
    envoy
        .expect_stat("wasmcustom.floodgate.lease.grants_clamped", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.lease.allowed", 98)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_is_spent_no_further_than_max_grant_requests() {
    let (rls, _upstream, envoy) = start(&plugin(json!({"max_grant_requests": 10}))).await;
    admitted(&envoy, 40).await;
    // Each grant pays for at most 10 requests: 40 requests need at least 4 grants, each
    // one a call (the first request's, then background refills).
    let calls = rls.calls();
    assert!(calls >= 4, "{calls} calls for 40 requests");
    envoy
        .expect_stat("wasmcustom.floodgate.lease.grants_clamped", calls)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_is_spent_no_later_than_max_grant_valid_ms() {
    let (rls, _upstream, envoy) = start(&plugin(json!({"max_grant_valid_ms": 500}))).await;
    admitted(&envoy, 5).await;
    assert_eq!(rls.calls(), 1, "the grant pays for the others");
    // Once half a second has passed, the grant is void: the next request calls again.
    let (c, url) = (client(), envoy.url("ingress", "/"));
    wait::until(
        "a call once the clamped grant expires",
        Duration::from_secs(20),
        || async {
            assert_eq!(get(&c, &url, &[("x-tenant-id", "acme")]).await.status, 200);
            (rls.calls() > 1).then_some(())
        },
    )
    .await;
}
