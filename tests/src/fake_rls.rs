//! Stand-ins for a rate limit service where the real one cannot show the behaviour under
//! test: one that answers exactly what a test scripts (headers, raw body, or a gRPC error
//! status), and one that accepts connections and never answers.

use floodgate_server::proto::rls::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;

/// A gRPC rate limit service that answers every call with one scripted response and
/// keeps the requests it got. Stops when dropped.
pub struct Scripted {
    addr: SocketAddr,
    seen: Arc<Seen>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Seen {
    calls: AtomicU64,
    requests: Mutex<Vec<RateLimitRequest>>,
}

struct Service {
    /// The response, or the gRPC error (code, message) every call fails with.
    answer: Result<RateLimitResponse, (tonic::Code, String)>,
    seen: Arc<Seen>,
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        self.seen
            .requests
            .lock()
            .expect("lock")
            .push(request.into_inner());
        match &self.answer {
            Ok(answer) => Ok(tonic::Response::new(answer.clone())),
            Err((code, message)) => Err(tonic::Status::new(*code, message.clone())),
        }
    }
}

/// Serves `service` as the rate limit service on a free loopback port: where it listens,
/// and the task serving it (a stand-in aborts it when dropped).
pub async fn serve_rls<S: RateLimitService>(service: S) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(RateLimitServiceServer::new(service))
            .serve_with_incoming(TcpIncoming::from(listener))
            .await;
    });
    (addr, task)
}

impl Scripted {
    /// Serves `answer` to every call on a free loopback port.
    pub async fn start(answer: RateLimitResponse) -> Scripted {
        Scripted::serve(Ok(answer)).await
    }

    /// Fails every call with gRPC status `code` and `message` (a trailers-only answer).
    pub async fn failing(code: tonic::Code, message: &str) -> Scripted {
        Scripted::serve(Err((code, message.to_owned()))).await
    }

    async fn serve(answer: Result<RateLimitResponse, (tonic::Code, String)>) -> Scripted {
        let seen = Arc::new(Seen::default());
        let (addr, task) = serve_rls(Service {
            answer,
            seen: seen.clone(),
        })
        .await;
        Scripted { addr, seen, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.seen.calls.load(Ordering::SeqCst)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<RateLimitRequest> {
        self.seen.requests.lock().expect("lock").clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A server that accepts TCP connections, reads whatever comes and never answers: a
/// hung rate limit service.
pub struct Silent {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Silent {
    /// Listens on a free loopback port.
    pub async fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let mut sink = tokio::io::sink();
                    let _ = tokio::io::copy(&mut stream, &mut sink).await;
                });
            }
        });
        Silent { addr, task }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}
