//! An upstream that holds requests open and counts how many of each key it holds at
//! once: the proof that a concurrency rule never lets more than its `max` through.
//!
//! Every request is held until [`SlowUpstream::release`] opens the gate (then answered
//! 200 `ok`), and counted as in flight from its arrival until it is answered or dropped
//! (Envoy gave up on it: client reset, route timeout). The key is the `x-tenant-id`
//! header. A request to a path starting with `/fail` is answered 503 at once.

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
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Default)]
struct Counts {
    /// Requests held now, per key.
    now: HashMap<String, u64>,
    /// The most held at once, per key.
    max: HashMap<String, u64>,
    /// Requests that arrived, per key.
    seen: HashMap<String, u64>,
}

/// The holding server; stops when dropped.
pub struct SlowUpstream {
    addr: SocketAddr,
    counts: Arc<Mutex<Counts>>,
    gate: watch::Sender<u64>,
    task: JoinHandle<()>,
}

/// Counts a request in flight until dropped (answered, or abandoned by Envoy).
struct InFlight {
    counts: Arc<Mutex<Counts>>,
    key: String,
}

impl InFlight {
    fn new(counts: &Arc<Mutex<Counts>>, key: String) -> InFlight {
        let mut c = counts.lock().expect("lock");
        let now = c.now.entry(key.clone()).or_default();
        *now += 1;
        let now = *now;
        let max = c.max.entry(key.clone()).or_default();
        *max = (*max).max(now);
        *c.seen.entry(key.clone()).or_default() += 1;
        InFlight {
            counts: counts.clone(),
            key,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            if let Some(n) = c.now.get_mut(&self.key) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

impl SlowUpstream {
    /// Starts serving on a free loopback port.
    pub async fn start() -> SlowUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let counts = Arc::new(Mutex::new(Counts::default()));
        let (gate, opened) = watch::channel(0u64);
        let task = tokio::spawn(serve(listener, counts.clone(), opened));
        SlowUpstream {
            addr,
            counts,
            gate,
            task,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers every request held now (later ones are held again).
    pub fn release(&self) {
        self.gate.send_modify(|g| *g += 1);
    }

    /// Requests of `key` held now.
    pub fn in_flight(&self, key: &str) -> u64 {
        let c = self.counts.lock().expect("lock");
        c.now.get(key).copied().unwrap_or(0)
    }

    /// The most requests of `key` held at once so far.
    pub fn max_in_flight(&self, key: &str) -> u64 {
        let c = self.counts.lock().expect("lock");
        c.max.get(key).copied().unwrap_or(0)
    }

    /// Requests of `key` that arrived so far.
    pub fn seen(&self, key: &str) -> u64 {
        let c = self.counts.lock().expect("lock");
        c.seen.get(key).copied().unwrap_or(0)
    }

    /// Forgets the most held at once (a new batch starts).
    pub fn reset_max(&self) {
        self.counts.lock().expect("lock").max.clear();
    }

    /// Waits until `n` requests of `key` are held (panics after 10 s).
    pub async fn wait_in_flight(&self, key: &str, n: u64) {
        crate::wait::until(
            &format!("{n} requests of {key} held by the upstream"),
            Duration::from_secs(10),
            || async { (self.in_flight(key) == n).then_some(()) },
        )
        .await;
    }
}

impl Drop for SlowUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, counts: Arc<Mutex<Counts>>, opened: watch::Receiver<u64>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (counts, opened) = (counts.clone(), opened.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (counts, opened) = (counts.clone(), opened.clone());
                async move { Ok::<_, Infallible>(answer(request, counts, opened).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    counts: Arc<Mutex<Counts>>,
    mut opened: watch::Receiver<u64>,
) -> Response<Full<Bytes>> {
    let key = request
        .headers()
        .get("x-tenant-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let _held = InFlight::new(&counts, key);
    if request.uri().path().starts_with("/fail") {
        let mut response = Response::new(Full::new(Bytes::from_static(b"failed\n")));
        *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
        return response;
    }
    let start = *opened.borrow_and_update();
    // Held until the gate opens after this request arrived.
    let _ = opened.wait_for(|g| *g > start).await;
    Response::new(Full::new(Bytes::from_static(b"ok\n")))
}
