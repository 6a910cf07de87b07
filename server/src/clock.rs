//! Where the memory store gets its time. Injected, so tests drive a fake clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of "now" in nanoseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time in ns since the Unix epoch.
    fn now_ns(&self) -> u64;
}

/// Wall-clock time read once at start, then advanced by the monotonic clock, so windows
/// align with the epoch (like Redis's `TIME`) and time never jumps backwards within a run.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    epoch_ns_at_start: u64,
    start: Instant,
}

impl SystemClock {
    /// Anchors the clock to the current wall-clock time.
    pub fn new() -> SystemClock {
        let epoch_ns_at_start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        SystemClock {
            epoch_ns_at_start,
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.epoch_ns_at_start.saturating_add(elapsed)
    }
}

/// A clock that moves only when told to: for tests and benchmarks of the decision logic.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock standing at `now_ns`.
    pub fn new(now_ns: u64) -> ManualClock {
        ManualClock(AtomicU64::new(now_ns))
    }

    /// Moves the clock forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::SeqCst);
    }

    /// Sets the clock to `now_ns`.
    pub fn set(&self, now_ns: u64) {
        self.0.store(now_ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}
