//! Reading Envoy's and floodgate-server's counters at a fence.
//!
//! The filter flushes its counters once a second, so at a fence (no request in flight)
//! the soak polls `/stats` until Envoy's `allowed + denied` equals the limited requests
//! the client got an answer for: a readiness check on the flush, not a sleep. The
//! server's counters restart from zero with the process; [`ServerTotals`] carries them
//! over its restart so that every delta stays a difference of running totals.

use super::oracle::{EnvoyCounts, ServerCounts};
use crate::{Envoy, Server};
use std::time::{Duration, Instant};

/// Longer than a few flush periods (one second each).
const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

const RLS_ERRORS: [&str; 6] = [
    "not_sent",
    "timeout",
    "unavailable",
    "status",
    "unknown_code",
    "bad_response",
];

/// Envoy's floodgate counters now.
pub async fn envoy(envoy: &Envoy) -> EnvoyCounts {
    let stats = envoy.stats().await;
    let stat = |name: &str| {
        stats
            .get(&format!("wasmcustom.floodgate.{name}"))
            .copied()
            .unwrap_or(0)
    };
    EnvoyCounts {
        allowed: stat("allowed"),
        denied: stat("denied"),
        failure_allowed: stat("failure_mode_allowed"),
        failure_denied: stat("failure_mode_denied"),
        rls_errors: RLS_ERRORS
            .iter()
            .map(|cause| stat(&format!("rls.error.{cause}")))
            .sum(),
        rls_unavailable: stat("rls.error.unavailable"),
        evictions: stat("bucket_evictions"),
    }
}

/// Polls Envoy until `allowed + denied` reaches `decided` (the flush caught up). Returns
/// the counters and whether they caught up within the timeout.
pub async fn envoy_synced(envoy_: &Envoy, decided: u64) -> (EnvoyCounts, bool) {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    loop {
        let counts = envoy(envoy_).await;
        let counted = counts.allowed + counts.denied;
        if counted == decided {
            return (counts, true);
        }
        if counted > decided || Instant::now() > deadline {
            return (counts, false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `later - earlier`, counter by counter.
pub fn envoy_delta(later: &EnvoyCounts, earlier: &EnvoyCounts) -> EnvoyCounts {
    EnvoyCounts {
        allowed: later.allowed.saturating_sub(earlier.allowed),
        denied: later.denied.saturating_sub(earlier.denied),
        failure_allowed: later
            .failure_allowed
            .saturating_sub(earlier.failure_allowed),
        failure_denied: later.failure_denied.saturating_sub(earlier.failure_denied),
        rls_errors: later.rls_errors.saturating_sub(earlier.rls_errors),
        rls_unavailable: later
            .rls_unavailable
            .saturating_sub(earlier.rls_unavailable),
        evictions: later.evictions.saturating_sub(earlier.evictions),
    }
}

/// floodgate-server's error counters as running totals over all its processes.
#[derive(Default)]
pub struct ServerTotals {
    /// What the processes before the current one had counted.
    carried: ServerCounts,
    /// The last reading of the current process.
    last: ServerCounts,
}

impl ServerTotals {
    /// Reads the current process and returns the running totals.
    pub async fn read(&mut self, server: &Server) -> ServerCounts {
        let metric = |text: &str, kind: &str| -> u64 {
            let series = format!("floodgate_errors_total{{kind=\"{kind}\"}}");
            text.lines()
                .find_map(|l| l.strip_prefix(&series)?.trim().parse::<f64>().ok())
                .map_or(0, |v| v as u64)
        };
        let text = server.metrics().await;
        self.last = ServerCounts {
            store_unavailable: metric(&text, "store_unavailable"),
            store_overloaded: metric(&text, "store_overloaded"),
        };
        self.total()
    }

    /// The process is about to be replaced: keep what it counted (read last).
    pub fn carry_over(&mut self) {
        self.carried = self.total();
        self.last = ServerCounts::default();
    }

    fn total(&self) -> ServerCounts {
        ServerCounts {
            store_unavailable: self.carried.store_unavailable + self.last.store_unavailable,
            store_overloaded: self.carried.store_overloaded + self.last.store_overloaded,
        }
    }
}

/// `later - earlier`, counter by counter.
pub fn server_delta(later: &ServerCounts, earlier: &ServerCounts) -> ServerCounts {
    ServerCounts {
        store_unavailable: later
            .store_unavailable
            .saturating_sub(earlier.store_unavailable),
        store_overloaded: later
            .store_overloaded
            .saturating_sub(earlier.store_overloaded),
    }
}

/// Resident memory of process `pid` in KiB (`VmRSS` in /proc), `None` if it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
