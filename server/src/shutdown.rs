//! When to stop: SIGTERM drains first, SIGINT stops at once.
//!
//! On SIGTERM (what Kubernetes and systemd send) the server first turns `/healthz` to
//! `503 draining` and keeps serving gRPC for `--shutdown-delay-ms`: Kubernetes takes a
//! terminating pod out of its Service's endpoints at once, but every proxy learns it a
//! little later, and calls they send meanwhile must still be answered. Only then do the
//! listeners close and in-flight calls drain (see [`crate::server`]). So a Deployment
//! needs no `preStop` sleep. SIGINT (Ctrl-C at a terminal) stops at once, and a second
//! signal during the delay cuts it short.

use crate::readiness::Readiness;
use std::time::Duration;

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// SIGTERM: drain, then stop.
    Terminate,
    /// SIGINT: stop now.
    Interrupt,
}

/// The process's signal listeners, made once so that a second signal is seen too.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let term = signal(SignalKind::terminate())
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
                })
                .ok();
            Signals { term }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        if let Some(term) = self.term.as_mut() {
            return tokio::select! {
                _ = term.recv() => Signal::Terminate,
                _ = tokio::signal::ctrl_c() => Signal::Interrupt,
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        Signal::Interrupt
    }
}

/// Resolves when the server should stop accepting: at once on SIGINT, `delay` after
/// SIGTERM (`readiness` draining meanwhile), or at a second signal during the delay.
pub async fn stop_requested(delay: Duration, readiness: &Readiness) {
    let mut signals = Signals::new();
    match signals.next().await {
        Signal::Interrupt => tracing::info!("interrupted: shutting down"),
        Signal::Terminate if delay.is_zero() => tracing::info!("SIGTERM: shutting down"),
        Signal::Terminate => {
            readiness.drain();
            tracing::info!(
                ?delay,
                "SIGTERM: /healthz answers 503 draining, gRPC still serves; shutting down after the delay"
            );
            tokio::select! {
                () = tokio::time::sleep(delay) => tracing::info!("drain delay over: shutting down"),
                _ = signals.next() => tracing::info!("second signal: shutting down now"),
            }
        }
    }
}
