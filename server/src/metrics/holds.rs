//! The memory store's concurrency holds: how many slots are held across all its counters,
//! and how many holds ended at their deadline unreleased (reclaimed). Only the memory
//! store reports them (read at each sweep, every second); on Redis the holds live in
//! Redis and these stay 0 (the per-domain `floodgate_holds_total` counts every store).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};

/// `floodgate_holds_in_flight` and `floodgate_holds_reclaimed_total`.
#[derive(Debug, Default)]
pub struct HoldStats {
    in_flight: Gauge,
    reclaimed: Counter,
    /// The store's reclaimed total last published, so the counter moves by the difference.
    published: AtomicU64,
}

impl HoldStats {
    /// Registers both series in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_holds_in_flight",
            "Concurrency slots held across every counter (memory store; 0 on other stores)",
            self.in_flight.clone(),
        );
        registry.register(
            "floodgate_holds_reclaimed",
            "Concurrency holds that ended at their deadline without a release (memory store; 0 on other stores)",
            self.reclaimed.clone(),
        );
    }

    /// Publishes what the memory store counted: slots held now, and its running total of
    /// holds reclaimed.
    pub fn set(&self, in_flight: u64, reclaimed_total: u64) {
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        let before = self.published.swap(reclaimed_total, Ordering::Relaxed);
        self.reclaimed
            .inc_by(reclaimed_total.saturating_sub(before));
    }
}
