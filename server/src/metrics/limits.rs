//! `floodgate_limit_decisions_total{domain, limit, result}`: decisions per configured
//! limit, for limits whose descriptor sets `detailed_metric` or `value_to_metric`. The
//! family is only exported while at least one such limit is configured.
//!
//! The `limit` label is the limit's configured path (`tenant_acme.path_/api*`), never a
//! value a client sent: the reference names these stats after the request's own values,
//! which lets clients create series without bound. Series are created when a configuration
//! naming the limit is loaded (or at its first decision), and at most [`MAX_LIMITS`] limits get one (configurations reloaded many times
//! cannot grow the exposition without bound either); a limit beyond is only counted per
//! domain.

use super::outcome::{Outcome, OUTCOMES};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The most limits with their own series, over the server's lifetime.
pub const MAX_LIMITS: usize = 10_000;

/// `floodgate_limit_decisions_total`'s label set: domain, limit, result.
pub(super) type LimitLabels = [(&'static str, String); 3];

/// The family, shared by every domain, and how many limits have series in it.
#[derive(Debug, Default)]
pub(super) struct LimitFamily {
    pub(super) family: Family<LimitLabels, Counter>,
    limits: AtomicUsize,
}

/// One domain's per-limit series, by configured path.
#[derive(Debug)]
pub(super) struct DomainLimits {
    domain: String,
    family: Arc<LimitFamily>,
    series: RwLock<HashMap<Arc<str>, Arc<[Counter; 4]>>>,
}

impl DomainLimits {
    pub(super) fn new(family: Arc<LimitFamily>, domain: &str) -> Self {
        DomainLimits {
            domain: domain.to_owned(),
            family,
            series: RwLock::default(),
        }
    }

    /// Counts one decision of the limit at `path`.
    pub(super) fn record(&self, path: &Arc<str>, outcome: Outcome) {
        let known = self
            .series
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .cloned();
        let counters = match known {
            Some(c) => c,
            None => match self.create(path) {
                Some(c) => c,
                None => return,
            },
        };
        counters[outcome as usize].inc();
    }

    /// Creates the series of `path` before its first decision (within the bound).
    pub(super) fn register(&self, path: &Arc<str>) {
        let _ = self.create(path);
    }

    fn create(&self, path: &Arc<str>) -> Option<Arc<[Counter; 4]>> {
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get(path) {
            return Some(c.clone());
        }
        let taken = self.family.limits.fetch_add(1, Ordering::Relaxed);
        if taken >= MAX_LIMITS {
            self.family.limits.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let counters = Arc::new(OUTCOMES.map(|(_, result)| {
            self.family.family.get_or_create_owned(&[
                ("domain", self.domain.clone()),
                ("limit", path.to_string()),
                ("result", result.to_owned()),
            ])
        }));
        map.insert(path.clone(), counters.clone());
        Some(counters)
    }
}
