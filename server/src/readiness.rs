//! Whether the server wants new calls, beyond whether its store can decide: what
//! `/healthz` reports before the store's own health.
//!
//! A server that is stopping (SIGTERM, see [`crate::shutdown`]) answers `503 draining`
//! for `--shutdown-delay-ms` while gRPC keeps serving, so that a load balancer or
//! Kubernetes' endpoints stop sending to it before it stops listening; before, both
//! listeners closed at once and `/healthz` went straight to "connection refused" while
//! proxies still sent calls.

use std::sync::atomic::{AtomicBool, Ordering};

/// The server's own readiness, shared by the shutdown path and `/healthz`.
#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
}

impl Readiness {
    /// From now on `/healthz` answers `503 draining`; calls are still served.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Why the server does not want new calls, if it does not: `/healthz`'s 503 body.
    pub fn not_ready(&self) -> Option<&'static str> {
        self.draining
            .load(Ordering::Relaxed)
            .then_some("draining: shutting down")
    }
}
