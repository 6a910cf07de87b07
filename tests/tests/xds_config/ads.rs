//! The management server of `xds_config.rs`: ADS over tonic, state of the world, serving a
//! snapshot the test sets and recording every request it receives.

use floodgate_server::proto::discovery::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use floodgate_server::proto::discovery::{DiscoveryRequest, DiscoveryResponse};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tonic::transport::server::TcpIncoming;
use tonic::transport::ServerTlsConfig;
use tonic::{Request, Response, Status, Streaming};

pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// What the management server serves: a version and its resources (`None`: nothing yet).
pub type Snapshot = Option<(String, Vec<prost_types::Any>)>;

/// One request a stream carried, with the stream's metadata.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request: DiscoveryRequest,
    /// The stream's `x-xds-token` metadata (the client's additional header).
    pub token: Option<String>,
}

/// The ADS service: every stream gets the snapshot at its first request and at each change.
#[derive(Clone)]
struct Ads {
    snapshot: watch::Receiver<Snapshot>,
    seen: mpsc::UnboundedSender<Seen>,
    /// Turned true to end every stream (so the server's graceful shutdown completes).
    stop: watch::Receiver<bool>,
    nonces: Arc<Mutex<u64>>,
}

type Responses = Pin<Box<dyn futures::Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Responses;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let token = request
            .metadata()
            .get("x-xds-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel::<Result<DiscoveryResponse, Status>>(16);
        let (mut snapshot, seen, mut stop, nonces) = (
            self.snapshot.clone(),
            self.seen.clone(),
            self.stop.clone(),
            self.nonces.clone(),
        );
        tokio::spawn(async move {
            let mut subscribed = false;
            loop {
                let send_now = tokio::select! {
                    m = inbound.message() => match m {
                        Ok(Some(request)) => {
                            let first = !subscribed;
                            subscribed = true;
                            let _ = seen.send(Seen { request, token: token.clone() });
                            first
                        }
                        _ => return,
                    },
                    c = snapshot.changed() => c.is_ok() && subscribed,
                    _ = stop.wait_for(|s| *s) => return,
                };
                if !send_now {
                    continue;
                }
                let current = snapshot.borrow_and_update().clone();
                let Some((version, resources)) = current else {
                    continue;
                };
                let nonce = {
                    let mut n = nonces.lock().unwrap();
                    *n += 1;
                    format!("nonce-{n}")
                };
                let response = DiscoveryResponse {
                    version_info: version,
                    resources,
                    canary: false,
                    type_url: TYPE_URL.into(),
                    nonce,
                };
                if tx.send(Ok(response)).await.is_err() {
                    return;
                }
            }
        });
        let out =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
        Ok(Response::new(Box::pin(out)))
    }
}

/// A management server on `addr`, serving `snapshot`, until dropped or [`Management::stop`].
pub struct Management {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Management {
    /// Over plaintext (h2c).
    pub async fn start(
        addr: SocketAddr,
        snapshot: watch::Receiver<Snapshot>,
        seen: mpsc::UnboundedSender<Seen>,
        nonces: Arc<Mutex<u64>>,
    ) -> Management {
        Management::start_tls(addr, snapshot, seen, nonces, None).await
    }

    /// Over TLS when `tls` is given.
    pub async fn start_tls(
        addr: SocketAddr,
        snapshot: watch::Receiver<Snapshot>,
        seen: mpsc::UnboundedSender<Seen>,
        nonces: Arc<Mutex<u64>>,
        tls: Option<ServerTlsConfig>,
    ) -> Management {
        let listener = TcpListener::bind(addr)
            .await
            .expect("bind the management server");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = watch::channel(false);
        let service = AggregatedDiscoveryServiceServer::new(Ads {
            snapshot,
            seen,
            stop: stopped.clone(),
            nonces,
        });
        let mut shutdown = stopped;
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder
                .tls_config(tls)
                .expect("the management server's TLS");
        }
        let task = tokio::spawn(async move {
            let _ = builder
                .add_service(service)
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), async move {
                    let _ = shutdown.wait_for(|s| *s).await;
                })
                .await;
        });
        Management { addr, stop, task }
    }

    /// Ends every stream and closes the port.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
