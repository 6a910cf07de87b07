//! The ADS client task: opens the stream, hands each response to the [`Session`], puts
//! what it accepts in force through the same path as a file reload
//! ([`crate::reload::put_in_force`], so counters of unchanged limits survive), and sends the
//! session's ACK or NACK. When the stream fails or ends, the configuration in force keeps
//! serving and the stream is opened again after the [`Backoff`]'s wait.

use super::session::{Backoff, Reply, Session};
use crate::config::{LoadOptions, Shared};
use crate::metrics::Metrics;
use crate::proto::discovery::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use crate::proto::discovery::DiscoveryRequest;
use crate::proto::envoy::config::core::v3::Node;
use crate::readiness::Readiness;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Channel, Endpoint};

/// How long connecting to the management server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 PINGs on an idle stream, so a management server that vanished without closing
/// the connection (a node lost) is noticed within [`KEEPALIVE`] + [`KEEPALIVE_TIMEOUT`].
const KEEPALIVE: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and as whom to ask for the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The management server, with its scheme and TLS settings.
    pub endpoint: Endpoint,
    /// Logged: the URL as given.
    pub url: String,
    /// Who we are to the management server (`id`, `metadata`).
    pub node: Node,
    /// gRPC metadata on the stream (the reference's additional headers).
    pub headers: Vec<(AsciiMetadataKey, AsciiMetadataValue)>,
    /// The largest response accepted, in bytes (tonic's default, 4 MiB, when `None`).
    pub max_message: Option<usize>,
    /// How long to wait before opening a stream again (the reference's
    /// `XDS_CLIENT_BACKOFF_*`).
    pub backoff: Backoff,
}

impl Settings {
    /// `endpoint` with the timeouts every stream uses.
    pub fn endpoint(url: &str) -> Result<Endpoint, String> {
        Endpoint::from_shared(url.to_owned())
            .map(|e| {
                e.connect_timeout(CONNECT_TIMEOUT)
                    .http2_keep_alive_interval(KEEPALIVE)
                    .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                    .keep_alive_while_idle(true)
            })
            .map_err(|e| format!("{url:?}: not a URL: {e}"))
    }
}

/// Asks for the configuration until `stop`, putting every valid push in force in `shared`.
pub async fn run(
    settings: Settings,
    options: LoadOptions,
    shared: Shared,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    mut stop: watch::Receiver<bool>,
) {
    let mut session = Session::new(settings.node.clone());
    let mut backoff = settings.backoff;
    let random = std::collections::hash_map::RandomState::new();
    let mut attempt: u64 = 0;
    tracing::info!(url = %settings.url, node = %settings.node.id, "xDS: asking for RateLimitConfig");
    loop {
        let ended = tokio::select! {
            why = stream(&settings, &mut session, &options, &shared, &metrics, &readiness, &mut backoff) => why,
            _ = stop.wait_for(|s| *s) => return,
        };
        metrics.xds.set_connected(false);
        attempt += 1;
        let wait = backoff.failed(unit(&random, attempt));
        tracing::warn!(
            url = %settings.url,
            retry_in = ?wait,
            version = session.applied(),
            "xDS stream ended: {ended}; the configuration in force keeps serving"
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        metrics.xds.reconnect();
    }
}

/// A draw in `[0, 1)` for the back-off's spread: `attempt` hashed with the process's
/// random keys (randomness for timing only, nothing secret).
fn unit(random: &std::collections::hash_map::RandomState, attempt: u64) -> f64 {
    use std::hash::BuildHasher;
    (random.hash_one(attempt) >> 11) as f64 / (1u64 << 53) as f64
}

/// One stream, from connecting to its end; returns why it ended.
async fn stream(
    settings: &Settings,
    session: &mut Session,
    options: &LoadOptions,
    shared: &Shared,
    metrics: &Metrics,
    readiness: &Readiness,
    backoff: &mut Backoff,
) -> String {
    let channel: Channel = match settings.endpoint.connect().await {
        Ok(c) => c,
        Err(e) => return format!("cannot connect: {}", error_chain(&e)),
    };
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    if let Some(max) = settings.max_message {
        client = client.max_decoding_message_size(max);
    }
    // Requests flow through a channel: the first now, then one per response. Its
    // capacity is never reached (one request is sent per response received).
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(4);
    if tx.try_send(session.subscribe()).is_err() {
        return "cannot queue the subscription".to_owned();
    }
    let outbound =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut request = tonic::Request::new(outbound);
    for (key, value) in &settings.headers {
        request.metadata_mut().insert(key.clone(), value.clone());
    }
    let mut inbound = match client.stream_aggregated_resources(request).await {
        Ok(r) => r.into_inner(),
        Err(status) => return format!("refused: {status}"),
    };
    metrics.xds.set_connected(true);
    loop {
        let response = match inbound.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return "the management server closed it".to_owned(),
            Err(status) => return format!("{status}"),
        };
        backoff.reset();
        let next = match session.on_response(&response, options) {
            Reply::Apply {
                config,
                version,
                ack,
            } => {
                let domains = config.domain_names().count();
                crate::reload::put_in_force(config, shared, metrics);
                readiness.configured();
                metrics.xds.update(true);
                tracing::info!(%version, domains, "xDS: configuration applied");
                ack
            }
            Reply::Reject { error, nack } => {
                metrics.xds.update(false);
                tracing::error!(
                    version = %response.version_info,
                    kept = session.applied(),
                    "xDS: configuration rejected: {error}; keeping the configuration in force"
                );
                nack
            }
        };
        if tx.send(next).await.is_err() {
            return "the request stream closed".to_owned();
        }
    }
}

/// An error and its sources on one line (tonic's transport error alone says only
/// "transport error").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
