//! A fake LLM API upstream that reports token usage the way public APIs do, and counts
//! what reaches it.
//!
//! The path picks the style; the request says how many tokens to report
//! (`x-input-tokens`, `x-output-tokens`, default 10 and 20):
//! - `/openai/json`: a chat completion with `usage.total_tokens` (and its parts);
//! - `/openai/sse`: `text/event-stream` chunks with `"usage": null`, a final chunk with
//!   `choices: []` and the usage, then `data: [DONE]`;
//! - `/anthropic/json`: a message with `usage.input_tokens` and `usage.output_tokens`;
//! - `/anthropic/sse`: `message_start` (input tokens, 1 output token), content deltas,
//!   `message_delta` events with the cumulative output tokens (half, then all), and
//!   `message_stop`;
//! - `/v1/chat/completions` and `/v1/messages` (the public APIs' paths): the OpenAI and
//!   Anthropic answers above, streamed with `x-stream: 1`;
//! - anything else: `ok\n`, `text/plain`, no usage.
//!
//! What else a client can ask for, as it can of the public APIs (each changes the answer,
//! never the tokens it reports):
//! - `accept-encoding` naming `gzip`: the body is gzip-compressed (`content-encoding:
//!   gzip`), a stream flushed event by event, as public APIs answer such a client;
//! - `x-pad-bytes: N`: a JSON answer carries N more bytes of content (long output,
//!   logprobs, `n` choices);
//! - `x-nest-depth: N`: an Anthropic JSON answer carries a tool call whose `input` is
//!   nested N objects deep, before its usage;
//! - `x-no-usage: 1`: an OpenAI stream has no usage chunk (a client that leaves out
//!   `stream_options.include_usage`).
//!
//! Every answer says in `x-upstream-accept-encoding` which `accept-encoding` reached the
//! upstream (`-` for none).
//!
//! Each event is its own body chunk. With `x-hold: 1` a stream sends its first events
//! (for Anthropic: `message_start` and the first `message_delta`), and a JSON answer all
//! but its last 64 bytes (the end of its usage), and then waits until
//! [`LlmUpstream::release`] is called, so a test can read them downstream while the
//! upstream has not finished (nothing buffered them), hold many answers open at once, or
//! abandon one there.

use bytes::Bytes;
use futures::stream;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

#[derive(Default)]
struct Seen {
    total: AtomicU64,
    by_tenant: Mutex<HashMap<String, u64>>,
    release: Notify,
}

