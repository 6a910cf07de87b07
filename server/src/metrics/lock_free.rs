//! The two metrics prometheus-client has no lock-free form of, as its own metric types:
//! the store latency histogram (the library's `Histogram` takes a mutex per observation)
//! and the store-up gauge (read from [`Health`] when scraped, never written).

use crate::store::health::Health;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Upper bounds of the store latency buckets, in seconds.
pub const BUCKETS: [f64; 16] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The `store` label every store metric carries.
type StoreLabel = [(&'static str, &'static str); 1];

/// A histogram of store call durations: one atomic bucket per bound plus overflow, an
/// atomic sum in nanoseconds and a count. Observing is three atomic increments.
#[derive(Debug)]
pub struct LatencyHistogram {
    labels: StoreLabel,
    buckets: Arc<[AtomicU64; BUCKETS.len() + 1]>,
    sum_ns: Arc<AtomicU64>,
    count: Arc<AtomicU64>,
}

impl LatencyHistogram {
    /// An empty histogram for the store named `store`.
    pub fn new(store: &'static str) -> Self {
        LatencyHistogram {
            labels: [("store", store)],
            buckets: Arc::default(),
            sum_ns: Arc::default(),
            count: Arc::default(),
        }
    }

    /// A second handle on the same counts (one goes to the registry).
    pub fn handle(&self) -> Self {
        LatencyHistogram {
            labels: self.labels,
            buckets: self.buckets.clone(),
            sum_ns: self.sum_ns.clone(),
            count: self.count.clone(),
        }
    }

    /// Records one call that took `took`.
    pub fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Per-bucket counts (the encoder makes them cumulative), overflow as +Inf.
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.buckets.iter().map(get))
            .collect();
        let sum = get(&self.sum_ns) as f64 / 1e9;
        encoder
            .encode_family(&self.labels)?
            .encode_histogram::<NoLabelSet>(sum, get(&self.count), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// `floodgate_store_up`: 1 while [`Health`] says the store answers, else 0.
#[derive(Debug)]
pub struct StoreUp {
    labels: StoreLabel,
    health: Arc<Health>,
}

impl StoreUp {
    /// The gauge of the store named `store`, following `health`.
    pub fn new(store: &'static str, health: Arc<Health>) -> Self {
        StoreUp {
            labels: [("store", store)],
            health,
        }
    }
}

impl EncodeMetric for StoreUp {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder
            .encode_family(&self.labels)?
            .encode_gauge(&i64::from(self.health.is_up()))
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}
