//! Nothing an LLM API's client chooses changes what its answer is charged: a real Envoy
//! loading floodgate-llm.wasm with `examples/llm/envoy.yaml` as shipped, in front of the fake LLM
//! API, which shapes its answers the way public APIs do for what the client asked
//! (compressed for `accept-encoding: gzip`, long, a deeply nested tool call), and always
//! reports the same 1,500 tokens.

use floodgate_integration::client::{get, Reply};
use floodgate_integration::{client, configs, examples, paths, Envoy, LlmUpstream};
use serde_json::{json, Value};
use std::io::Read;

/// What every answer here really cost: 500 input and 1,000 output tokens.
const TOKENS: u64 = 1_500;

async fn example() -> (Envoy, LlmUpstream) {
    let upstream = LlmUpstream::start().await;
    let mut example = examples::load(&examples::file("llm"));
    examples::localize(&mut example, upstream.addr(), None);
    (Envoy::start(&example.to_string(), 2).await, upstream)
}

/// A request of `tenant` to `path` that reports 1,500 tokens, with `extra` headers.
async fn ask(envoy: &Envoy, path: &str, tenant: &str, extra: &[(&str, &str)]) -> Reply {
    let mut headers = vec![
        ("x-tenant-id", tenant),
        ("x-input-tokens", "500"),
        ("x-output-tokens", "1000"),
    ];
    headers.extend_from_slice(extra);
    get(&client(), &envoy.url("ingress", path), &headers).await
}

/// What the client sends: a name for the case, the path, its headers.
type Row<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

/// Answers of every shape a client can ask for, each for its own tenant: every one is charged the
/// 1,500 tokens it reported, none the fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_shape_of_answer_is_charged_what_it_reported() {
    let (envoy, _upstream) = example().await;
    let gzip = ("accept-encoding", "gzip");
    let rows: [Row; 5] = [
        ("plain JSON", "/v1/chat/completions", vec![]),
        ("gzip", "/v1/chat/completions", vec![gzip]),
        (
            "gzip, streamed",
            "/v1/chat/completions",
            vec![gzip, ("x-stream", "1")],
        ),
        (
            "a 70 KB answer",
            "/v1/chat/completions",
            vec![("x-pad-bytes", "70000")],
        ),
        (
            "usage after a tool call nested 40 deep",
            "/v1/messages",
            vec![("x-nest-depth", "40")],
        ),
    ];
    for (n, (row, path, extra)) in rows.iter().enumerate() {
        let reply = ask(&envoy, path, &format!("row{n}"), extra).await;
        assert_eq!(reply.status, 200, "{row}");
        let n = n as u64 + 1;
        envoy
            .expect_stat("wasmcustom.floodgate.usage.tokens", n * TOKENS)
            .await;
        envoy
            .expect_stat("wasmcustom.floodgate.usage.reported", n)
            .await;
    }
    let stats = envoy.stats().await;
    let fallbacks: Vec<(&String, &u64)> = stats
        .iter()
        .filter(|(k, v)| k.contains("floodgate.usage.fallback") && **v > 0)
        .collect();
    assert!(fallbacks.is_empty(), "{fallbacks:?}");
}

/// Against the example's 2,000-token budget, asking for gzip buys nothing: two answers
/// of 1,500 spend it (the second is admitted on what is left), then 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn asking_for_gzip_spends_the_budget_as_a_plain_request_does() {
    let (envoy, upstream) = example().await;
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let reply = ask(
            &envoy,
            "/v1/chat/completions",
            "acme",
            &[("accept-encoding", "gzip")],
        )
        .await;
        // An answer is charged as its last chunk passes, before the client has it all:
        // the next request is decided on the charge.
        statuses.push(reply.status);
    }
    let mut expected = vec![200, 200];
    expected.resize(12, 429);
    assert_eq!(statuses, expected);
    assert_eq!(upstream.count_for("acme"), 2);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 2 * TOKENS)
        .await;
}

/// Envoy's compressor in front of floodgate still compresses for a client that asks: the
/// filter asks the upstream for `identity`, reads the plain answer, and the compressor
/// compresses it on its way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compressor_in_front_still_gzips_what_floodgate_read_plain() {
    let upstream = LlmUpstream::start().await;
    let plugin = json!({"rules": [{
        "name": "tokens", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": 100_000, "refill_per_second": 1},
        "cost": {"response": {"json": "usage.total_tokens"}}
    }]});
    let floodgate = configs::wasm_filter(
        "floodgate",
        &paths::llm_wasm().display().to_string(),
        &plugin.to_string(),
    );
    let yaml = configs::bootstrap(
        vec![configs::listener(
            "ingress",
            vec![compressor(), floodgate],
            "upstream",
        )],
        vec![configs::cluster("upstream", upstream.addr(), false)],
    );
    let envoy = Envoy::start(&yaml, 2).await;
    let c = client();
    let response = c
        .get(envoy.url("ingress", "/v1/chat/completions"))
        .header("x-tenant-id", "acme")
        .header("x-input-tokens", "500")
        .header("x-output-tokens", "1000")
        .header("x-pad-bytes", "2000")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(
        header("x-upstream-accept-encoding").as_deref(),
        Some("identity")
    );
    assert_eq!(header("content-encoding").as_deref(), Some("gzip"));
    let compressed = response.bytes().await.expect("body");
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_string(&mut plain)
        .expect("a gzip body");
    assert!(plain.contains(r#""total_tokens":1500"#), "{plain}");
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", TOKENS)
        .await;
    envoy
        .expect_stat("wasmcustom.floodgate.usage.reported", 1)
        .await;
}

/// Envoy's gzip compressor for responses, with its defaults (JSON among its types).
fn compressor() -> Value {
    json!({
        "name": "envoy.filters.http.compressor",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor",
            "compressor_library": {
                "name": "gzip",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip"
                }
            }
        }
    })
}

/// An OpenAI stream without a usage chunk (the client left out
/// `stream_options.include_usage`) is charged the fallback, which defaults to the
/// estimate, and counted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_without_a_usage_event_is_charged_the_fallback_and_counted() {
    let (envoy, _upstream) = example().await;
    let reply = ask(
        &envoy,
        "/v1/chat/completions",
        "acme",
        &[("x-stream", "1"), ("x-no-usage", "1")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.ends_with("data: [DONE]\n\n"), "{}", reply.body);
    envoy
        .expect_stat("wasmcustom.floodgate.usage.fallback.stream_absent", 1)
        .await;
    // examples/llm/envoy.yaml's estimate, 200: the fallback when none is set.
    envoy
        .expect_stat("wasmcustom.floodgate.usage.tokens", 200)
        .await;
}