/// The fake LLM API; stops when dropped.
pub struct LlmUpstream {
    addr: SocketAddr,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

impl LlmUpstream {
    /// Starts serving HTTP/1.1 and h2c on a free loopback port.
    pub async fn start() -> LlmUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let seen = Arc::new(Seen::default());
        let task = tokio::spawn(serve(listener, seen.clone()));
        LlmUpstream { addr, seen, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests received so far.
    pub fn count(&self) -> u64 {
        self.seen.total.load(Ordering::SeqCst)
    }

    /// Requests received with `x-tenant-id: tenant`.
    pub fn count_for(&self, tenant: &str) -> u64 {
        let by_tenant = self.seen.by_tenant.lock().expect("lock");
        by_tenant.get(tenant).copied().unwrap_or(0)
    }

    /// Lets every held stream go on to its end (and the next one not wait).
    pub fn release(&self) {
        self.seen.release.notify_waiters();
    }
}

/// A real Envoy (two workers) loading floodgate-llm.wasm configured with `plugin`, in
/// front of a fresh fake LLM API.
pub async fn behind_envoy(plugin: &serde_json::Value) -> (crate::Envoy, LlmUpstream) {
    let upstream = LlmUpstream::start().await;
    let filter = crate::configs::wasm_filter(
        "floodgate",
        &crate::paths::llm_wasm().display().to_string(),
        &plugin.to_string(),
    );
    let yaml = crate::configs::bootstrap(
        vec![crate::configs::listener(
            "ingress",
            vec![filter],
            "upstream",
        )],
        vec![crate::configs::cluster("upstream", upstream.addr(), false)],
    );
    (crate::Envoy::start(&yaml, 2).await, upstream)
}

impl Drop for LlmUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, seen: Arc<Seen>) {
    crate::upstream::serve_http(listener, move |request| answer(&seen, request)).await;
}

type Body = BoxBody<Bytes, Infallible>;

fn answer(seen: &Arc<Seen>, request: Request<Incoming>) -> Response<Body> {
    seen.total.fetch_add(1, Ordering::SeqCst);
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if let Some(tenant) = header("x-tenant-id") {
        let mut by_tenant = seen.by_tenant.lock().expect("lock");
        *by_tenant.entry(tenant).or_default() += 1;
    }
    let tokens =
        |name: &str, default: u64| header(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let (input, output) = (tokens("x-input-tokens", 10), tokens("x-output-tokens", 20));
    let shape = Shape {
        pad: tokens("x-pad-bytes", 0) as usize,
        nest: tokens("x-nest-depth", 0) as usize,
        usage: header("x-no-usage").is_none(),
    };
    let accept_encoding = header("accept-encoding");
    let gzip = accept_encoding
        .as_deref()
        .is_some_and(|v| v.split(',').any(|c| c.trim() == "gzip"));
    let hold = header("x-hold").is_some();
    let path = request.uri().path().to_string();
    // The public APIs' own paths (as in `examples/llm/envoy.yaml`) stream when asked to.
    let path = match (path.as_str(), header("x-stream").is_some()) {
        ("/v1/chat/completions", false) => "/openai/json".to_string(),
        ("/v1/chat/completions", true) => "/openai/sse".to_string(),
        ("/v1/messages", false) => "/anthropic/json".to_string(),
        ("/v1/messages", true) => "/anthropic/sse".to_string(),
        _ => path,
    };
    let (content_type, events, held_after): (&str, Vec<Vec<u8>>, usize) = match path.as_str() {
        "/openai/json" => (
            "application/json",
            vec![openai_json(input, output, &shape).into()],
            0,
        ),
        "/anthropic/json" => (
            "application/json",
            vec![anthropic_json(input, output, &shape).into()],
            0,
        ),
        "/openai/sse" => (
            "text/event-stream",
            bytes(openai_sse(input, output, &shape)),
            2,
        ),
        "/anthropic/sse" => ("text/event-stream", bytes(anthropic_sse(input, output)), 2),
        _ => ("text/plain", vec![b"ok\n".to_vec()], 0),
    };
    let (mut events, held_after) = match (hold, content_type) {
        (true, "application/json") => {
            let mut body = events.concat();
            let tail = body.split_off(body.len().saturating_sub(64));
            (vec![body, tail], 1)
        }
        _ => (events, held_after),
    };
    if gzip {
        events = gzipped(events);
    }
    let body = if hold && held_after > 0 {
        held(seen.clone(), events, held_after)
    } else if events.len() == 1 {
        Full::new(Bytes::from(events.concat())).boxed()
    } else {
        chunked(events)
    };
    let mut response = Response::builder()
        .header("content-type", content_type)
        .header(
            "x-upstream-accept-encoding",
            accept_encoding.as_deref().unwrap_or("-"),
        );
    if gzip {
        response = response.header("content-encoding", "gzip");
    }
    response.body(body).expect("response")
}

/// What a client asked for that changes an answer's size and shape, not its usage.
struct Shape {
    /// Bytes of extra content.
    pad: usize,
    /// How deep a tool call's input is nested.
    nest: usize,
    /// Whether a stream reports its usage.
    usage: bool,
}

fn bytes(events: Vec<String>) -> Vec<Vec<u8>> {
    events.into_iter().map(String::into_bytes).collect()
}

/// The events gzip-compressed as one stream, each flushed into its own chunk (so a stream
/// still reaches the client event by event).
fn gzipped(events: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    use flate2::write::GzEncoder;
    use std::io::Write;
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut chunks = Vec::with_capacity(events.len());
    for e in &events {
        encoder.write_all(e).expect("compress");
        encoder.flush().expect("flush");
        chunks.push(std::mem::take(encoder.get_mut()));
    }
    let tail = encoder.finish().expect("finish");
    match chunks.last_mut() {
        Some(last) => last.extend_from_slice(&tail),
        None => chunks.push(tail),
    }
    chunks
}

/// One body chunk per event.
fn chunked(events: Vec<Vec<u8>>) -> Body {
    let frames = events
        .into_iter()
        .map(|e| Ok::<_, Infallible>(Frame::data(Bytes::from(e))));
    StreamBody::new(stream::iter(frames)).boxed()
}

/// The first `first` events at once, the rest after [`LlmUpstream::release`].
fn held(seen: Arc<Seen>, events: Vec<Vec<u8>>, first: usize) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(events.len().max(1));
    tokio::spawn(async move {
        let released = seen.release.notified();
        tokio::pin!(released);
        // Registered before the first events go out, so a release cannot be missed.
        released.as_mut().enable();
        let mut events = events.into_iter();
        for e in events.by_ref().take(first) {
            if tx.send(Bytes::from(e)).await.is_err() {
                return;
            }
        }
        released.await;
        for e in events {
            if tx.send(Bytes::from(e)).await.is_err() {
                return;
            }
        }
    });
    let frames = stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), rx))
    });
    StreamBody::new(frames).boxed()
}

