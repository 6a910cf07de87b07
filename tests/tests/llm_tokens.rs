//! Token budgets for LLM APIs, local mode, end to end: a real Envoy (two workers) loading
//! floodgate-llm.wasm in front of a fake LLM API that reports usage in JSON bodies and
//! SSE streams, OpenAI- and Anthropic-style. Budgets of 1 000 tokens per minute per
//! tenant (`x-tenant-id`).

use floodgate_integration::client::get;
use floodgate_integration::{client, configs, examples, llm_upstream, Envoy, LlmUpstream};
use serde_json::{json, Value};

/// One rule per API style, each 1 000 tokens per minute per tenant.
fn budgets() -> Value {
    let rule = |name: &str, prefix: &str, json: Value| {
        json!({
            "name": name,
            "match": {"path_prefix": prefix},
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "local": {"capacity": 1000, "refill_per_second": 16.666666},
            "cost": {"response": {"json": json, "fallback": 50}}
        })
    };
    json!({"rules": [
        rule("openai-tokens", "/openai/", json!("usage.total_tokens")),
        rule("anthropic-tokens", "/anthropic/",
             json!(["message.usage.input_tokens", "usage.input_tokens", "usage.output_tokens"])),
    ]})
}

async fn start(plugin: &Value) -> (Envoy, LlmUpstream) {
    llm_upstream::behind_envoy(plugin).await
}

/// A request of `tenant` to `path` that will report `input` + `output` tokens.
async fn ask(envoy: &Envoy, path: &str, tenant: &str, input: u32, output: u32) -> u16 {
    let (i, o) = (input.to_string(), output.to_string());
    let headers = [
        ("x-tenant-id", tenant),
        ("x-input-tokens", &i),
        ("x-output-tokens", &o),
    ];
    let reply = get(&client(), &envoy.url("ingress", path), &headers).await;
    if reply.status == 200 {
        assert!(
            reply.body.contains("tokens"),
            "the usage reached the client: {}",
            reply.body
        );
    }
    reply.status
}

