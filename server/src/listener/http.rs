//! The HTTP port's connections (`/healthz`, `/metrics`): HTTP/1.1 under their own caps and
//! timeouts, so that nothing sent to this port can use up the descriptors or the attention
//! the gRPC port needs.
//!
//! Every connection is served by hyper's HTTP/1 server with a **header-read timeout**: a
//! request's head must be complete within `--http-header-timeout-ms` of the connection's
//! start or of the previous answer, so a silent connection, a half-sent head, and a
//! kept-alive connection with no next request are all closed after that long
//! (`reason="header_timeout"`). Under it, the [`Guarded`] stream closes a connection that
//! moves no byte either way for `--http-idle-timeout-ms`: a client that asks and then reads
//! nothing (`reason="idle_timeout"`). Scrapers and probes ask once and read at once; a
//! Prometheus keeping its connection alive between scrapes just reconnects.

use super::accept::Acceptor;
use super::admit::Admission;
use super::conn::{AnyByte, Guarded, Timeouts};
use super::metrics::{Closed, ConnectionMetrics, Port};
use super::HttpLimits;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Serves `router` on `listener` under `limits` until `stop` turns true; then stops
/// accepting, lets each connection finish its request, and returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: HttpLimits,
    metrics: Arc<ConnectionMetrics>,
    stop: watch::Receiver<bool>,
) {
    let mut acceptor = Acceptor::new(
        listener,
        Port::Http,
        Admission::new(limits.caps),
        metrics.clone(),
    );
    let timeouts = Timeouts {
        handshake: limits.header_timeout,
        idle: limits.idle_timeout,
    };
    let mut connections = JoinSet::new();
    let mut stopping = stop.clone();
    loop {
        tokio::select! {
            (stream, ticket) = acceptor.next() => {
                let io = Guarded::new(stream, AnyByte, ticket, timeouts, metrics.clone());
                connections.spawn(one(io, router.clone(), limits, metrics.clone(), stop.clone()));
            }
            // Reap finished connections, so the set holds only open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopping.wait_for(|s| *s) => break,
        }
    }
    while connections.join_next().await.is_some() {}
}

/// One connection, until it closes or `stop` asks it to finish.
async fn one(
    io: Guarded<TcpStream, AnyByte>,
    router: axum::Router,
    limits: HttpLimits,
    metrics: Arc<ConnectionMetrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(router));
    tokio::pin!(conn);
    let stopped = async {
        let _ = stop.wait_for(|s| *s).await;
    };
    let served = tokio::select! {
        r = conn.as_mut() => Some(r),
        () = stopped => None,
    };
    let served = match served {
        Some(r) => r,
        None => {
            // Finish the request in progress, then close.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = served {
        if e.is_timeout() {
            // hyper's own timer: the head did not arrive in time.
            metrics.closed(Closed::HeaderTimeout);
        }
    }
}
