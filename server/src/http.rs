//! The HTTP side: `/healthz` (also `/healthcheck`, the reference's path) for probes and
//! `/metrics` for Prometheus.

use crate::metrics::{Format, Metrics};
use crate::readiness::Readiness;
use crate::reference_stats::ReferenceStats;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// The routes, over the server's metrics.
///
/// `/healthz` and `/healthcheck` answer `503 draining: shutting down` once SIGTERM has started the drain
/// (see [`crate::shutdown`]); otherwise `200 ok` while the store can decide, and
/// `503 degraded: store cannot decide (<cause>): <reason>` while it cannot (the Redis store during an outage, or while
/// Redis refuses our credentials or our script; the memory store is always up). The
/// process itself is fine then and recovers by itself: use it for readiness and alerts,
/// not for a liveness probe that would restart the server.
///
/// `/metrics` also carries the reference's series when `reference` is given.
pub fn router(
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    reference: Option<Arc<ReferenceStats>>,
) -> Router {
    let health = metrics.clone();
    let probe = get(move || {
        let metrics = health.clone();
        let readiness = readiness.clone();
        async move {
            let h = metrics.health();
            if let Some(why) = readiness.not_ready() {
                (StatusCode::SERVICE_UNAVAILABLE, why.to_owned())
            } else if h.is_up() {
                (StatusCode::OK, "ok".to_owned())
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("degraded: {}", h.describe()),
                )
            }
        }
    });
    Router::new()
        // `/healthcheck` is the reference's path: probes written for it keep working.
        .route("/healthz", probe.clone())
        .route("/healthcheck", probe)
        .route("/metrics", metrics_route(metrics, reference))
}

/// The metrics alone under `path`: the listener of `--metrics-addr` (the reference's
/// `PROMETHEUS_ADDR`), which a scraper configured for the reference's image points at.
pub fn metrics_router(
    metrics: Arc<Metrics>,
    reference: Option<Arc<ReferenceStats>>,
    path: &str,
) -> Router {
    Router::new().route(path, metrics_route(metrics, reference))
}

/// `GET`: the exposition, with the reference's series when `reference` is given.
fn metrics_route(
    metrics: Arc<Metrics>,
    reference: Option<Arc<ReferenceStats>>,
) -> axum::routing::MethodRouter {
    get(move |headers: HeaderMap| {
        let metrics = metrics.clone();
        let reference = reference.clone();
        async move {
            // The classic text format unless the scraper asks for OpenMetrics.
            let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
            let format = Format::from_accept(accept);
            let mut body = metrics.render_as(format);
            if let Some(stats) = reference {
                // OpenMetrics ends with `# EOF`: the reference's families go before.
                let eof = body.strip_suffix("# EOF\n").map(str::len);
                let mut extra = String::new();
                stats.render(&mut extra, eof.is_some());
                match eof {
                    Some(at) => body.insert_str(at, &extra),
                    None => body.push_str(&extra),
                }
            }
            ([(CONTENT_TYPE, format.content_type())], body).into_response()
        }
    })
}
