//! Prometheus metrics, kept as plain atomics and rendered in the text exposition format.
//!
//! The hot path is an atomic increment: per-domain counters are looked up under a read
//! lock and created only for configured domains, so label cardinality is bounded by the
//! configuration, never by what clients send (requests for unconfigured domains share the
//! `domain=""` series).
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `floodgate_decisions_total` | counter | `domain`, `result` (`ok`, `over_limit`, `shadow_over_limit`, `no_limit`) |
//! | `floodgate_requests_total` | counter | `result` (`ok`, `over_limit`, `error`) |
//! | `floodgate_store_latency_seconds` | histogram | `store` |
//! | `floodgate_errors_total` | counter | `kind` (`invalid_argument`, `store_unavailable`, `store_full`, `store_overloaded`) |
//! | `floodgate_config_reloads_total` | counter | `result` (`success`, `failure`) |
//! | `floodgate_store_cells` | gauge | `store` |
//! | `floodgate_store_up` | gauge | `store` (1 reachable, 0 down: see [`crate::store::health`]) |
//! | `floodgate_connections` | gauge | none (gRPC connections open) |
//! | `floodgate_connections_closed_total` | counter | `reason` (`handshake_timeout`, `idle_timeout`, `over_limit`) |
//! | `floodgate_accept_errors_total` | counter | none (see [`crate::listener`]) |

use crate::listener::ConnectionMetrics;
use crate::store::health::Health;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// How one request descriptor was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Within its limit.
    Ok,
    /// Over its limit, answered OVER_LIMIT.
    OverLimit,
    /// Over a shadow-mode limit, answered OK.
    ShadowOverLimit,
    /// No limit applies (no match, or `unlimited`).
    NoLimit,
}

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Ok, "ok"),
    (Outcome::OverLimit, "over_limit"),
    (Outcome::ShadowOverLimit, "shadow_over_limit"),
    (Outcome::NoLimit, "no_limit"),
];

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
}

const ERROR_KINDS: [(ErrorKind, &str); 4] = [
    (ErrorKind::InvalidArgument, "invalid_argument"),
    (ErrorKind::StoreUnavailable, "store_unavailable"),
    (ErrorKind::StoreFull, "store_full"),
    (ErrorKind::StoreOverloaded, "store_overloaded"),
];

/// Upper bounds of the store latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Per-domain decision counters, indexed like [`OUTCOMES`].
#[derive(Debug, Default)]
pub struct DomainCounters([AtomicU64; 4]);