fn openai_json(input: u64, output: u64, shape: &Shape) -> String {
    let content = format!("Hello.{}", "x".repeat(shape.pad));
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{content}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{input},"completion_tokens":{output},"total_tokens":{}}}}}"#,
        input + output
    )
}

fn openai_sse(input: u64, output: u64, shape: &Shape) -> Vec<String> {
    // Without `include_usage` the chunks carry no `usage` field at all.
    let null = if shape.usage { ",\"usage\":null" } else { "" };
    let chunk = |content: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}}}}]{null}}}\n\n"
        )
    };
    let mut events = vec![chunk("Hel"), chunk("lo.")];
    if shape.usage {
        events.push(format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{input},\"completion_tokens\":{output},\"total_tokens\":{}}}}}\n\n",
            input + output
        ));
    }
    events.push("data: [DONE]\n\n".to_string());
    events
}

fn anthropic_json(input: u64, output: u64, shape: &Shape) -> String {
    let tool = if shape.nest > 0 {
        let arguments = format!(
            "{}{{}}{}",
            r#"{"a":"#.repeat(shape.nest - 1),
            "}".repeat(shape.nest - 1)
        );
        format!(r#",{{"type":"tool_use","id":"toolu_1","name":"f","input":{arguments}}}"#)
    } else {
        String::new()
    };
    format!(
        r#"{{"id":"msg_1","type":"message","role":"assistant","content":[{{"type":"text","text":"Hello.{}"}}{tool}],"stop_reason":"end_turn","usage":{{"input_tokens":{input},"output_tokens":{output}}}}}"#,
        "x".repeat(shape.pad)
    )
}

fn anthropic_sse(input: u64, output: u64) -> Vec<String> {
    let event = |name: &str, data: String| format!("event: {name}\ndata: {data}\n\n");
    vec![
        event(
            "message_start",
            format!(r#"{{"type":"message_start","message":{{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{{"input_tokens":{input},"output_tokens":1}}}}}}"#),
        ),
        event(
            "message_delta",
            format!(r#"{{"type":"message_delta","delta":{{}},"usage":{{"output_tokens":{}}}}}"#, output / 2),
        ),
        event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}"#.to_string(),
        ),
        event(
            "message_delta",
            format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"end_turn"}},"usage":{{"output_tokens":{output}}}}}"#),
        ),
        event("message_stop", r#"{"type":"message_stop"}"#.to_string()),
    ]
}
