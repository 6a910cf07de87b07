//! Running the service: bind, announce readiness, serve gRPC and HTTP, stop gracefully.

use crate::cli::{self, Args};
use crate::config::{self, source, ConfigError};
use crate::http;
use crate::listener;
use crate::metrics::Metrics;
use crate::proto::rls::rate_limit_service_server::RateLimitServiceServer;
use crate::readiness::Readiness;
use crate::reference_stats::ReferenceStats;
use crate::reload;
use crate::rls::RlsService;
use crate::shutdown;
use crate::store::gossip::{node, GossipStore};
use crate::store::health::Health;
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::store::Store;
use crate::tls::Acceptor;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How often the memory store drops idle counters.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How long in-flight calls may finish after SIGTERM before connections are cut.
const DRAIN: Duration = Duration::from_secs(5);

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The Redis options cannot work (a malformed URL).
    #[error("{0}")]
    Redis(String),
    /// The gossip store cannot start (bad flags, or its UDP address cannot be bound).
    #[error("gossip store: {0}")]
    Gossip(String),
    /// The gRPC port's TLS settings or files cannot work.
    #[error("gRPC TLS: {0}")]
    Tls(String),
    /// The xDS source's settings or files cannot work.
    #[error("xDS: {0}")]
    Xds(String),
    /// Serving failed.
    #[error("{0}")]
    Serve(String),
}

/// Where the configuration comes from, and what keeps it current.
enum Source {
    /// Files read at start (polled for changes every `--watch-interval-ms`).
    Files(source::Files),
    /// An xDS management server, which pushes it (boxed: the endpoint is large).
    Xds(Box<crate::xds::client::Settings>),
}

/// Loads the configuration and serves until SIGTERM or SIGINT.
///
/// Once both listeners are bound, prints exactly one line to stdout,
/// `floodgate-server ready grpc=ADDR http=ADDR`, which scripts and tests wait for.
///
/// With xDS, serving starts before the first push: until it, every domain is unknown, so
/// every request is answered `OK` with nothing limited (as the reference answers a domain
/// it has no configuration for).
pub async fn run(args: Args) -> Result<(), ServerError> {
    let (from, shared) = match args.xds().map_err(ServerError::Xds)? {
        None => {
            let files = source::read(&args.config)?;
            // Under `--store gossip` a limit of an algorithm it cannot hold is refused here.
            let config = config::parse_with(&files, &args.load_options())?;
            (Source::Files(files), config::Shared::new(config))
        }
        Some(settings) => (Source::Xds(Box::new(settings)), config::Shared::default()),
    };
    let (stop_tx, stop) = watch::channel(false);
    let readiness = Arc::new(Readiness::default());
    let delay = Duration::from_millis(args.shutdown_delay_ms);
    let draining = readiness.clone();
    tokio::spawn(async move {
        shutdown::stop_requested(delay, &draining).await;
        let _ = stop_tx.send(true);
    });
    let lifecycle = Lifecycle {
        readiness,
        stop: stop.clone(),
    };
    let grpc_tls = args.grpc_tls().map_err(ServerError::Tls)?;
    let redis = args.redis().map_err(ServerError::Redis)?;
    if redis.password_on_argv {
        tracing::warn!(
            "the Redis password is on the command line, where every local user can read it \
             (ps); use --redis-password-file or REDIS_AUTH"
        );
    }
    let gossip = args
        .gossip
        .resolve(redis.options.is_some())
        .map_err(ServerError::Gossip)?;
    if let Some(options) = gossip {
        let store = Arc::new(GossipStore::new(args.memory_capacity).with_counting(args.counting));
        let metrics = Arc::new(Metrics::new(store.name()));
        let node = node::start(store.clone(), options, &metrics.gossip, stop.clone())
            .await
            .map_err(ServerError::Gossip)?;
        tracing::info!(node = ?node.id(), "gossip store");
        tokio::spawn(publish_cells(store.clone(), metrics.clone(), stop.clone()));
        let served = serve(args, grpc_tls, from, shared, store, metrics, lifecycle).await;
        // The node gossips until here: dropping it leaves the cluster.
        drop(node);
        return served;
    }
    match redis.options {
        None => {
            let store =
                Arc::new(MemoryStore::new(args.memory_capacity).with_counting(args.counting));
            let metrics = Arc::new(Metrics::new(store.name()));
            tokio::spawn(sweep(store.clone(), metrics.clone(), stop.clone()));
            serve(args, grpc_tls, from, shared, store, metrics, lifecycle).await
        }
        Some(options) => {
            let health = Arc::new(Health::default());
            let target = options.target.clone();
            let store = RedisStore::connect(options, health.clone())
                .await
                .map_err(ServerError::Redis)?;
            tracing::info!(%target, up = store.is_up(), "Redis store");
            let metrics = Arc::new(Metrics::with_health(store.name(), health));
            serve(args, grpc_tls, from, shared, store, metrics, lifecycle).await
        }
    }
}

