//! Whether the server wants new calls, beyond whether its store can decide: what
//! `/healthz` reports before the store's own health.
//!
//! A server that is stopping (SIGTERM, see [`crate::shutdown`]) answers `503 draining`
//! for `--shutdown-delay-ms` while gRPC keeps serving, so that a load balancer or
//! Kubernetes' endpoints stop sending to it before it stops listening; before, both
//! listeners closed at once and `/healthz` went straight to "connection refused" while
//! proxies still sent calls.
//!
//! A server whose configuration comes from xDS and was asked to (`--healthy-once-configured`,
//! the reference's `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`) answers `503 waiting` until the
//! first push is in force, so that Kubernetes sends it no call it would answer unlimited.

use std::sync::atomic::{AtomicBool, Ordering};

/// The server's own readiness, shared by the shutdown path and `/healthz`.
#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
    unconfigured: AtomicBool,
}

impl Readiness {
    /// From now on `/healthz` answers `503 draining`; calls are still served.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Until [`Readiness::configured`], `/healthz` answers `503 waiting`.
    pub fn await_configuration(&self) {
        self.unconfigured.store(true, Ordering::Relaxed);
    }

    /// A configuration is in force: the wait of [`Readiness::await_configuration`] is over.
    pub fn configured(&self) {
        self.unconfigured.store(false, Ordering::Relaxed);
    }

    /// Why the server does not want new calls, if it does not: `/healthz`'s 503 body.
    pub fn not_ready(&self) -> Option<&'static str> {
        if self.draining.load(Ordering::Relaxed) {
            Some("draining: shutting down")
        } else if self.unconfigured.load(Ordering::Relaxed) {
            Some("waiting: no configuration pushed yet")
        } else {
            None
        }
    }
}
