//! The Redis store alone, against a real `redis-server`: what it leaves in Redis (log
//! entries, TTLs), script reloading, and how it behaves when Redis dies or freezes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::clock::ManualClock;
use floodgate_server::store::health::Health;
use floodgate_server::store::redis::key::redis_key;
use floodgate_server::store::redis::{RedisOptions, RedisStore, Target};
use floodgate_server::store::{Check, CounterKey, Store, StoreError};
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::redis::RedisServer;

const S: u64 = 1_000_000_000;
const US: u64 = 1_000;
const W: u64 = 1_700_000_000 * S;

fn limit(rpu: u32, algorithm: Algorithm) -> Limit {
    Limit {
        requests_per_unit: NonZeroU32::new(rpu).unwrap(),
        unit: Unit::Second,
        unit_multiplier: NonZeroU16::MIN,
        algorithm,
    }
}

fn check(name: &str, limit: Limit) -> Check {
    Check {
        key: CounterKey::new("t", [("k", name)]),
        limit,
        hits: 1,
        shadow: false,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

async fn store(
    server: &RedisServer,
    timeout: Duration,
    max_in_flight: usize,
) -> (RedisStore, Arc<Health>) {
    let health = Arc::new(Health::default());
    let options = RedisOptions {
        target: Target::Single(server.url()),
        access: Default::default(),
        timeout,
        max_in_flight,
        counting: Default::default(),
        key_prefix: String::new(),
    };
    (
        RedisStore::connect(options, health.clone()).await.unwrap(),
        health,
    )
}

fn log_members(server: &RedisServer, c: &Check) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(redis_key("", &c.key, &c.limit))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut server.conn())
        .unwrap()
}

