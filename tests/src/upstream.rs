//! An upstream that counts what reaches it: the proof that rejected requests never do.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How many requests' headers are kept for inspection (counts are kept for all).
const KEPT_REQUESTS: usize = 1_000;

#[derive(Default)]
struct Seen {
    total: AtomicU64,
    by_tenant: Mutex<HashMap<String, u64>>,
    headers: Mutex<Vec<HashMap<String, String>>>,
    paths: Mutex<Vec<String>>,
    verbose: bool,
}

/// A counting HTTP/1.1 and h2c server answering 200 `ok` to everything; stops when
/// dropped.
pub struct Upstream {
    addr: SocketAddr,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

impl Upstream {
    /// Starts serving on a free loopback port.
    pub async fn start() -> Upstream {
        Upstream::start_on("127.0.0.1:0".parse().expect("address"), false)
            .await
            .expect("bind upstream")
    }

    /// Starts serving on `addr`, printing a line per request when `verbose`.
    pub async fn start_on(addr: SocketAddr, verbose: bool) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Seen {
            verbose,
            ..Seen::default()
        });
        let task = tokio::spawn(serve(listener, seen.clone()));
        Ok(Upstream { addr, seen, task })
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

    /// The headers of the first requests received (up to 1000), lower-case names.
    pub fn headers(&self) -> Vec<HashMap<String, String>> {
        self.seen.headers.lock().expect("lock").clone()
    }

    /// The paths (with query) of the first requests received (up to 1000).
    pub fn paths(&self) -> Vec<String> {
        self.seen.paths.lock().expect("lock").clone()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, seen: Arc<Seen>) {
    serve_http(listener, move |request| answer(&seen, request)).await;
}

/// Accepts HTTP/1.1 and HTTP/2 connections on `listener` for ever, answering each request
/// with `answer`: the loop every test upstream of this crate runs.
pub(crate) async fn serve_http<B, F>(listener: TcpListener, answer: F)
where
    F: Fn(Request<Incoming>) -> Response<B> + Clone + Send + Sync + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = answer(request);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(seen: &Seen, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let total = seen.total.fetch_add(1, Ordering::SeqCst) + 1;
    if seen.verbose {
        let tenant = request
            .headers()
            .get("x-tenant-id")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        println!(
            "upstream: {} {} tenant={} (requests that reached the upstream: {total})",
            request.method(),
            request.uri(),
            tenant.as_deref().unwrap_or("-")
        );
    }
    if let Some(tenant) = request
        .headers()
        .get("x-tenant-id")
        .and_then(|v| v.to_str().ok())
    {
        let mut by_tenant = seen.by_tenant.lock().expect("lock");
        *by_tenant.entry(tenant.to_string()).or_default() += 1;
    }
    let mut paths = seen.paths.lock().expect("lock");
    if paths.len() < KEPT_REQUESTS {
        paths.push(request.uri().to_string());
    }
    drop(paths);
    let mut kept = seen.headers.lock().expect("lock");
    if kept.len() < KEPT_REQUESTS {
        kept.push(
            request
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into(),
                    )
                })
                .collect(),
        );
    }
    Response::new(Full::new(Bytes::from_static(b"ok\n")))
}
