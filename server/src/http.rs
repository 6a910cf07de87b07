//! The HTTP side: `/healthz` for probes and `/metrics` for Prometheus.

use crate::metrics::Metrics;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// The routes, over the server's metrics.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        // Always "ok" with the memory store; the Redis store will answer "degraded" here.
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                        metrics.render(),
                    )
                        .into_response()
                }
            }),
        )
}
