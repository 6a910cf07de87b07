//! Prometheus metrics, through the Prometheus project's client (`prometheus-client`).
//!
//! Every series is created up front (each label set resolved to its counter handle when
//! the server starts or a domain is configured), so the hot path is an atomic increment on
//! a held handle, never the library's label-map lock. Per-domain counters are looked up
//! under a read lock and created only for configured domains, so label cardinality is
//! bounded by the configuration, never by what clients send (requests for unconfigured
//! domains share the `domain=""` series).
//!
//! `/metrics` serves the classic text format (0.0.4) by default and OpenMetrics to a
//! scraper that asks for it (`Accept: application/openmetrics-text`); see [`Format`].
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `floodgate_decisions_total` | counter | `domain`, `result` (`ok`, `over_limit`, `shadow_over_limit`, `no_limit`) |
//! | `floodgate_limit_decisions_total` | counter | `domain`, `limit` (configured path), `result` (as above; only limits with `detailed_metric` or `value_to_metric`, see [`limits`]) |
//! | `floodgate_near_limit_total` | counter | `domain` (OK decisions above `--near-limit-ratio` of their limit) |
//! | `floodgate_requests_total` | counter | `result` (`ok`, `over_limit`, `shadow_over_limit`, `error`) |
//! | `floodgate_store_latency_seconds` | histogram | `store` |
//! | `floodgate_errors_total` | counter | `kind` (`invalid_argument`, `store_unavailable`, `store_full`, `store_overloaded`, `permission_denied`) |
//! | `floodgate_config_reloads_total` | counter | `result` (`success`, `failure`) |
//! | `floodgate_store_cells` | gauge | `store` |
//! | `floodgate_store_up` | gauge | `store` (1 can decide, 0 down: see [`crate::store::health`]) |
//! | `floodgate_store_failures_total` | counter | `cause` (`unreachable`, `timeout`, `auth`, `refused`, `script`: failed store calls and probes) |
//! | `floodgate_gossip_peers` | gauge | `state` (`live`, `dead`: see [`crate::store::gossip`]) |
//! | `floodgate_gossip_keys` | gauge | `owner` (`self`: keys published; `peers`: parts heard) |
//! | `floodgate_gossip_bytes_total` | counter | `direction` (`sent`, `received`) |
//! | `floodgate_connections` | gauge | none (gRPC connections open) |
//! | `floodgate_connections_closed_total` | counter | `reason` (`handshake_timeout`, `idle_timeout`, `over_limit`, `peer_over_limit`) |
//! | `floodgate_accept_errors_total` | counter | none (see [`crate::listener`]) |
//! | `floodgate_http_connections` | gauge | none (HTTP connections open) |
//! | `floodgate_http_connections_closed_total` | counter | `reason` (`header_timeout`, `idle_timeout`, `over_limit`, `peer_over_limit`) |
//! | `floodgate_http_accept_errors_total` | counter | none |
//! | `floodgate_quota_granted_hits_total` | counter | `domain` (hits granted as quota leases) |
//! | `floodgate_holds_in_flight`, `floodgate_holds_reclaimed_total` | gauge, counter | none (see [`HoldStats`]) |
//! | `floodgate_holds_total` | counter | `domain`, `event` (`acquired`, `rejected`, `released`: concurrency descriptors) |
//! | `floodgate_quota_header_malformed_total` | counter | none (requests whose `x-floodgate-quota` was malformed) |
//! | `floodgate_quota_header_refused_total` | counter | none (requests whose `x-floodgate-quota` `--refuse-quota` ignored) |
//! | `floodgate_xds_updates_total`, `floodgate_xds_connected`, `floodgate_xds_reconnects_total` | counter, gauge, counter | see [`XdsMetrics`] |
//! | `floodgate_tls_handshakes_total`, `floodgate_tls_handshake_errors_total`, `floodgate_tls_reloads_total`, `floodgate_identity_refusals_total` | counter | see [`crate::tls`] |

mod domains;
mod format;
mod holds;
pub mod limits;
mod lock_free;
mod outcome;
mod xds;

use domains::{register_decisions, DomainFamilies};
pub use domains::{DomainCounters, HoldEvent};
pub use format::Format;
pub use holds::HoldStats;
pub use outcome::Outcome;
pub use xds::XdsMetrics;

use crate::listener::{ConnectionMetrics, Port};
use crate::store::gossip::node::GossipStats;
use crate::store::health::Health;
use crate::tls::TlsMetrics;
use lock_free::{LatencyHistogram, StoreUp};
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// A failed request, by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request was malformed (empty domain, too many descriptors).
    InvalidArgument,
    /// The store could not be reached.
    StoreUnavailable,
    /// The memory store was at capacity.
    StoreFull,
    /// Too many Redis calls were in flight already.
    StoreOverloaded,
    /// A charge that `--refuse-charges` refuses.
    PermissionDenied,
}