/// Requests are admitted while the budget is not in debt; the one that goes over is
/// still answered (its cost is known only afterwards), every later one is refused with
/// `retry-after` until the debt is refilled, and the upstream never sees them.
async fn admitted_until_the_usage_exceeds_the_budget(path: &str) {
    let (envoy, upstream) = start(&budgets()).await;
    // 300 tokens each: 300, 600, 900 leave the budget positive; the fourth puts it 200
    // into debt.
    for n in 1..=4 {
        assert_eq!(
            ask(&envoy, path, "acme", 100, 200).await,
            200,
            "request {n}"
        );
    }
    let c = client();
    let url = envoy.url("ingress", path);
    let denied = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(denied.status, 429);
    // 201 tokens (the debt and the one the next request needs) at 16.67 per second:
    // 12.06 s, rounded up; a little of it refilled while the test ran.
    let retry: u64 = denied
        .header("retry-after")
        .expect("retry-after")
        .parse()
        .unwrap();
    assert!((12..=13).contains(&retry), "retry-after {retry}");
    assert_eq!(ask(&envoy, path, "acme", 1, 1).await, 429);
    assert_eq!(
        upstream.count_for("acme"),
        4,
        "refused requests never reach the upstream"
    );
    // Another tenant has its own budget.
    assert_eq!(ask(&envoy, path, "globex", 1, 1).await, 200);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.reported", 5)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 4 * 300 + 2)
        .await;
    envoy.expect_stat("wasmcustom.floodgate.denied", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openai_json_answers_are_charged_their_total_tokens() {
    admitted_until_the_usage_exceeds_the_budget("/openai/json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openai_streams_are_charged_their_final_usage_chunk() {
    admitted_until_the_usage_exceeds_the_budget("/openai/sse").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn anthropic_json_answers_are_charged_input_plus_output() {
    admitted_until_the_usage_exceeds_the_budget("/anthropic/json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn anthropic_streams_are_charged_message_start_plus_the_last_message_delta() {
    admitted_until_the_usage_exceeds_the_budget("/anthropic/sse").await;
}

/// Opens a held stream for `tenant`, reads its first chunk (it arrives while the
/// upstream is still holding the rest: nothing buffers it), then drops the connection.
async fn abandon(envoy: &Envoy, path: &str, tenant: &str, input: u32, output: u32) {
    let c = client();
    let (i, o) = (input.to_string(), output.to_string());
    let mut response = c
        .get(envoy.url("ingress", path))
        .header("x-tenant-id", tenant)
        .header("x-input-tokens", &i)
        .header("x-output-tokens", &o)
        .header("x-hold", "1")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let first = response
        .chunk()
        .await
        .expect("read")
        .expect("a first chunk");
    assert!(!first.is_empty());
    drop(response);
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abandoned_stream_is_charged_what_it_reported_so_far_or_the_fallback() {
    let (envoy, upstream) = start(&budgets()).await;
    // message_start said 700 input tokens, the first message_delta 100 output: 800.
    abandon(&envoy, "/anthropic/sse", "acme", 700, 200).await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 800)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.reported", 1)
        .await;
    // An OpenAI stream abandoned before its usage chunk: the fallback (50).
    abandon(&envoy, "/openai/sse", "acme", 700, 200).await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.fallback.cut_off", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 850)
        .await;
    // 800 of the Anthropic budget is spent: 300 more puts it in debt, then 429.
    assert_eq!(ask(&envoy, "/anthropic/json", "acme", 100, 200).await, 200);
    assert_eq!(ask(&envoy, "/anthropic/json", "acme", 1, 1).await, 429);
    assert_eq!(upstream.count_for("acme"), 3);
    upstream.release();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_passes_chunk_by_chunk_and_is_charged_at_its_end() {
    let (envoy, upstream) = start(&budgets()).await;
    let c = client();
    let mut response = c
        .get(envoy.url("ingress", "/openai/sse"))
        .header("x-tenant-id", "acme")
        .header("x-input-tokens", "40")
        .header("x-output-tokens", "2")
        .header("x-hold", "1")
        .send()
        .await
        .expect("send");
    // The first events reach the client while the upstream holds the rest.
    let first = response
        .chunk()
        .await
        .expect("read")
        .expect("a first chunk");
    assert!(String::from_utf8_lossy(&first).contains("\"usage\":null"));
    upstream.release();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("read") {
        rest.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&rest).ends_with("data: [DONE]\n\n"));
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 42)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.reported", 1)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_response_without_usage_is_charged_the_fallback_and_counted() {
    let plugin = json!({"rules": [{
        "name": "tokens", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": 1000, "refill_per_second": 16.666666},
        "cost": {"response": {"json": "usage.total_tokens", "fallback": 400}}
    }]});
    let (envoy, upstream) = start(&plugin).await;
    // `ok\n` is not JSON: 400 each; the third goes into debt, the fourth is refused.
    for _ in 0..3 {
        let reply = get(
            &client(),
            &envoy.url("ingress", "/plain"),
            &[("x-tenant-id", "a")],
        )
        .await;
        assert_eq!(reply.status, 200);
    }
    let reply = get(
        &client(),
        &envoy.url("ingress", "/plain"),
        &[("x-tenant-id", "a")],
    )
    .await;
    assert_eq!(reply.status, 429);
    assert_eq!(upstream.count(), 3);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.fallback.unreadable", 3)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 1200)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_plain_module_refuses_a_response_cost() {
    let upstream = LlmUpstream::start().await;
    let yaml = configs::floodgate_local(&budgets(), upstream.addr());
    let (status, log) = Envoy::refuse(&yaml).await;
    assert!(!status.success());
    assert!(
        log.contains("invalid configuration: rules[0].cost.response: needs floodgate-llm.wasm"),
        "{log}"
    );
}

/// `examples/llm/envoy.yaml` as shipped: 2 000 tokens per tenant per minute on each API, an
/// estimate of 200 held per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_llm_example_budgets_each_tenant_on_both_apis() {
    let upstream = LlmUpstream::start().await;
    let mut example = examples::load(&examples::file("llm"));
    examples::localize(&mut example, upstream.addr(), None);
    let envoy = Envoy::start(&example.to_string(), 2).await;
    let c = client();
    for (path, stream) in [
        ("/v1/chat/completions", "1"),
        ("/v1/messages", "1"),
        ("/v1/messages", ""),
    ] {
        let url = envoy.url("ingress", path);
        let tenant = format!("example{path}{stream}");
        let mut headers = vec![
            ("x-tenant-id", tenant.as_str()),
            ("x-input-tokens", "600"),
            ("x-output-tokens", "400"),
        ];
        if !stream.is_empty() {
            headers.push(("x-stream", stream));
        }
        // 1 000 tokens each: two spend the 2 000, and the third finds less than its
        // estimate of 200 (a few tokens refilled meanwhile): refused.
        assert_eq!(get(&c, &url, &headers).await.status, 200, "{path}");
        assert_eq!(get(&c, &url, &headers).await.status, 200, "{path}");
        let denied = get(&c, &url, &headers).await;
        assert_eq!(denied.status, 429, "{path}");
        assert!(denied.header("retry-after").is_some());
        assert_eq!(upstream.count_for(&tenant), 2, "{path}");
    }
}
