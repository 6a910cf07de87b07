//! Deadlines in Redis's clock, so that a script Redis runs after its caller gave up does
//! nothing.
//!
//! Why: a call answered UNAVAILABLE after `--redis-timeout-ms` is still queued in Redis
//! (frozen, overloaded, or slow to read its socket). Without a deadline Redis runs it once it
//! gets to it and consumes hits nobody was told were admitted: after a freeze, Redis counted
//! more than the OK answers. So each call carries a "not after" instant, and the script
//! compares it with `TIME` and changes nothing past it.
//!
//! The two clocks differ (another host, NTP steps), so the deadline is expressed in Redis's
//! own clock: the store estimates `offset = redis_time - local_time` from the times Redis
//! already reports: every script answer carries the instant it decided at, and the health
//! probe reads `TIME` every 250 ms. Redis read its clock somewhere between the call leaving
//! and its answer arriving, so `redis_time - received_at` is a **lower bound** of the
//! offset, wrong by that answer's return trip; the largest bound of the last two seconds is
//! used (the tightest: an answer that waited behind others gives a loose one). A deadline
//! computed from it therefore falls at or before the moment the caller gives up: Redis
//! never applies a script it ran after the caller gave up, and a script run within a return
//! trip of the deadline may be refused although its answer would have arrived in time (it
//! is then answered UNAVAILABLE, as a timeout). The local side uses a monotonic clock, so a
//! step of the server's wall clock changes nothing; a step of Redis's clock is followed
//! within the two-second window (forwards at once).
//!
//! What stays inexact (documented in `docs/server/stores.md`): a script Redis ran *before* its deadline
//! whose answer was then delayed past the timeout (Redis frozen between running it and
//! writing the answer, or a lost reply) was applied though answered UNAVAILABLE: at most
//! the calls in flight at that instant (`--redis-max-in-flight`).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// No estimate yet.
const UNKNOWN: i64 = i64::MIN;

/// How long the tightest bound is kept before the estimate restarts (µs).
pub const WINDOW_US: i64 = 2_000_000;

/// The store's view of Redis's clock. See the module documentation.
#[derive(Debug)]
pub struct RedisClock {
    origin: Instant,
    /// The best (largest) lower bound of the offset seen in the current window.
    offset_us: AtomicI64,
    /// When (local µs) the window of `offset_us` began.
    window_start_us: AtomicI64,
}

impl Default for RedisClock {
    fn default() -> Self {
        RedisClock {
            origin: Instant::now(),
            offset_us: AtomicI64::new(UNKNOWN),
            window_start_us: AtomicI64::new(0),
        }
    }
}

impl RedisClock {
    /// Microseconds on the local monotonic clock.
    pub fn local_us(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    /// Records that Redis's clock read `redis_us` in an answer received at `received_us`.
    ///
    /// Every observation is a lower bound of the offset, so the largest is the tightest;
    /// it is kept for [`WINDOW_US`], then the window restarts from the next observation, so
    /// that a step back of Redis's clock is followed within that time. (Concurrent
    /// observers may race here; any value either stores is still a lower bound.)
    pub fn observe(&self, redis_us: i64, received_us: i64) {
        let bound = offset_lower_bound(redis_us, received_us);
        let start = self.window_start_us.load(Ordering::Relaxed);
        if received_us.saturating_sub(start) > WINDOW_US {
            self.window_start_us.store(received_us, Ordering::Relaxed);
            self.offset_us.store(bound, Ordering::Relaxed);
        } else {
            self.offset_us.fetch_max(bound, Ordering::Relaxed);
        }
    }

    /// Drops the estimate (a new master: another host, another clock); calls carry no
    /// deadline until the next answer or probe tells the new offset.
    pub fn forget(&self) {
        self.offset_us.store(UNKNOWN, Ordering::Relaxed);
        self.window_start_us.store(0, Ordering::Relaxed);
    }

    /// The Redis time after which a call started at `started_us` must do nothing, or
    /// `None` before the first observation.
    pub fn not_after(&self, started_us: i64, timeout: Duration) -> Option<i64> {
        let offset = self.offset_us.load(Ordering::Relaxed);
        (offset != UNKNOWN).then(|| not_after(offset, started_us, timeout))
    }
}

/// `redis_us - received_us`: Redis read its clock no later than the answer arrived.
pub fn offset_lower_bound(redis_us: i64, received_us: i64) -> i64 {
    redis_us.saturating_sub(received_us)
}

/// The caller's own deadline, `started_us + timeout`, in Redis's clock.
pub fn not_after(offset_us: i64, started_us: i64, timeout: Duration) -> i64 {
    let timeout_us = i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
    started_us
        .saturating_add(timeout_us)
        .saturating_add(offset_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the skew and the probe's trip times, the deadline in Redis's clock is
        /// never later than the caller's, and early by at most the probe's return trip.
        #[test]
        fn the_deadline_never_outlives_the_caller(
            skew in -1_000_000_000_000i64..1_000_000_000_000,
            sent in 0i64..1_000_000_000,
            out_trip in 0i64..1_000_000,
            back_trip in 0i64..1_000_000,
            later in 0i64..10_000_000_000,
            timeout_us in 1u64..60_000_000,
        ) {
            // Redis's clock reads local + skew; it read TIME `out_trip` after the probe left.
            let redis_us = sent + out_trip + skew;
            let received = sent + out_trip + back_trip;
            let offset = offset_lower_bound(redis_us, received);
            let started = received + later;
            let timeout = Duration::from_micros(timeout_us);
            let deadline = not_after(offset, started, timeout);
            let caller_gives_up_redis_time = started + timeout_us as i64 + skew;
            prop_assert!(deadline <= caller_gives_up_redis_time);
            prop_assert!(deadline >= caller_gives_up_redis_time - back_trip);
        }
    }

    #[test]
    fn the_tightest_bound_wins_until_the_window_ends() {
        let clock = RedisClock::default();
        let t = Duration::ZERO;
        clock.observe(1_000, 10); // offset >= 990
        clock.observe(1_500, 200); // offset >= 1_300: tighter
        clock.observe(1_600, 550); // offset >= 1_050: looser, ignored
        assert_eq!(clock.not_after(0, t), Some(1_300));
        // After the window, a step back of Redis's clock is believed.
        clock.observe(5_000, 200 + WINDOW_US + 1);
        assert_eq!(clock.not_after(0, t), Some(5_000 - 200 - WINDOW_US - 1));
    }

    #[test]
    fn no_deadline_before_the_first_observation() {
        let clock = RedisClock::default();
        assert_eq!(clock.not_after(5, Duration::from_millis(100)), None);
        clock.observe(1_700_000_000_000_000, 1_000);
        assert_eq!(
            clock.not_after(2_000, Duration::from_millis(100)),
            Some(1_700_000_000_000_000 + 1_000 + 100_000)
        );
    }
}
