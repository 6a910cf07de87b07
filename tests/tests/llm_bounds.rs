//! What one LLM answer can do to a token budget is bounded, end to end: a real Envoy
//! loading floodgate-llm.wasm in front of the fake LLM API.
//! - An answer reporting `4294967295` tokens is charged the rule's `max` (a million by
//!   default), and the bucket's debt stops at one burst: the tenant waits about a minute,
//!   not eight years.
//! - Large answers matched by several rules are scanned once and each rule is charged.

use floodgate_integration::client::{burst, get};
use floodgate_integration::{client, llm_upstream, Envoy, LlmUpstream};
use serde_json::{json, Value};

async fn start(plugin: &Value) -> (Envoy, LlmUpstream) {
    llm_upstream::behind_envoy(plugin).await
}

/// A token budget of 1,000 per minute per tenant, read from OpenAI-style answers.
fn rule(name: &str, key: &str, header: &str) -> Value {
    json!({
        "name": name,
        "descriptors": [{"key": key, "header": header}],
        "local": {"capacity": 1000, "refill_per_second": 16.666666},
        "cost": {"response": {"json": "usage.total_tokens"}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_huge_reported_usage_locks_a_tenant_out_for_a_minute_not_eight_years() {
    let (envoy, upstream) =
        start(&json!({"rules": [rule("tokens", "tenant", "x-tenant-id")]})).await;
    let url = envoy.url("ingress", "/v1/chat/completions");
    let c = client();
    let huge = [
        ("x-tenant-id", "acme"),
        ("x-input-tokens", "4294967295"),
        ("x-output-tokens", "0"),
    ];
    assert_eq!(get(&c, &url, &huge).await.status, 200);
    let denied = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(denied.status, 429);
    // Charged a million, the debt stopped at one burst (1,000 tokens): the next token
    // comes after 1,001 tokens at 16.67 per second, 60.06 s.
    let retry: u64 = denied
        .header("retry-after")
        .expect("retry-after")
        .parse()
        .unwrap();
    assert!((59..=61).contains(&retry), "retry-after {retry}");
    assert_eq!(upstream.count_for("acme"), 1);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.clamped", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.debt_capped", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 1_000_000)
        .await;
}

/// Concurrent 1 MiB answers, each matched by two rules (a budget per tenant and one per
/// organisation): every answer is scanned once, and both rules are charged its 1,500
/// tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_answers_of_two_rules_are_each_charged_by_both() {
    let mut per_tenant = rule("per-tenant", "tenant", "x-tenant-id");
    let mut per_org = rule("per-org", "org", "x-org-id");
    for r in [&mut per_tenant, &mut per_org] {
        r["local"]["capacity"] = json!(1_000_000);
    }
    let (envoy, upstream) = start(&json!({"rules": [per_tenant, per_org]})).await;
    let url = envoy.url("ingress", "/v1/chat/completions");
    let headers = [
        ("x-tenant-id", "acme"),
        ("x-org-id", "acme-org"),
        ("x-input-tokens", "500"),
        ("x-output-tokens", "1000"),
        ("x-pad-bytes", "1048576"),
    ];
    let replies = burst(&client(), &url, &headers, 20).await;
    for reply in &replies {
        assert_eq!(reply.status, 200);
        assert!(reply.body.len() > 1 << 20);
    }
    assert_eq!(upstream.count(), 20);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.reported", 2 * 20)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 2 * 20 * 1_500)
        .await;
}
