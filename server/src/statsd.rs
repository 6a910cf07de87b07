//! The reference's statsd sink: its per-limit counters pushed over UDP as statsd counters
//! (`ratelimit.service.rate_limit.<domain>.<key>.<stat>:<increase>|c`, names from the
//! reference's `src/stats/manager_impl.go`), every flush interval, for a deployment that
//! reads them through a statsd server (the reference's `USE_STATSD`, `STATSD_HOST`,
//! `STATSD_PORT`, `STATS_FLUSH_INTERVAL`). Only what increased since the last flush is
//! sent, as statsd counters are deltas; a lost datagram loses that increase, as with any
//! statsd client.

use crate::reference_stats::ReferenceStats;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::watch;

/// The largest datagram sent: what fits an Ethernet MTU after IP and UDP headers.
const MAX_DATAGRAM: usize = 1432;

/// The lines of what increased since `sent`, which it updates.
pub fn increases(stats: &ReferenceStats, sent: &mut HashMap<String, u64>) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, value) in stats.snapshot() {
        let before = sent.get(&name).copied().unwrap_or(0);
        if value > before {
            lines.push(format!("{name}:{}|c", value - before));
        }
        sent.insert(name, value);
    }
    lines.sort();
    lines
}

/// `lines` joined by newlines into datagrams of at most [`MAX_DATAGRAM`] bytes.
pub fn datagrams(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in lines {
        if !current.is_empty() && current.len() + 1 + line.len() > MAX_DATAGRAM {
            out.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Sends the increases to `target` (`HOST:PORT`, resolved at each flush) every
/// `interval` until `stop`, and once more then.
pub async fn run(
    stats: Arc<ReferenceStats>,
    target: String,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let socket = match UdpSocket::bind("0.0.0.0:0").await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "statsd: cannot open a UDP socket; no stats are pushed");
            return;
        }
    };
    let mut sent = HashMap::new();
    let mut failing = false;
    loop {
        let stopping = tokio::select! {
            () = tokio::time::sleep(interval) => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        for datagram in datagrams(&increases(&stats, &mut sent)) {
            match socket.send_to(datagram.as_bytes(), target.as_str()).await {
                Ok(_) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(%target, error = %e, "statsd: cannot send");
                }
                Err(_) => {}
            }
        }
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference_stats::Hit;

    #[test]
    fn only_increases_are_sent_in_bounded_datagrams() {
        let stats = ReferenceStats::default();
        let key: Arc<str> = Arc::from("user");
        let hit = Hit {
            hits: 2,
            within: true,
            near: false,
            shadow: false,
        };
        stats.record("web", &key, hit);
        let mut sent = HashMap::new();
        assert_eq!(
            increases(&stats, &mut sent),
            [
                "ratelimit.service.rate_limit.web.user.total_hits:2|c",
                "ratelimit.service.rate_limit.web.user.within_limit:2|c",
            ]
        );
        assert!(increases(&stats, &mut sent).is_empty());
        stats.record("web", &key, Hit { hits: 1, ..hit });
        assert_eq!(
            increases(&stats, &mut sent),
            [
                "ratelimit.service.rate_limit.web.user.total_hits:1|c",
                "ratelimit.service.rate_limit.web.user.within_limit:1|c",
            ]
        );
        let many: Vec<String> = (0..100).map(|i| format!("{i:040}:1|c")).collect();
        let grams = datagrams(&many);
        assert!(grams.len() > 1 && grams.iter().all(|g| g.len() <= MAX_DATAGRAM));
        assert_eq!(grams.join("\n").lines().count(), 100);
    }
}