impl DomainCounters {
    /// Counts one descriptor decision.
    pub fn record(&self, outcome: Outcome) {
        self.0[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Every metric the server exports.
#[derive(Debug)]
pub struct Metrics {
    store: &'static str,
    domains: RwLock<HashMap<Arc<str>, Arc<DomainCounters>>>,
    unknown_domain: Arc<DomainCounters>,
    requests: [AtomicU64; 3],
    errors: [AtomicU64; 4],
    reloads: [AtomicU64; 2],
    latency_buckets: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_ns: AtomicU64,
    latency_count: AtomicU64,
    store_cells: AtomicU64,
    health: Arc<Health>,
    /// The gRPC listener's connections (see [`crate::listener`]).
    pub connections: Arc<ConnectionMetrics>,
}

/// A request's overall answer, for `floodgate_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestResult {
    /// OK.
    Ok,
    /// OVER_LIMIT.
    OverLimit,
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
        Metrics {
            store,
            domains: RwLock::default(),
            unknown_domain: Arc::default(),
            requests: Default::default(),
            errors: Default::default(),
            reloads: Default::default(),
            latency_buckets: Default::default(),
            latency_sum_ns: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            store_cells: AtomicU64::new(0),
            health,
            connections: Arc::default(),
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
        map.entry(name.clone()).or_default().clone()
    }

    /// Creates the counters of every configured domain, so they export zeros before traffic.
    pub fn register_domains<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut map = self.domains.write().unwrap_or_else(PoisonError::into_inner);
        for name in names {
            if !map.contains_key(name) {
                map.insert(Arc::from(name), Arc::default());
            }
        }
    }

    /// The counters shared by every unconfigured domain.
    pub fn unknown_domain(&self) -> Arc<DomainCounters> {
        self.unknown_domain.clone()
    }

    /// Counts one answered request.
    pub fn request(&self, result: RequestResult) {
        self.requests[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one failed request.
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind as usize].fetch_add(1, Ordering::Relaxed);
        self.request(RequestResult::Error);
    }

    /// Counts one configuration reload.
    pub fn reload(&self, success: bool) {
        self.reloads[usize::from(!success)].fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long one store call took.
    pub fn store_latency(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.latency_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.latency_sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.latency_count.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the store's size gauge.
    pub fn set_store_cells(&self, cells: usize) {
        self.store_cells.store(cells as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        header(&mut out, "floodgate_decisions_total", "counter", "Request descriptors decided, by domain and result (shadow_over_limit: over a shadow-mode limit, answered OK).");
        let mut domains: Vec<(Arc<str>, Arc<DomainCounters>)> = self
            .domains
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        domains.sort_by(|a, b| a.0.cmp(&b.0));
        domains.push((Arc::from(""), self.unknown_domain.clone()));
        for (name, c) in &domains {
            for (o, label) in OUTCOMES {
                let _ = writeln!(
                    out,
                    "floodgate_decisions_total{{domain=\"{}\",result=\"{label}\"}} {}",
                    escape(name),
                    get(&c.0[o as usize])
                );
            }
        }
        header(
            &mut out,
            "floodgate_requests_total",
            "counter",
            "ShouldRateLimit calls, by answer.",
        );
        for (i, label) in ["ok", "over_limit", "error"].iter().enumerate() {
            let _ = writeln!(
                out,
                "floodgate_requests_total{{result=\"{label}\"}} {}",
                get(&self.requests[i])
            );
        }
        header(
            &mut out,
            "floodgate_errors_total",
            "counter",
            "Calls answered with a gRPC error, by cause.",
        );
        for (k, label) in ERROR_KINDS {
            let _ = writeln!(
                out,
                "floodgate_errors_total{{kind=\"{label}\"}} {}",
                get(&self.errors[k as usize])
            );
        }
        header(
            &mut out,
            "floodgate_config_reloads_total",
            "counter",
            "Configuration changes seen, by result (a failure keeps the previous configuration).",
        );
        for (i, label) in ["success", "failure"].iter().enumerate() {
            let _ = writeln!(
                out,
                "floodgate_config_reloads_total{{result=\"{label}\"}} {}",
                get(&self.reloads[i])
            );
        }
        header(
            &mut out,
            "floodgate_store_latency_seconds",
            "histogram",
            "Time the store took to decide one request.",
        );
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += get(&self.latency_buckets[i]);
            let _ = writeln!(out, "floodgate_store_latency_seconds_bucket{{store=\"{}\",le=\"{bound}\"}} {cumulative}", self.store);
        }
        cumulative += get(&self.latency_buckets[BUCKETS.len()]);
        let _ = writeln!(
            out,
            "floodgate_store_latency_seconds_bucket{{store=\"{}\",le=\"+Inf\"}} {cumulative}",
            self.store
        );
        let sum = get(&self.latency_sum_ns) as f64 / 1e9;
        let _ = writeln!(
            out,
            "floodgate_store_latency_seconds_sum{{store=\"{}\"}} {sum}",
            self.store
        );
        let _ = writeln!(
            out,
            "floodgate_store_latency_seconds_count{{store=\"{}\"}} {}",
            self.store,
            get(&self.latency_count)
        );
        header(
            &mut out,
            "floodgate_store_cells",
            "gauge",
            "Cells the store holds (memory store: one per counter plus one per sliding log entry).",
        );
        let _ = writeln!(
            out,
            "floodgate_store_cells{{store=\"{}\"}} {}",
            self.store,
            get(&self.store_cells)
        );
        header(
            &mut out,
            "floodgate_store_up",
            "gauge",
            "1 while the store answers, 0 while it is unreachable (calls then answer UNAVAILABLE).",
        );
        let _ = writeln!(
            out,
            "floodgate_store_up{{store=\"{}\"}} {}",
            self.store,
            u8::from(self.health.is_up())
        );
        self.connections.render(&mut out);
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Escapes a label value per the exposition format.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::new("memory");
        let web: Arc<str> = Arc::from("we\"b");
        m.domain(&web).record(Outcome::Ok);
        m.domain(&web).record(Outcome::ShadowOverLimit);
        m.unknown_domain().record(Outcome::NoLimit);
        m.store_latency(Duration::from_micros(30));
        m.store_latency(Duration::from_secs(2));
        m.reload(false);
        let text = m.render();
        assert!(text.contains("floodgate_decisions_total{domain=\"we\\\"b\",result=\"ok\"} 1"));
        assert!(text.contains(
            "floodgate_decisions_total{domain=\"we\\\"b\",result=\"shadow_over_limit\"} 1"
        ));
        assert!(text.contains("floodgate_decisions_total{domain=\"\",result=\"no_limit\"} 1"));
        assert!(text
            .contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"0.00005\"} 1"));
        assert!(
            text.contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"1\"} 1")
        );
        assert!(
            text.contains("floodgate_store_latency_seconds_bucket{store=\"memory\",le=\"+Inf\"} 2")
        );
        assert!(text.contains("floodgate_store_latency_seconds_count{store=\"memory\"} 2"));
        assert!(text.contains("floodgate_config_reloads_total{result=\"failure\"} 1"));
        assert!(text.contains("floodgate_store_up{store=\"memory\"} 1"));
    }

    #[test]
    fn store_up_follows_health() {
        let health = Arc::new(Health::default());
        let m = Metrics::with_health("redis", health.clone());
        m.error(ErrorKind::StoreOverloaded);
        assert!(health.set_down("connection refused"));
        let text = m.render();
        assert!(text.contains("floodgate_store_up{store=\"redis\"} 0"));
        assert!(text.contains("floodgate_errors_total{kind=\"store_overloaded\"} 1"));
        assert!(health.set_up());
        assert!(m.render().contains("floodgate_store_up{store=\"redis\"} 1"));
    }
}
