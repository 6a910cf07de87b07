//! Each port's connection metrics: open connections, connections the server closed by
//! reason, failed accepts. The gRPC port's are `floodgate_connections`,
//! `floodgate_connections_closed_total{reason}` and `floodgate_accept_errors_total`; the
//! HTTP port's the same names with `http_` after `floodgate_`.

use super::admit::Refused;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `reason` label of `floodgate_connections_closed_total`.
type ReasonLabel = [(&'static str, &'static str); 1];

/// Which port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// `--grpc-addr`, the RLS service.
    Grpc,
    /// `--http-addr`, `/healthz` and `/metrics`.
    Http,
}

impl Port {
    /// The reasons this port closes connections for.
    fn reasons(self) -> &'static [Closed] {
        match self {
            Port::Grpc => &[
                Closed::HandshakeTimeout,
                Closed::IdleTimeout,
                Closed::OverLimit,
                Closed::PeerOverLimit,
            ],
            Port::Http => &[
                Closed::HeaderTimeout,
                Closed::IdleTimeout,
                Closed::OverLimit,
                Closed::PeerOverLimit,
            ],
        }
    }

    /// The metric names' stem: `floodgate_` or `floodgate_http_`.
    fn stem(self) -> &'static str {
        match self {
            Port::Grpc => "floodgate_",
            Port::Http => "floodgate_http_",
        }
    }

    /// How help texts name it.
    pub fn name(self) -> &'static str {
        match self {
            Port::Grpc => "gRPC",
            Port::Http => "HTTP",
        }
    }
}

/// Why the server closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// gRPC: it did not send the HTTP/2 preface in time.
    HandshakeTimeout,
    /// HTTP: it did not send a request's head in time.
    HeaderTimeout,
    /// It carried nothing for the idle timeout.
    IdleTimeout,
    /// It arrived while the port had its cap open.
    OverLimit,
    /// It arrived while its peer had its per-peer cap open.
    PeerOverLimit,
}

impl Closed {
    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Closed::HandshakeTimeout => "handshake_timeout",
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::OverLimit => "over_limit",
            Closed::PeerOverLimit => "peer_over_limit",
        }
    }
}

impl From<Refused> for Closed {
    fn from(r: Refused) -> Self {
        match r {
            Refused::OverLimit => Closed::OverLimit,
            Refused::PeerOverLimit => Closed::PeerOverLimit,
        }
    }
}

/// One port's metrics, registered with the others by [`crate::metrics::Metrics`].
/// Counting is an atomic operation on a handle created up front.
#[derive(Debug)]
pub struct ConnectionMetrics {
    port: Port,
    open: Gauge,
    closed_family: Family<ReasonLabel, Counter>,
    /// Indexed by `Closed as usize`; reasons the port never uses are never exported.
    closed: [Counter; 5],
    accept_errors: Counter,
}

impl ConnectionMetrics {
    /// The metrics of `port`, every series at zero.
    pub fn new(port: Port) -> ConnectionMetrics {
        let closed_family = Family::<ReasonLabel, Counter>::default();
        let mut closed: [Counter; 5] = Default::default();
        for &why in port.reasons() {
            closed[why as usize] = closed_family.get_or_create_owned(&[("reason", why.label())]);
        }
        ConnectionMetrics {
            port,
            open: Gauge::default(),
            closed_family,
            closed,
            accept_errors: Counter::default(),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> u64 {
        u64::try_from(self.open.get()).unwrap_or(0)
    }

    pub(super) fn opened(&self) {
        self.open.inc();
    }

    pub(super) fn gone(&self) {
        self.open.dec();
    }

    pub(super) fn closed(&self, why: Closed) {
        self.closed[why as usize].inc();
    }

    pub(super) fn accept_failed(&self) {
        self.accept_errors.inc();
    }

    /// Adds these metrics to `registry` (counters' exported names gain `_total`).
    pub fn register(&self, registry: &mut Registry) {
        let (stem, name) = (self.port.stem(), self.port.name());
        registry.register(
            format!("{stem}connections"),
            format!("{name} connections open"),
            self.open.clone(),
        );
        registry.register(
            format!("{stem}connections_closed"),
            format!("{name} connections the server closed, by reason"),
            self.closed_family.clone(),
        );
        registry.register(
            format!("{stem}accept_errors"),
            format!("Failed accepts on the {name} port (e.g. out of file descriptors), each followed by a back-off"),
            self.accept_errors.clone(),
        );
    }
}
