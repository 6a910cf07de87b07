//! Global mode end to end: LLM token budgets decided by floodgate-server (memory
//! and Redis) for a real Envoy loading floodgate.wasm, in front of a fake LLM API that
//! answers JSON and both styles of event stream with their usage.
//!
//! A request is admitted with a check-only descriptor while its tenant's budget is not in
//! debt; when its response is done, the filter charges what it reported with a
//! fire-and-forget call (`x-floodgate-charge: 1`), which the server counts even past the
//! limit. The tests read the budget from the server itself, with a check-only call of
//! their own: waiting for it to reflect a charge is the readiness check (the charge is
//! asynchronous by design).

use floodgate_integration::client::get;
use floodgate_integration::llm_upstream::LlmUpstream;
use floodgate_integration::soak::redis::Redis;
use floodgate_integration::{client, configs, wait, Envoy, Server};
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::RateLimitRequest;
use floodgate_server::proto::{Entry, RateLimitDescriptor};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// 1,000 tokens per minute per tenant.
const BUDGET: &str = "
domain: llm
descriptors:
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 1000
      algorithm: token_bucket
";

/// Tokens the budget refills per second (1,000 per minute), for the bounds below.
const REFILL_PER_SECOND: f64 = 1_000.0 / 60.0;

/// A tenant's token budget from the service, read from either style of usage (OpenAI's
/// `usage.total_tokens`; Anthropic's input plus cumulative output tokens, in its JSON
/// and in its stream's `message_start` and `message_delta`). A stream cut off with no
/// usage is charged 50.
fn plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "llm", "timeout_ms": 2_000,
                "failure_mode": "deny"},
        "rules": [{
            "name": "tokens",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {},
            "cost": {"response": {
                "json": ["usage.total_tokens", "message.usage.input_tokens",
                         "usage.input_tokens", "usage.output_tokens"],
                "fallback": 50
            }}
        }],
        "failure_status": 503
    })
}

/// Where `tenant`'s budget stands at the service, asked check-only (it counts nothing):
/// the whole tokens left (0 when over), and whether it is over.
async fn standing(rls: SocketAddr, tenant: &str) -> (u32, bool) {
    let mut client = RateLimitServiceClient::connect(format!("http://{rls}"))
        .await
        .expect("connect to floodgate-server");
    let request = RateLimitRequest {
        domain: "llm".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "tenant".into(),
                value: tenant.into(),
            }],
            limit: None,
            hits_addend: Some(0),
        }],
        hits_addend: 0,
    };
    let answer = client
        .should_rate_limit(request)
        .await
        .expect("check-only call")
        .into_inner();
    let status = &answer.statuses[0];
    (
        status.limit_remaining,
        status.code == Code::OverLimit as i32,
    )
}

/// Waits until `tenant` has been charged `charged` tokens in all since `since`: the
/// budget left is at most `1000 - charged` plus what refilled meanwhile, and never less
/// than `1000 - charged` (nothing more was charged). Returns what is left.
async fn charged(rls: SocketAddr, tenant: &str, charged: u32, since: Instant) -> u32 {
    let floor = 1_000 - charged;
    let left = wait::until(
        &format!("{tenant} charged {charged} tokens"),
        Duration::from_secs(20),
        || async {
            let (left, _) = standing(rls, tenant).await;
            let refilled = (since.elapsed().as_secs_f64() * REFILL_PER_SECOND).ceil() as u32;
            (left <= floor + refilled).then_some(left)
        },
    )
    .await;
    assert!(
        left >= floor,
        "{tenant}: charged more than {charged}: {left} left"
    );
    left
}