/// Where the server is in its life: whether `/healthz` still wants calls, and the
/// signal that it should stop accepting.
struct Lifecycle {
    readiness: Arc<Readiness>,
    stop: watch::Receiver<bool>,
}

async fn serve<S: Store>(
    args: Args,
    grpc_tls: cli::tls::Resolved,
    from: Source,
    shared: config::Shared,
    store: S,
    metrics: Arc<Metrics>,
    lifecycle: Lifecycle,
) -> Result<(), ServerError> {
    let Lifecycle { readiness, stop } = lifecycle;
    metrics.register_config(&shared.get());
    let acceptor = tls_acceptor(&grpc_tls, &metrics, &stop)?;

    let grpc = bind(args.grpc_addr).await?;
    let http = bind(args.http_addr).await?;
    let grpc_addr = local_addr(&grpc, args.grpc_addr)?;
    let http_addr = local_addr(&http, args.http_addr)?;

    keep_current(from, &args, &shared, &metrics, &readiness, &stop);

    let (limits, http_limits) = connection_limits(&args);
    let reference = reference_stats(&args, &stop);
    let exported = reference.clone().filter(|_| args.reference_stats);
    let mut service = RlsService::new(shared, store, metrics.clone(), args.rls(&grpc_tls));
    if let Some(stats) = reference {
        service = service.with_reference_stats(stats);
    }
    let grpc_server = tonic::transport::Server::builder()
        .max_concurrent_streams(args.calls.max_concurrent_streams)
        .timeout(args.calls.call_timeout())
        .add_service(RateLimitServiceServer::new(service))
        .serve_with_incoming_shutdown(
            listener::incoming(grpc, limits, metrics.connections.clone(), acceptor),
            stopped(stop.clone()),
        );
    metrics_listener(&args, &metrics, &exported, &http_limits, &stop).await?;
    let http_server = listener::http::serve(
        http,
        http::router(metrics.clone(), readiness, exported),
        http_limits,
        metrics.http_connections.clone(),
        stop.clone(),
    );

    tracing::info!(%grpc_addr, %http_addr, "serving");
    announce(grpc_addr, http_addr);
    let serve = async { tokio::join!(grpc_server, http_server) };
    let drain_deadline = async {
        stopped(stop.clone()).await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        (g, ()) = serve => {
            g.map_err(|e| ServerError::Serve(format!("gRPC: {e}")))?;
        }
        () = drain_deadline => {
            tracing::warn!("connections still open {DRAIN:?} after the signal; closing them");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// The metrics' own listener (`--metrics-addr`, the reference's `PROMETHEUS_ADDR`), bound
/// now and served until `stop` with the HTTP port's limits, if asked for.
async fn metrics_listener(
    args: &Args,
    metrics: &Arc<Metrics>,
    exported: &Option<Arc<ReferenceStats>>,
    limits: &listener::HttpLimits,
    stop: &watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let Some(addr) = args.metrics_addr else {
        return Ok(());
    };
    let port = bind(addr).await?;
    let bound = local_addr(&port, addr)?;
    tracing::info!(addr = %bound, path = %args.metrics_path, "metrics listener");
    tokio::spawn(listener::http::serve(
        port,
        http::metrics_router(metrics.clone(), exported.clone(), &args.metrics_path),
        *limits,
        metrics.http_connections.clone(),
        stop.clone(),
    ));
    Ok(())
}

/// Starts what keeps the configuration current until `stop`: the file poller, or the xDS
/// client.
fn keep_current(
    source: Source,
    args: &Args,
    shared: &config::Shared,
    metrics: &Arc<Metrics>,
    readiness: &Arc<Readiness>,
    stop: &watch::Receiver<bool>,
) {
    match source {
        Source::Files(files) if args.watch_interval_ms > 0 => {
            tokio::spawn(reload::watch_config(
                args.config.clone(),
                files,
                args.load_options(),
                shared.clone(),
                metrics.clone(),
                Duration::from_millis(args.watch_interval_ms),
                stop.clone(),
            ));
        }
        Source::Files(_) => {}
        Source::Xds(settings) => {
            if args.healthy_once_configured {
                readiness.await_configuration();
            }
            tokio::spawn(crate::xds::client::run(
                *settings,
                args.load_options(),
                shared.clone(),
                metrics.clone(),
                readiness.clone(),
                stop.clone(),
            ));
        }
    }
}

/// The gRPC port's TLS acceptor, if TLS is on, watching its files for rotation until `stop`.
fn tls_acceptor(
    grpc_tls: &cli::tls::Resolved,
    metrics: &Metrics,
    stop: &watch::Receiver<bool>,
) -> Result<Option<Arc<Acceptor>>, ServerError> {
    let Some(settings) = &grpc_tls.tls else {
        return Ok(None);
    };
    let acceptor =
        Arc::new(Acceptor::new(settings.clone(), metrics.tls.clone()).map_err(ServerError::Tls)?);
    tracing::info!(
        cert = %settings.cert.display(),
        client_certificates = settings.client_ca.is_some(),
        allowed_identities = settings.allowed.len(),
        "gRPC over TLS"
    );
    tokio::spawn(acceptor.clone().watch(stop.clone()));
    Ok(Some(acceptor))
}

/// The gRPC and HTTP ports' connection limits, logged, with a warning when together they
/// could exceed the open-files limit.
fn connection_limits(args: &Args) -> (listener::Limits, listener::HttpLimits) {
    let open_files = listener::open_files_limit();
    let limits = args.connection_limits(open_files);
    let http_limits = args.http_limits();
    tracing::info!(
        open_files,
        max_connections = limits.caps.total,
        max_connections_per_peer = limits.caps.per_peer,
        handshake_timeout = ?limits.timeouts.handshake,
        idle_timeout = ?limits.timeouts.idle,
        http_max_connections = http_limits.caps.total,
        http_max_connections_per_peer = http_limits.caps.per_peer,
        http_header_timeout = ?http_limits.header_timeout,
        http_idle_timeout = ?http_limits.idle_timeout,
        "connection limits"
    );
    if let Some(w) = listener::budget_warning(open_files, limits.caps.total, http_limits.caps.total)
    {
        tracing::warn!("{w}");
    }
    (limits, http_limits)
}

/// The reference's per-limit counters, when `/metrics` (`--reference-stats`) or a statsd
/// sink (`--statsd-addr`, pushing every `--statsd-flush-ms` until `stop`) wants them.
fn reference_stats(args: &Args, stop: &watch::Receiver<bool>) -> Option<Arc<ReferenceStats>> {
    let reference = (args.reference_stats || args.statsd_addr.is_some())
        .then(|| Arc::new(ReferenceStats::default()));
    if let (Some(stats), Some(target)) = (&reference, &args.statsd_addr) {
        tracing::info!(%target, "statsd: pushing the reference's counters");
        tokio::spawn(crate::statsd::run(
            stats.clone(),
            target.clone(),
            Duration::from_millis(args.statsd_flush_ms),
            stop.clone(),
        ));
    }
    reference
}

/// The readiness line: one line, flushed, nothing else ever goes to stdout.
fn announce(grpc: SocketAddr, http: SocketAddr) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "floodgate-server ready grpc={grpc} http={http}");
    let _ = out.flush();
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

fn local_addr(l: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, ServerError> {
    l.local_addr()
        .map_err(|source| ServerError::Bind { addr, source })
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Drops idle counters periodically and publishes the store's size.
async fn sweep(store: Arc<MemoryStore>, metrics: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let removed = store.sweep();
        metrics.set_store_cells(store.cells());
        metrics
            .holds
            .set(store.holds_in_flight(), store.holds_reclaimed());
        if removed > 0 {
            tracing::debug!(removed, cells = store.cells(), "swept idle counters");
        }
    }
}

/// Publishes the gossip store's size (its own sweep runs in the gossip loop).
async fn publish_cells(
    store: Arc<GossipStore>,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        metrics.set_store_cells(store.cells());
    }
}
