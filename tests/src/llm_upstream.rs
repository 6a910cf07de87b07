//! A fake LLM API upstream: it answers with the usage a test asks for, as OpenAI-style
//! JSON, an OpenAI-style event stream, or an Anthropic-style one, and counts what
//! reaches it.
//!
//! The path says what to answer; `tokens` (OpenAI) or `input` and `output` (Anthropic)
//! set the usage reported:
//! - `/json?tokens=N`: `application/json` with `usage.total_tokens` = N;
//! - `/openai?tokens=N`: `text/event-stream`, a few content chunks, then the final
//!   chunk with `usage.total_tokens` = N, then `data: [DONE]`;
//! - `/anthropic?input=I&output=O`: `message_start` with `message.usage.input_tokens`,
//!   content deltas, `message_delta` with the cumulative `usage.output_tokens` (first
//!   half, then all of it), `message_stop`;
//! - `/anthropic-stall?input=I`: `message_start` with `input_tokens` = I, one content
//!   delta, then nothing: the stream stays open until the client goes away;
//! - `/stall`: one content chunk with no usage, then nothing, likewise.

use bytes::Bytes;
use futures::stream;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The fake API; stops when dropped.
pub struct LlmUpstream {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl LlmUpstream {
    /// Starts serving (HTTP/1.1 and h2c) on a free loopback port.
    pub async fn start() -> LlmUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(serve(listener, requests.clone()));
        LlmUpstream {
            addr,
            requests,
            task,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests that reached it so far.
    pub fn count(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for LlmUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn serve(listener: TcpListener, requests: Arc<AtomicU64>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let requests = requests.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                requests.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, Infallible>(answer(&request)) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The query parameter `name` as a number (0 when absent).
fn param(request: &Request<Incoming>, name: &str) -> u64 {
    request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn answer(request: &Request<Incoming>) -> Response<Body> {
    let tokens = param(request, "tokens");
    let (input, output) = (param(request, "input"), param(request, "output"));
    let chunk = |text: &str| format!(r#"{{"choices":[{{"delta":{{"content":"{text}"}}}}]}}"#);
    let anthropic_start = format!(
        r#"event: message_start
data: {{"type":"message_start","message":{{"usage":{{"input_tokens":{input},"output_tokens":1}}}}}}

"#
    );
    let delta = r#"event: content_block_delta
data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}

"#
    .to_owned();
    let message_delta = |n: u64| {
        format!(
            r#"event: message_delta
data: {{"type":"message_delta","usage":{{"output_tokens":{n}}}}}

"#
        )
    };
    match request.uri().path() {
        "/json" => json(format!(
            r#"{{"choices":[{{"message":{{"content":"Hello"}}}}],"usage":{{"prompt_tokens":1,"completion_tokens":{tokens},"total_tokens":{tokens}}}}}"#
        )),
        "/openai" => events(
            vec![
                format!("data: {}\n\n", chunk("Hel")),
                format!("data: {}\n\n", chunk("lo")),
                format!(
                    "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":1,\"total_tokens\":{tokens}}}}}\n\n"
                ),
                "data: [DONE]\n\n".to_owned(),
            ],
            false,
        ),
        "/anthropic" => events(
            vec![
                anthropic_start,
                delta.clone(),
                message_delta(output / 2),
                delta,
                message_delta(output),
                "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_owned(),
            ],
            false,
        ),
        "/anthropic-stall" => events(vec![anthropic_start, delta], true),
        "/stall" => events(vec![format!("data: {}\n\n", chunk("Hel"))], true),
        _ => json(r#"{"error":"unknown path"}"#.to_owned()),
    }
}

fn json(body: String) -> Response<Body> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .expect("response")
}

/// A `text/event-stream` sending `parts` one by one (each its own write); with `stall`,
/// the stream then stays open until the client goes away.
fn events(parts: Vec<String>, stall: bool) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(parts.len().max(1));
    tokio::spawn(async move {
        for part in parts {
            if tx.send(Bytes::from(part)).await.is_err() {
                return;
            }
            tokio::task::yield_now().await;
        }
        if stall {
            tx.closed().await;
        }
    });
    let frames = stream::unfold(rx, |mut rx| async move {
        let bytes = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(frames).boxed_unsync())
        .expect("response")
}