const ERROR_KINDS: [(ErrorKind, &str); 5] = [
    (ErrorKind::InvalidArgument, "invalid_argument"),
    (ErrorKind::StoreUnavailable, "store_unavailable"),
    (ErrorKind::StoreFull, "store_full"),
    (ErrorKind::StoreOverloaded, "store_overloaded"),
    (ErrorKind::PermissionDenied, "permission_denied"),
];

const REQUEST_RESULTS: [&str; 4] = ["ok", "over_limit", "shadow_over_limit", "error"];
const RELOAD_RESULTS: [&str; 2] = ["success", "failure"];

/// A label set of fixed names and values known at compile time.
pub(crate) type StaticLabels = [(&'static str, &'static str); 1];

/// A counter per label value of `name`, created now and registered as `family` (whose
/// exported name gains `_total`).
fn counters<const N: usize>(
    registry: &mut Registry,
    family: &str,
    help: &str,
    name: &'static str,
    values: [&'static str; N],
) -> [Counter; N] {
    let f = Family::<StaticLabels, Counter>::default();
    let handles = values.map(|v| f.get_or_create_owned(&[(name, v)]));
    registry.register(family, help, f);
    handles
}

/// Registers the store's metrics (latency, size, whether it can decide, its failures);
/// returns the handles the server writes.
fn register_store(
    registry: &mut Registry,
    store: &'static str,
    health: &Arc<Health>,
) -> (LatencyHistogram, Gauge) {
    let latency = LatencyHistogram::new(store);
    registry.register(
        "floodgate_store_latency_seconds",
        "Time the store took to decide one request",
        latency.handle(),
    );
    let cells = Family::<StaticLabels, Gauge>::default();
    let store_cells = cells.get_or_create_owned(&[("store", store)]);
    registry.register(
        "floodgate_store_cells",
        "Cells the store holds (memory store: one per counter plus one per sliding log entry)",
        cells,
    );
    registry.register(
        "floodgate_store_up",
        "1 while the store can decide, 0 while it cannot (unreachable, or refusing our credentials or script; calls then answer UNAVAILABLE)",
        StoreUp::new(store, health.clone()),
    );
    health.register(registry);
    (latency, store_cells)
}

/// Every metric the server exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    families: DomainFamilies,
    quota_header_malformed: Counter,
    quota_header_refused: Counter,
    limit_family: Arc<limits::LimitFamily>,
    domains: RwLock<HashMap<Arc<str>, Arc<DomainCounters>>>,
    unknown_domain: Arc<DomainCounters>,
    requests: [Counter; 4],
    errors: [Counter; 5],
    reloads: [Counter; 2],
    latency: LatencyHistogram,
    store_cells: Gauge,
    health: Arc<Health>,
    /// The gRPC port's connections (see [`crate::listener`]).
    pub connections: Arc<ConnectionMetrics>,
    /// TLS handshakes, certificate reloads and identity refusals (see [`crate::tls`]).
    pub tls: Arc<TlsMetrics>,
    /// The HTTP port's connections.
    pub http_connections: Arc<ConnectionMetrics>,
    /// The xDS configuration source (see [`crate::xds`]).
    pub xds: Arc<XdsMetrics>,
    /// The gossip store's peers, keys and traffic (series only under `--store gossip`).
    pub gossip: Arc<GossipStats>,
    /// The memory store's concurrency holds (see [`HoldStats`]).
    pub holds: Arc<HoldStats>,
}

/// A request's overall answer, for `floodgate_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestResult {
    /// OK.
    Ok,
    /// OVER_LIMIT.
    OverLimit,
    /// Over a limit, answered OK because of `--shadow-mode`.
    ShadowOverLimit,
    /// A gRPC error.
    Error,
}

impl Metrics {
    /// Empty metrics for a server using the store named `store`, always up.
    pub fn new(store: &'static str) -> Metrics {
        Metrics::with_health(store, Arc::default())
    }

