//! Outage handling: what a failed call means for the store's health, the breaker that
//! marks it down after [`FAILURES_TO_DOWN`] failures that say Redis cannot decide, the
//! throttle that keeps an outage to one log line per [`LOG_EVERY`], and the probe, which
//! runs the decision script itself (so a Redis that answers but refuses our commands is
//! down too), and brings the store back up.

use super::conn::Conn;
use super::failure::Failure;
use super::script::{CallTimes, Mode};
use super::Inner;
use crate::store::health::Health;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// How often the store probes Redis.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

/// At most one failure log line per this interval while Redis fails.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Consecutive failures that say Redis cannot decide (every cause but [`Failure::Reply`])
/// that mark the store down.
const FAILURES_TO_DOWN: u32 = 3;

/// The store's health breaker and its log throttle, fed by every call and probe.
pub(super) struct Outage {
    /// Up or down, shared with `/healthz` and `floodgate_store_up`.
    pub(super) health: Arc<Health>,
    consecutive_failures: AtomicU32,
    log: Mutex<LogState>,
    failed_since_log: AtomicU64,
}

struct LogState {
    last: Option<Instant>,
    down_since: Option<Instant>,
}

impl Outage {
    /// A breaker reporting to `health`, with no failures yet.
    pub(super) fn new(health: Arc<Health>) -> Self {
        Outage {
            health,
            consecutive_failures: AtomicU32::new(0),
            log: Mutex::new(LogState {
                last: None,
                down_since: None,
            }),
            failed_since_log: AtomicU64::new(0),
        }
    }

    /// Counts a call refused because the store is known down (logged, throttled).
    pub(super) fn refused_while_down(&self) {
        self.failed_since_log.fetch_add(1, Ordering::Relaxed);
        self.log_throttled(&self.health.reason());
    }

    /// Records a success; the first after an outage marks the store up and says so.
    pub(super) fn succeeded(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        if self.health.set_up() {
            let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
            let down_for = log.down_since.take().map(|t| t.elapsed());
            let failed = self.failed_since_log.swap(0, Ordering::Relaxed);
            log.last = None;
            tracing::info!(?down_for, failed_calls = failed, "Redis can decide again");
        }
    }

    /// Records a failure, counted by cause; `probe` failures mark the store down at once.
    pub(super) fn failed(&self, f: &Failure, probe: bool) {
        if !probe {
            self.failed_since_log.fetch_add(1, Ordering::Relaxed);
        }
        let cause = f.cause();
        self.health.failed(cause);
        let down = match f {
            Failure::Reply(_) if !probe => false,
            _ => {
                let n = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
                (probe || n >= FAILURES_TO_DOWN) && self.health.set_down(cause, f.message())
            }
        };
        if down {
            let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.down_since = Some(Instant::now());
            log.last = Some(Instant::now());
            tracing::warn!(
                cause = cause.label(),
                error = f.message(),
                "Redis cannot decide: answering UNAVAILABLE until it can"
            );
        } else {
            self.log_throttled(f.message());
        }
    }

    /// At most one line per [`LOG_EVERY`], saying how many calls failed since the last.
    fn log_throttled(&self, error: &str) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        log.last = Some(Instant::now());
        let failed = self.failed_since_log.swap(0, Ordering::Relaxed);
        if failed == 0 {
            return;
        }
        tracing::warn!(
            failed_calls = failed,
            error,
            up = self.health.is_up(),
            "Redis calls failing"
        );
    }
}

impl Inner {
    /// One probe, within the timeout: connects if needed, `PING`s (`TIME` on a single
    /// Redis), then runs the decision script on no counters, which proves what a decision
    /// needs: credentials and permissions (`EVALSHA`, `SCRIPT LOAD`, `TIME`), scripting, a
    /// script that runs, and a Redis accepting writes (Redis refuses a script that may
    /// write while out of memory or unable to persist, before running it).
    pub(super) async fn probe(&self) {
        let t = self.options.timeout;
        // Sentinel: find the master first, within its own timeout (asking the sentinels
        // and connecting to a new master are two round trips more than the probe's own).
        match tokio::time::timeout(t * 3, self.conn.follow(&self.redis_clock)).await {
            Ok(Ok(())) => {}
            Ok(Err(f)) => return self.outage.failed(&f, true),
            Err(_) => {
                return self.outage.failed(
                    &Failure::Connectivity(format!("no master found within {:?}", t * 3)),
                    true,
                )
            }
        }
        let probe = async {
            self.conn.ping(&self.redis_clock).await?;
            self.run_empty_decision().await
        };
        match tokio::time::timeout(t, probe).await {
            Ok(Ok(())) => self.outage.succeeded(),
            Ok(Err(f)) => self.outage.failed(&f, true),
            Err(_) => self.outage.failed(
                &Failure::Timeout(format!("no answer to the probe within {t:?}")),
                true,
            ),
        }
    }

    /// The decision script on no counters (`peek`: it reads the clock and writes nothing);
    /// loads it first if Redis lacks it, as every call does.
    async fn run_empty_decision(&self) -> Result<(), Failure> {
        let times = CallTimes::default();
        match &self.conn {
            Conn::Single(manager) => {
                let mut conn = manager.clone();
                self.call(&mut conn, &[], Mode::Peek, &times).await?;
            }
            Conn::Sentinel(sentinel) => {
                let mut conn = sentinel.master()?;
                self.call(&mut conn, &[], Mode::Peek, &times).await?;
            }
            Conn::Cluster { conn, .. } => {
                // No key: Redis Cluster runs it on any node.
                let mut conn = Conn::cluster(conn)?;
                self.call(&mut conn, &[], Mode::Peek, &times).await?;
            }
        }
        Ok(())
    }
}

/// Probes every [`PROBE_EVERY`] for as long as the store exists.
pub(super) async fn probe_forever(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        inner.probe().await;
    }
}
