//! The reference service's own per-limit series, beside ours, so that a dashboard or an
//! alert written for envoyproxy/ratelimit keeps working after the swap (with
//! `--reference-stats`, or the reference's `USE_PROMETHEUS=true`).
//!
//! The names and labels are the reference's Prometheus sink's: its statsd names
//! `ratelimit.service.rate_limit.<domain>.<key>.<stat>` (`src/stats/manager_impl.go`,
//! `NewStats`: `total_hits`, `over_limit`, `near_limit`, `within_limit`, `shadow_mode`)
//! mapped by its default mapping (`src/stats/prom/default_mapper.yaml`) to
//! `ratelimit_service_rate_limit_<stat>` with the labels `domain`, `key1` (the key's first
//! component) and, for a key of two or more, `key2` (its second). As there, each counts
//! hits (`hits_addend`), not requests: every hit of a decided descriptor in
//! `total_hits`, and in `within_limit` or `over_limit`; an admitted one above
//! `--near-limit-ratio` also in `near_limit`; an over one in shadow mode also in
//! `shadow_mode`. (The reference splits a request that crosses the limit between
//! `near_limit` and `over_limit` hit by hit; here a request's hits go to one side.)
//!
//! The series come from the configuration only (one per configured limit, at most
//! [`MAX_SERIES`]), never from request values.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The most limits that get the reference's series; beyond, a limit is not counted there.
pub const MAX_SERIES: usize = 10_000;

/// The stats, in the order of the reference's `NewStats`.
const STATS: [&str; 5] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
];

/// How one descriptor was decided, as the reference's stats see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Its hits (`hits_addend`, at least 1).
    pub hits: u64,
    /// Admitted.
    pub within: bool,
    /// Admitted above the near-limit ratio.
    pub near: bool,
    /// The limit is in shadow mode.
    pub shadow: bool,
}

/// One limit's counters, indexed like [`STATS`].
type Counters = Arc<[AtomicU64; 5]>;

/// A limit: its domain and its stat key.
type Series = (Arc<str>, Arc<str>);

/// The reference's per-limit counters, by (domain, stat key).
#[derive(Debug, Default)]
pub struct ReferenceStats {
    series: RwLock<HashMap<Series, Counters>>,
}

impl ReferenceStats {
    /// Counts one decided descriptor of the limit `key` in `domain`.
    pub fn record(&self, domain: &str, key: &Arc<str>, hit: Hit) {
        let counters = self.counters(domain, key);
        let Some(c) = counters else {
            return;
        };
        let add = |i: usize| {
            c[i].fetch_add(hit.hits, Ordering::Relaxed);
        };
        add(0);
        if hit.within {
            add(3);
            if hit.near {
                add(2);
            }
        } else {
            add(1);
            if hit.shadow {
                add(4);
            }
        }
    }

    fn counters(&self, domain: &str, key: &Arc<str>) -> Option<Counters> {
        let lookup = (Arc::<str>::from(domain), key.clone());
        if let Ok(map) = self.series.read() {
            if let Some(c) = map.get(&lookup) {
                return Some(c.clone());
            }
        }
        let mut map = self.series.write().ok()?;
        if map.len() >= MAX_SERIES && !map.contains_key(&lookup) {
            return None;
        }
        Some(map.entry(lookup).or_default().clone())
    }

    /// The series in the Prometheus text format, each stat one counter family (typed
    /// `unknown` under OpenMetrics, whose counters would need a `_total` the reference's
    /// names do not have).
    pub fn render(&self, out: &mut String, open_metrics: bool) {
        let kind = if open_metrics { "unknown" } else { "counter" };
        let Ok(map) = self.series.read() else {
            return;
        };
        let mut rows: Vec<(&Series, &Counters)> = map.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (i, stat) in STATS.iter().enumerate() {
            let name = format!("ratelimit_service_rate_limit_{stat}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for ((domain, key), c) in &rows {
                let mut parts = key.split('.');
                let _ = write!(out, "{name}{{domain=\"{}\"", escape(domain));
                if let Some(k1) = parts.next() {
                    let _ = write!(out, ",key1=\"{}\"", escape(k1));
                }
                if let Some(k2) = parts.next() {
                    let _ = write!(out, ",key2=\"{}\"", escape(k2));
                }
                let _ = writeln!(out, "}} {}", c[i].load(Ordering::Relaxed));
            }
        }
    }
}

impl ReferenceStats {
    /// Every counter under the reference's statsd name
    /// (`ratelimit.service.rate_limit.<domain>.<key>.<stat>`) with its value now.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let Ok(map) = self.series.read() else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(map.len() * STATS.len());
        for ((domain, key), c) in map.iter() {
            for (i, stat) in STATS.iter().enumerate() {
                out.push((
                    format!("ratelimit.service.rate_limit.{domain}.{key}.{stat}"),
                    c[i].load(Ordering::Relaxed),
                ));
            }
        }
        out
    }
}

/// A label value as the text format writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_the_references() {
        let s = ReferenceStats::default();
        let one: Arc<str> = Arc::from("user");
        let two: Arc<str> = Arc::from("tenant_acme.path_/api\"x");
        let hit = |hits, within, near, shadow| Hit {
            hits,
            within,
            near,
            shadow,
        };
        s.record("web", &one, hit(1, true, false, false));
        s.record("web", &one, hit(2, true, true, false));
        s.record("web", &one, hit(3, false, false, false));
        s.record("web", &two, hit(1, false, false, true));
        let mut out = String::new();
        s.render(&mut out, false);
        for line in [
            "# TYPE ratelimit_service_rate_limit_total_hits counter",
            "ratelimit_service_rate_limit_total_hits{domain=\"web\",key1=\"user\"} 6",
            "ratelimit_service_rate_limit_within_limit{domain=\"web\",key1=\"user\"} 3",
            "ratelimit_service_rate_limit_near_limit{domain=\"web\",key1=\"user\"} 2",
            "ratelimit_service_rate_limit_over_limit{domain=\"web\",key1=\"user\"} 3",
            "ratelimit_service_rate_limit_shadow_mode{domain=\"web\",key1=\"user\"} 0",
            "ratelimit_service_rate_limit_over_limit{domain=\"web\",key1=\"tenant_acme\",key2=\"path_/api\\\"x\"} 1",
            "ratelimit_service_rate_limit_shadow_mode{domain=\"web\",key1=\"tenant_acme\",key2=\"path_/api\\\"x\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing in\n{out}");
        }
    }
}