    /// Empty metrics for a store whose reachability `health` tracks.
    pub fn with_health(store: &'static str, health: Arc<Health>) -> Metrics {
        let mut registry = Registry::default();
        let families = DomainFamilies::default();
        let limit_family = Arc::new(limits::LimitFamily::default());
        let unknown_domain = Arc::new(DomainCounters::new(&families, &limit_family, ""));
        register_decisions(&mut registry, &families, &limit_family);
        let quota_header_malformed = Counter::default();
        registry.register(
            "floodgate_quota_header_malformed",
            "Requests whose x-floodgate-quota header was malformed (answered, with no grant)",
            quota_header_malformed.clone(),
        );
        let quota_header_refused = Counter::default();
        registry.register(
            "floodgate_quota_header_refused",
            "Requests whose x-floodgate-quota header --refuse-quota ignored (answered, with no grant)",
            quota_header_refused.clone(),
        );
        let requests = counters(
            &mut registry,
            "floodgate_requests",
            "ShouldRateLimit calls, by answer (shadow_over_limit: over, answered OK under --shadow-mode)",
            "result",
            REQUEST_RESULTS,
        );
        let errors = counters(
            &mut registry,
            "floodgate_errors",
            "Calls answered with a gRPC error, by cause",
            "kind",
            ERROR_KINDS.map(|(_, label)| label),
        );
        let reloads = counters(
            &mut registry,
            "floodgate_config_reloads",
            "Configuration changes seen, by result (a failure keeps the previous configuration)",
            "result",
            RELOAD_RESULTS,
        );
        let (latency, store_cells) = register_store(&mut registry, store, &health);
        let connections = Arc::new(ConnectionMetrics::new(Port::Grpc));
        connections.register(&mut registry);
        let tls = Arc::new(TlsMetrics::default());
        tls.register(&mut registry);
        let http_connections = Arc::new(ConnectionMetrics::new(Port::Http));
        http_connections.register(&mut registry);
        let xds = Arc::new(XdsMetrics::default());
        xds.register(&mut registry);
        let gossip = Arc::new(GossipStats::default());
        gossip.register(&mut registry);
        let holds = Arc::new(HoldStats::default());
        holds.register(&mut registry);
        Metrics {
            registry,
            families,
            quota_header_malformed,
            quota_header_refused,
            limit_family,
            domains: RwLock::default(),
            unknown_domain,
            requests,
            errors,
            reloads,
            latency,
            store_cells,
            health,
            connections,
            tls,
            http_connections,
            xds,
            gossip,
            holds,
        }
    }

    /// The store's reachability, for `/healthz`.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The counters of a configured domain (created on first use).
    pub fn domain(&self, name: &Arc<str>) -> Arc<DomainCounters> {
        if let Some(c) = self
            .domains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return c.clone();
        }
        let mut map = self.domains.write().unwrap_or_else(PoisonError::into_inner);
        map.entry(name.clone())
            .or_insert_with(|| {
                Arc::new(DomainCounters::new(
                    &self.families,
                    &self.limit_family,
                    name,
                ))
            })
            .clone()
    }

    /// Creates the counters of every configured domain, so they export zeros before traffic.
    pub fn register_domains<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut map = self.domains.write().unwrap_or_else(PoisonError::into_inner);
        for name in names {
            if !map.contains_key(name) {
                let counters = Arc::new(DomainCounters::new(
                    &self.families,
                    &self.limit_family,
                    name,
                ));
                map.insert(Arc::from(name), counters);
            }
        }
    }

    /// Creates the series of every per-limit metric of `config` (see [`limits`]), and its
    /// domains', so they export zeros before traffic.
    pub fn register_config(&self, config: &crate::config::Config) {
        self.register_domains(config.domain_names());
        for (domain, path) in config.limit_series() {
            self.domain(domain).register_limit(path);
        }
    }

    /// The counters shared by every unconfigured domain.
    pub fn unknown_domain(&self) -> Arc<DomainCounters> {
        self.unknown_domain.clone()
    }

    /// Counts one answered request.
    pub fn request(&self, result: RequestResult) {
        self.requests[result as usize].inc();
    }

    /// Counts one request whose quota header was malformed (answered, no grant).
    pub fn quota_header_malformed(&self) {
        self.quota_header_malformed.inc();
    }

    /// Counts one request whose quota header `--refuse-quota` ignored (answered, no grant).
    pub fn quota_header_refused(&self) {
        self.quota_header_refused.inc();
    }

    /// Counts one failed request.
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind as usize].inc();
        self.request(RequestResult::Error);
    }

    /// Counts one configuration reload.
    pub fn reload(&self, success: bool) {
        self.reloads[usize::from(!success)].inc();
    }

    /// Records how long one store call took.
    pub fn store_latency(&self, took: Duration) {
        self.latency.observe(took);
    }

    /// Sets the store's size gauge.
    pub fn set_store_cells(&self, cells: usize) {
        self.store_cells
            .set(i64::try_from(cells).unwrap_or(i64::MAX));
    }

    /// The classic Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        self.render_as(Format::Classic)
    }

    /// The exposition of every metric in `format`.
    pub fn render_as(&self, format: Format) -> String {
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail, and our own metrics' encoders only fail when the
        // writer does; an error would leave a truncated exposition, never a panic.
        let _ = match format {
            Format::Classic => prometheus_text::encode(&mut out, &self.registry),
            Format::OpenMetrics => text::encode(&mut out, &self.registry),
        };
        out
    }
}

#[cfg(test)]
mod tests;
