//! What the paths' requests and upstreams send: `make bench`'s request as Envoy's header
//! map holds it, and the upstream answers (plain text, an LLM's JSON and its event stream).

use crate::abi::{pairs, Pairs};
use crate::envoy::Response;

/// The request `make bench`'s wrk sends, as Envoy's header map holds it when the filter
/// chain sees it (Envoy adds `x-forwarded-proto` and `x-request-id`).
pub fn bench_request() -> crate::envoy::Request {
    crate::envoy::Request {
        headers: pairs(&[
            (":authority", "127.0.0.1:10000"),
            (":path", "/"),
            (":method", "GET"),
            (":scheme", "http"),
            ("x-tenant-id", "bench"),
            ("x-forwarded-proto", "http"),
            ("x-request-id", "6c1e7a52-93b4-4f0e-8d2a-1b5f3c9e7d40"),
        ]),
        source_address: "127.0.0.1:46512".to_string(),
    }
}

fn upstream(content_type: &str, chunks: &[&str]) -> Response {
    let length: usize = chunks.iter().map(|c| c.len()).sum();
    let headers: Pairs = pairs(&[
        (":status", "200"),
        ("content-length", &length.to_string()),
        ("content-type", content_type),
        ("date", "Thu, 01 Jan 2026 00:00:00 GMT"),
        ("server", "envoy"),
        ("x-envoy-upstream-service-time", "0"),
    ]);
    Response {
        headers,
        chunks: chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
        trailers: None,
    }
}

/// `make bench`'s upstream: a `direct_response` of "ok".
pub fn ok_upstream() -> Response {
    upstream("text/plain", &["ok\n"])
}

/// An OpenAI-style chat completion, as one JSON document.
pub(super) fn llm_json() -> Response {
    upstream(
        "application/json",
        &[
            r#"{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}"#,
        ],
    )
}

/// The same answer streamed: content deltas, a usage chunk, `[DONE]`, in three chunks.
pub(super) fn llm_sse() -> Response {
    let delta = |text: &str| {
        format!("data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}],\"usage\":null}}\n\n")
    };
    let first = [delta("Hello!"), delta(" How can I")].concat();
    let second = [delta(" help you"), delta(" today?")].concat();
    let last = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":9,\"total_tokens\":21}}\n\ndata: [DONE]\n\n";
    upstream("text/event-stream", &[&first, &second, last])
}