#[tokio::test]
async fn the_log_keeps_one_entry_per_admitted_request_and_is_trimmed() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(W));
    let (s, _) = store(&server, Duration::from_secs(5), 16).await;
    let s = s.with_clock(clock.clone());
    let c = check("log", limit(5, Algorithm::SlidingWindowLog));
    let mut admitted = 0;
    for i in 0..8 {
        clock.set(W + i * 10 * US);
        admitted += usize::from(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    }
    assert_eq!(admitted, 5);
    let members = log_members(&server, &c);
    assert_eq!(
        members.len(),
        5,
        "one entry per admitted request: {members:?}"
    );
    // Score = time in µs; member = time:hits:cumulative.
    assert_eq!(
        members[0],
        ("1700000000000000:1:1".to_owned(), 1_700_000_000_000_000.0)
    );
    assert_eq!(members[4].0, "1700000000000040:1:5");

    // Three entries have left the window by W+1s+25µs: room for 3 hits, one entry.
    clock.set(W + S + 25 * US);
    let three = Check {
        hits: 3,
        ..c.clone()
    };
    assert!(s.check(&[three]).await.unwrap()[0].allowed);
    let members: Vec<String> = log_members(&server, &c).into_iter().map(|m| m.0).collect();
    assert_eq!(
        members,
        [
            "1700000000000030:1:4",
            "1700000000000040:1:5",
            "1700000001000025:3:8"
        ],
        "trimmed to the window"
    );
    // Hits in the same microsecond share an entry.
    assert!(!s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    clock.set(W + S + 40 * US);
    assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    let members: Vec<String> = log_members(&server, &c).into_iter().map(|m| m.0).collect();
    assert_eq!(members, ["1700000001000025:3:8", "1700000001000040:2:10"]);

    // Once the window has passed, one admission leaves one entry.
    clock.set(W + 3 * S);
    assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    assert_eq!(log_members(&server, &c).len(), 1);
}

#[tokio::test]
async fn keys_expire_as_soon_as_their_state_stops_mattering() {
    let server = RedisServer::start();
    let (s, _) = store(&server, Duration::from_secs(5), 16).await;
    let per_minute = Limit {
        unit: Unit::Minute,
        unit_multiplier: NonZeroU16::MIN,
        ..limit(10, Algorithm::FixedWindow)
    };
    let burst = NonZeroU32::new(10).unwrap();
    let cases = [
        // Until the window ends: at most a minute.
        (check("fw", per_minute), 60_000),
        // One token back at 10/s: 100 ms.
        (
            check("tb", limit(10, Algorithm::TokenBucket { burst })),
            100,
        ),
        // The entry leaves the window in a second.
        (check("swl", limit(10, Algorithm::SlidingWindowLog)), 1_000),
        // The current window slides out after the next one: at most two seconds.
        (
            check("swc", limit(10, Algorithm::SlidingWindowCounter)),
            2_000,
        ),
    ];
    for (c, most) in cases {
        assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
        let pttl: i64 = redis::cmd("PTTL")
            .arg(redis_key("", &c.key, &c.limit))
            .query(&mut server.conn())
            .unwrap();
        assert!(
            pttl > 0 && pttl <= most,
            "{:?}: PTTL {pttl} ms, want ≤ {most}",
            c.limit.algorithm
        );
    }
}

#[tokio::test]
async fn deployments_under_different_key_prefixes_count_apart() {
    let server = RedisServer::start();
    let under = |prefix: &str| RedisOptions {
        target: Target::Single(server.url()),
        access: Default::default(),
        timeout: Duration::from_secs(5),
        max_in_flight: 16,
        counting: Default::default(),
        key_prefix: prefix.to_owned(),
    };
    let health = || Arc::new(Health::default());
    let a = RedisStore::connect(under("team-a:"), health())
        .await
        .unwrap();
    let b = RedisStore::connect(under("team-b:"), health())
        .await
        .unwrap();
    let once_a_minute = Limit {
        unit: Unit::Minute,
        ..limit(1, Algorithm::FixedWindow)
    };
    let c = check("shared", once_a_minute);
    let one = std::slice::from_ref(&c);
    assert!(a.check(one).await.unwrap()[0].allowed);
    assert!(!a.check(one).await.unwrap()[0].allowed, "a's own limit");
    assert!(
        b.check(one).await.unwrap()[0].allowed,
        "b counts apart from a"
    );
    for prefix in ["team-a:", "team-b:"] {
        let exists: i64 = redis::cmd("EXISTS")
            .arg(redis_key(prefix, &c.key, &c.limit))
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(exists, 1, "{prefix}fg:v2:… in Redis");
    }
    let unprefixed: i64 = redis::cmd("EXISTS")
        .arg(redis_key("", &c.key, &c.limit))
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(unprefixed, 0);
}

#[tokio::test]
async fn the_script_is_loaded_again_after_a_flush() {
    let server = RedisServer::start();
    let (s, _) = store(&server, Duration::from_secs(5), 16).await;
    let c = check("k", limit(10, Algorithm::FixedWindow));
    assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.conn())
        .unwrap();
    let d = s.check(std::slice::from_ref(&c)).await.unwrap();
    assert_eq!(
        d[0].remaining, 8,
        "NOSCRIPT answered by loading it, state kept"
    );
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(s.script_sha())
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(exists, [true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_answers_unavailable_at_once_and_recovery_is_automatic() {
    let mut server = RedisServer::start();
    let (s, health) = store(&server, Duration::from_millis(200), 64).await;
    let c = check(
        "k",
        limit(
            1_000,
            Algorithm::TokenBucket {
                burst: NonZeroU32::new(1_000).unwrap(),
            },
        ),
    );
    assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
    assert!(health.is_up());

    server.kill();
    let started = Instant::now();
    let mut failures = 0;
    while health.is_up() {
        let e = s.check(std::slice::from_ref(&c)).await.unwrap_err();
        assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
        failures += 1;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never marked down"
        );
    }
    assert!(
        failures <= 3,
        "down after at most three failures, not {failures}"
    );
    // Down: calls fail at once, without waiting for a timeout.
    let t = Instant::now();
    for _ in 0..100 {
        let e = s.check(std::slice::from_ref(&c)).await.unwrap_err();
        assert!(
            matches!(e, StoreError::Unavailable(ref m) if m.contains("unreachable")),
            "{e:?}"
        );
    }
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "100 calls took {:?}",
        t.elapsed()
    );

    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.check(std::slice::from_ref(&c)).await.is_err() {
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(health.is_up());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_times_out_and_calls_beyond_the_cap_fail_at_once() {
    let server = RedisServer::start();
    let (s, _) = store(&server, Duration::from_millis(300), 4).await;
    let c = check("k", limit(1_000, Algorithm::FixedWindow));
    assert!(s.check(std::slice::from_ref(&c)).await.is_ok());

    server.signal("STOP");
    let started = Instant::now();
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(async move { s.check(&[c]).await })
        })
        .collect();
    let mut timed_out = 0;
    let mut overloaded = 0;
    for call in calls {
        match call.await.unwrap() {
            Err(StoreError::Unavailable(_)) => timed_out += 1,
            Err(StoreError::Overloaded(4)) => overloaded += 1,
            other => panic!("{other:?}"),
        }
    }
    let took = started.elapsed();
    server.signal("CONT");
    assert_eq!(timed_out + overloaded, 20);
    assert!(timed_out <= 4, "at most the cap waited: {timed_out}");
    assert!(overloaded >= 16);
    assert!(
        took < Duration::from_secs(2),
        "bounded by the timeout: {took:?}"
    );
}

/// Calls that time out while Redis is frozen used to be applied when it
/// thawed, so Redis counted more than the OK answers. Each call now carries a deadline in
/// Redis's clock; the thawed Redis runs the queued scripts past it, and they change nothing.
#[tokio::test]
async fn calls_that_timed_out_during_a_freeze_are_not_counted_after_the_thaw() {
    let server = RedisServer::start();
    let (s, health) = store(&server, Duration::from_millis(200), 64).await;
    let limit = Limit {
        requests_per_unit: NonZeroU32::new(1_000).unwrap(),
        unit: Unit::Day,
        unit_multiplier: NonZeroU16::MIN,
        algorithm: Algorithm::FixedWindow,
    };
    let c = check("frozen", limit);
    let mut ok = 0;
    for _ in 0..5 {
        assert!(s.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed);
        ok += 1;
    }

    server.signal("STOP");
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(async move { s.check(&[c]).await })
        })
        .collect();
    for call in calls {
        assert!(matches!(
            call.await.unwrap(),
            Err(StoreError::Unavailable(_))
        ));
    }
    server.signal("CONT");

    // Once a probe is answered, Redis has read (and run) everything queued before it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !health.is_up() {
        assert!(Instant::now() < deadline, "the store never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let d = s.check(std::slice::from_ref(&c)).await.unwrap();
    ok += 1;
    assert!(d[0].allowed);
    assert_eq!(
        d[0].remaining,
        1_000 - ok,
        "Redis counted {} hits for {ok} OK answers",
        1_000 - d[0].remaining
    );
}