/// The scenario of the issue against `server`: admitted until the charged usage exceeds
/// 1,000, then 429 with `retry-after` and nothing more reaches the upstream; per tenant;
/// an abandoned stream charged what it reported so far, or the fallback.
async fn budget_holds(server: &Server) {
    let upstream = LlmUpstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_llm_global(&plugin(), upstream.addr(), server.grpc()),
        2,
    )
    .await;
    let rls = server.grpc();
    let c = client();
    let url = |path: &str| envoy.url("ingress", path);
    let tenant_a = [
        ("x-tenant-id", "a"),
        ("x-input-tokens", "100"),
        ("x-output-tokens", "300"),
    ];

    // 400 tokens each, as OpenAI JSON, an OpenAI stream and an Anthropic stream: 1,200 in
    // all, the third admitted because the budget was not in debt yet (200 left).
    let since = Instant::now();
    for (i, path) in ["/openai/json", "/openai/sse", "/anthropic/sse"]
        .iter()
        .enumerate()
    {
        let reply = get(&c, &url(path), &tenant_a).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        if i < 2 {
            charged(rls, "a", 400 * (i as u32 + 1), since).await;
        }
    }
    wait::until("a's budget in debt", Duration::from_secs(20), || async {
        let (_, over) = standing(rls, "a").await;
        over.then_some(())
    })
    .await;
    assert_eq!(upstream.count(), 3);

    // In debt: 429 with a retry-after, and the upstream sees nothing more.
    for _ in 0..5 {
        let reply = get(&c, &url("/anthropic/json"), &tenant_a).await;
        assert_eq!(reply.status, 429, "{}", reply.body);
        let wait: u64 = reply
            .header("retry-after")
            .expect("a retry-after")
            .parse()
            .expect("whole seconds");
        // 200 tokens of debt and one to spend at 1,000 per minute: about 12 s.
        assert!((1..=60).contains(&wait), "retry-after: {wait}");
    }
    assert_eq!(upstream.count(), 3, "nothing reaches the upstream in debt");

    // Another tenant has its own budget (Anthropic JSON, the upstream's default 10 + 20).
    let since = Instant::now();
    let reply = get(&c, &url("/anthropic/json"), &[("x-tenant-id", "b")]).await;
    assert_eq!(reply.status, 200);
    charged(rls, "b", 30, since).await;

    // A stream the client abandons (the upstream holds it after its first events) is
    // charged its usage so far: Anthropic's 300 input tokens and the 50 output tokens of
    // its first `message_delta`. One abandoned before any usage (OpenAI's chunks carry
    // `"usage": null` until the last) is charged the fallback, 50.
    let abandoned = [
        ("c", "/anthropic/sse", "message_delta", 350),
        ("d", "/openai/sse", "lo.", 50),
    ];
    for (tenant, path, last_seen, cost) in abandoned {
        let since = Instant::now();
        let abandoning = client();
        let mut response = abandoning
            .get(url(path))
            .header("x-tenant-id", tenant)
            .header("x-input-tokens", "300")
            .header("x-output-tokens", "100")
            .header("x-hold", "1")
            .send()
            .await
            .expect("stream starts");
        assert_eq!(response.status(), 200);
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains(last_seen) {
            let chunk = response.chunk().await.expect("read").expect("a chunk");
            seen.extend_from_slice(&chunk);
        }
        drop(response);
        drop(abandoning);
        charged(rls, tenant, cost, since).await;
    }
    envoy
        .expect_stat("wasmcustom.floodgate.usage.fallback.cut_off", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rls.charges", 6)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rls.charge_failed", 0)
        .await;
    assert_eq!(upstream.count(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_budget_holds_on_the_memory_store() {
    let server = Server::start(BUDGET, &[]);
    budget_holds(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_budget_holds_on_redis() {
    let redis = Redis::start().expect("redis-server (make redis)");
    let server = Server::start(BUDGET, &["--redis-url", &redis.url()]);
    budget_holds(&server).await;
}

/// A charge the service cannot take (it went away while the stream ran) is counted as
/// failed, once; the response was not held back for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_charge_the_service_cannot_take_is_counted_as_failed() {
    let mut server = Server::start(BUDGET, &[]);
    let upstream = LlmUpstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_llm_global(&plugin(), upstream.addr(), server.grpc()),
        2,
    )
    .await;
    let abandoning = client();
    let mut response = abandoning
        .get(envoy.url("ingress", "/anthropic/sse"))
        .header("x-tenant-id", "e")
        .header("x-hold", "1")
        .send()
        .await
        .expect("stream starts");
    assert_eq!(response.status(), 200, "admitted while the service was up");
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("message_delta") {
        let chunk = response.chunk().await.expect("read").expect("a chunk");
        seen.extend_from_slice(&chunk);
    }
    server.stop();
    drop(response);
    envoy
        .expect_stat("wasmcustom.floodgate.rls.charges", 1)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rls.charge_failed", 1)
        .await;
}
