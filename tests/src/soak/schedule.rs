//! When the soak's faults happen, as a pure function of its length.
//!
//! The issue asks for a Redis restart every 2 minutes, one floodgate-server restart and
//! one listener update. A 600 s soak gets Redis restarts at 120, 240, 360 and 480 s, the
//! server restart at 50 % of the run and the listener update at 75 %. A run too short
//! for one 2-minute period (e.g. `SOAK_SECONDS=90`) still gets one Redis restart, at
//! 25 %, so every fault is exercised at least once whatever the length.

use std::time::Duration;

/// How long Redis stays down at each restart.
pub const REDIS_DOWN: Duration = Duration::from_secs(5);
/// How long floodgate-server stays down at its restart.
pub const SERVER_DOWN: Duration = Duration::from_secs(3);
/// The period of Redis restarts the issue asks for.
const REDIS_PERIOD: Duration = Duration::from_secs(120);

/// A fault or change the driver carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Kill Redis (SIGKILL, its data is lost), keep it down, start it again.
    RestartRedis,
    /// Kill floodgate-server, keep it down, start it again on the same address.
    RestartServer,
    /// Replace the listener (new plugin configuration) through the LDS file.
    ChangeConfig,
}

/// The whole plan of one soak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Load before the first RSS sample (connections, V8's compiled code, caches).
    pub warm_up: Duration,
    /// Each event with its time from the start of the load, in time order.
    pub events: Vec<(Duration, Event)>,
    /// When the load stops and the final checks begin.
    pub end: Duration,
}

impl Schedule {
    /// The plan for a soak of `total` (at least 60 s: shorter runs cannot fit each fault
    /// between a warm-up and a quiet tail).
    pub fn new(total: Duration) -> Result<Schedule, String> {
        if total < Duration::from_secs(60) {
            return Err(format!(
                "SOAK_SECONDS must be at least 60, got {}",
                total.as_secs()
            ));
        }
        let warm_up = (total / 10).clamp(Duration::from_secs(5), Duration::from_secs(20));
        // Every fault must be over (and healed) well before the end: a calm stretch
        // after the last one is what the final exact check runs after.
        let tail = (total / 10).max(Duration::from_secs(15));
        let last_start = total.saturating_sub(tail + REDIS_DOWN);
        let mut events: Vec<(Duration, Event)> = (1..)
            .map(|k| REDIS_PERIOD * k)
            .take_while(|t| *t <= last_start)
            .map(|t| (t, Event::RestartRedis))
            .collect();
        if events.is_empty() {
            events.push((total / 4, Event::RestartRedis));
        }
        events.push((total / 2, Event::RestartServer));
        events.push((total * 3 / 4, Event::ChangeConfig));
        events.sort_by_key(|(t, _)| *t);
        Ok(Schedule {
            warm_up,
            events,
            end: total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn ten_minutes_restart_redis_every_two_minutes() {
        let s = Schedule::new(secs(600)).expect("valid");
        assert_eq!(s.warm_up, secs(20));
        assert_eq!(
            s.events,
            vec![
                (secs(120), Event::RestartRedis),
                (secs(240), Event::RestartRedis),
                (secs(300), Event::RestartServer),
                (secs(360), Event::RestartRedis),
                (secs(450), Event::ChangeConfig),
                (secs(480), Event::RestartRedis),
            ]
        );
    }

    #[test]
    fn a_short_run_still_has_every_fault_once() {
        let s = Schedule::new(secs(90)).expect("valid");
        assert_eq!(s.warm_up, secs(9));
        assert_eq!(
            s.events,
            vec![
                (Duration::from_millis(22_500), Event::RestartRedis),
                (secs(45), Event::RestartServer),
                (Duration::from_millis(67_500), Event::ChangeConfig),
            ]
        );
    }

    #[test]
    fn two_and_a_half_minutes_keep_the_two_minute_restart() {
        let s = Schedule::new(secs(150)).expect("valid");
        let redis: Vec<_> = s
            .events
            .iter()
            .filter(|(_, e)| *e == Event::RestartRedis)
            .collect();
        assert_eq!(redis, vec![&(secs(120), Event::RestartRedis)]);
    }

    #[test]
    fn under_a_minute_is_refused() {
        assert_eq!(
            Schedule::new(secs(59)),
            Err("SOAK_SECONDS must be at least 60, got 59".to_string())
        );
    }
}
