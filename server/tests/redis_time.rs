//! The Redis store on Redis's own clock (`TIME`, no fake clock): a denial's
//! `duration_until_reset` is what a client can really wait by. For each algorithm, a
//! counter is driven over its limit with one-hit requests, then a request of two hits is
//! denied and its duration read; one hit is sent just before that duration has passed
//! (still over) and once it has (admitted): the duration is the one hit's, not the two's.
//!
//! Tolerance, and why: the test cannot see the instant Redis decided, only that it lies
//! between sending the denied call (`sent`) and its answer (`answered`). The true moment
//! one hit fits is therefore in `[sent + d, answered + d]`. A probe answered before
//! `sent + d − 1 ms` must be over (the 1 ms absorbs Redis's wall clock against our
//! monotonic one and its 1 µs resolution); a probe sent after `answered + d + 1 ms` must be
//! admitted. The early probe is sent `EARLY` before the deadline; on a machine so loaded
//! that it is not answered in time, the test fails saying so rather than passing blind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::store::health::Health;
use floodgate_server::store::redis::{RedisOptions, RedisStore, Target};
use floodgate_server::store::{Check, CounterKey, Store};
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;
use std::time::Duration;
use support::redis::RedisServer;
use tokio::time::{sleep_until, Instant};

/// How long before the deadline the early probe is sent.
const EARLY: Duration = Duration::from_millis(100);
/// Clock-rate and resolution slack between Redis's `TIME` and our monotonic clock.
const SLACK: Duration = Duration::from_millis(1);
/// Durations shorter than this leave no room for an early probe: wait and start again.
const SHORTEST: Duration = Duration::from_millis(300);

fn check(name: &str, rpu: u32, algorithm: Algorithm) -> Check {
    Check {
        key: CounterKey::new("redis-time", [("k", name)]),
        limit: Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap(),
            unit: Unit::Second,
            unit_multiplier: NonZeroU16::MIN,
            algorithm,
        },
        hits: 1,
        shadow: false,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

/// Sends `c` (one hit) until it is denied, then a request of two hits; returns that
/// denial's duration and when it was sent and answered.
async fn drive_over(store: &RedisStore, c: &Check) -> (Duration, Instant, Instant) {
    let one = std::slice::from_ref(c);
    for _ in 0..=c.limit.requests_per_unit.get() {
        if !store.check(one).await.unwrap()[0].allowed {
            let two = [Check {
                hits: 2,
                ..c.clone()
            }];
            let sent = Instant::now();
            let d = store.check(&two).await.unwrap().remove(0);
            let answered = Instant::now();
            assert!(!d.allowed, "{c:?}: two hits are over too");
            return (Duration::from_nanos(d.reset_in_ns), sent, answered);
        }
    }
    panic!("{c:?} was never denied");
}

async fn a_denial_lasts_exactly_its_duration(store: &RedisStore, c: &Check) {
    for _ in 0..3 {
        let (d, sent, answered) = drive_over(store, c).await;
        if d < SHORTEST {
            // Too close to a reset to probe before it (a fixed window near its end).
            sleep_until(answered + d + SLACK).await;
            continue;
        }
        sleep_until(sent + d - EARLY).await;
        let early = store
            .check(std::slice::from_ref(c))
            .await
            .unwrap()
            .remove(0);
        let early_answered = Instant::now();
        assert!(
            early_answered + SLACK <= sent + d,
            "{c:?}: the early probe took more than {EARLY:?}: machine overloaded, inconclusive"
        );
        assert!(!early.allowed, "{c:?}: one hit is over before {d:?}");
        sleep_until(answered + d + SLACK).await;
        let late = store
            .check(std::slice::from_ref(c))
            .await
            .unwrap()
            .remove(0);
        assert!(late.allowed, "{c:?}: one hit is admitted once {d:?} passed");
        return;
    }
    panic!("{c:?}: every denial was within {SHORTEST:?} of its reset");
}

#[tokio::test]
async fn on_redis_time_a_denial_lasts_exactly_the_reported_duration() {
    let server = RedisServer::start();
    let options = RedisOptions {
        target: Target::Single(server.url()),
        access: Default::default(),
        timeout: Duration::from_secs(2),
        max_in_flight: 16,
        counting: Default::default(),
        key_prefix: String::new(),
    };
    let store = RedisStore::connect(options, Arc::new(Health::default()))
        .await
        .unwrap();
    let burst = NonZeroU32::new(2).unwrap();
    // Durations here are whole microseconds, Redis's resolution (see the tolerance above).
    for c in [
        check("fw", 2, Algorithm::FixedWindow),
        check("tb", 2, Algorithm::TokenBucket { burst }),
        check("swl", 2, Algorithm::SlidingWindowLog),
        check("swc", 2, Algorithm::SlidingWindowCounter),
    ] {
        a_denial_lasts_exactly_its_duration(&store, &c).await;
    }
}
