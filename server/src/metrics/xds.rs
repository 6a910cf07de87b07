//! The xDS configuration source's metrics (see [`crate::xds`]). Registered whatever the
//! source (zeros with a file), so a dashboard's queries and the documented table hold for
//! every deployment.

use super::StaticLabels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Pushes received, whether the stream is up, and how often it was opened again.
#[derive(Debug)]
pub struct XdsMetrics {
    updates_family: Family<StaticLabels, Counter>,
    updates: [Counter; 2],
    connected: Gauge,
    reconnects: Counter,
}

impl Default for XdsMetrics {
    fn default() -> Self {
        let updates_family = Family::<StaticLabels, Counter>::default();
        let updates =
            ["applied", "rejected"].map(|r| updates_family.get_or_create_owned(&[("result", r)]));
        XdsMetrics {
            updates_family,
            updates,
            connected: Gauge::default(),
            reconnects: Counter::default(),
        }
    }
}

impl XdsMetrics {
    /// Counts one response: applied (and ACKed) or rejected (NACKed).
    pub fn update(&self, applied: bool) {
        self.updates[usize::from(!applied)].inc();
    }

    /// Whether the stream to the management server is open.
    pub fn set_connected(&self, up: bool) {
        self.connected.set(i64::from(up));
    }

    /// Counts one attempt to open the stream again after it failed or ended.
    pub fn reconnect(&self) {
        self.reconnects.inc();
    }

    /// Adds these metrics to `registry` (counters' exported names gain `_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_xds_updates",
            "xDS responses received, by result (applied and ACKed, or rejected and NACKed keeping the configuration in force)",
            self.updates_family.clone(),
        );
        registry.register(
            "floodgate_xds_connected",
            "1 while the stream to the xDS management server is open, else 0 (always 0 with a file configuration)",
            self.connected.clone(),
        );
        registry.register(
            "floodgate_xds_reconnects",
            "Attempts to open the xDS stream again after it failed or ended",
            self.reconnects.clone(),
        );
    }
}
