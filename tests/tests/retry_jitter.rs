//! `response.retry_after_jitter` end to end: a real Envoy loading floodgate.wasm, one
//! client over its limit many times. Every `retry-after` is at or after the moment a
//! token really returns (never an invitation to retry early), at most the jitter's
//! fraction later, and the answers spread so that clients do not return in lockstep.

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, Envoy, Upstream};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Instant;

/// One token every 50 s: the exact wait after the one admitted request.
const REFILL_SECONDS: f64 = 50.0;

/// The `t` parameter of a draft-10 `RateLimit` field with one item.
fn draft10_reset(field: &str) -> u64 {
    field
        .rsplit(";t=")
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no t in {field:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jittered_retry_after_is_never_early_never_past_the_fraction_and_spread() {
    let plugin = json!({
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "local": {"capacity": 1, "refill_per_second": 1.0 / REFILL_SECONDS}
        }],
        "response": {"headers": "both", "retry_after_jitter": 1.0}
    });
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let admitted = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(admitted.status, 200);
    let start = Instant::now();
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let denied = get(&c, &url, &[("x-tenant-id", "acme")]).await;
        let elapsed = start.elapsed().as_secs_f64();
        assert_eq!(denied.status, 429);
        let retry: u64 = denied
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a 429 without a numeric retry-after: {denied:?}"));
        // The token returns REFILL_SECONDS after the admission, which came before `start`.
        assert!(
            retry as f64 + elapsed >= REFILL_SECONDS,
            "retry-after {retry} invites a retry before the token returns ({elapsed:.3} s in)"
        );
        assert!(
            retry <= 2 * REFILL_SECONDS as u64,
            "retry-after {retry} is past the jitter's fraction"
        );
        let reset = draft10_reset(denied.header("ratelimit").unwrap_or_default());
        assert!(reset <= retry, "t={reset} after retry-after {retry}");
        let full: u64 = denied
            .header("x-ratelimit-reset")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no x-ratelimit-reset: {denied:?}"));
        assert!(
            full >= retry,
            "full again at {full} before the next token at {retry}"
        );
        seen.insert(retry);
    }
    assert!(
        seen.len() >= 5,
        "40 rejections over a 50-second spread gave only {seen:?}"
    );
    assert_eq!(upstream.count(), 1, "only the admitted request reached it");
}
