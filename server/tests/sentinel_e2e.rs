//! Redis Sentinel end to end: the real binary finds the master through real sentinels and
//! follows a failover. The master is killed (SIGKILL) under load; the sentinels promote
//! the replica; the server must move to it within moments of the sentinels naming it,
//! answer `UNAVAILABLE` meanwhile (counted, so Envoy's failure mode applies), and count
//! nothing twice: the new master's counter never exceeds the admissions answered plus
//! the calls that were in flight at the kill.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::sentinel::{info, Sentinels, MASTER_NAME};
use support::{ask, descriptor, envoy_request, eventually, Server};

const CONFIG: &str = r#"
domain: sentinel
descriptors:
  - key: counted
    rate_limit: { unit: week, requests_per_unit: 1000000000 }
"#;

/// Load clients, each with one call in flight at a time.
const CLIENTS: u64 = 4;

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    unavailable: AtomicU64,
    /// When the first admission after the outage began came back.
    first_ok_after_outage: Mutex<Option<Instant>>,
    /// Set by the first `UNAVAILABLE` after the kill.
    outage: AtomicBool,
    killed: AtomicBool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_is_followed_and_nothing_is_counted_twice() {
    let mut set = Sentinels::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentinel.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let urls = set.urls().join(",");
    let server = Server::start(
        &path,
        &[
            "--redis-sentinel",
            &urls,
            "--redis-sentinel-master",
            MASTER_NAME,
            "--redis-timeout-ms",
            "200",
        ],
    );
    eventually(Duration::from_secs(20), "the store up", || async {
        server.get("/healthz").await.0 == 200
    })
    .await;

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..CLIENTS {
        let mut client = server.client().await;
        let (tally, stop) = (tally.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let request = envoy_request("sentinel", vec![descriptor(&[("counted", "x")])]);
            while !stop.load(Ordering::Relaxed) {
                match ask(&mut client, request.clone()).await {
                    Ok(r) => {
                        assert_eq!(r.overall_code, Code::Ok as i32);
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                        if tally.outage.load(Ordering::Relaxed) {
                            let mut first = tally.first_ok_after_outage.lock().unwrap();
                            first.get_or_insert_with(Instant::now);
                        }
                    }
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                        tally.unavailable.fetch_add(1, Ordering::Relaxed);
                        if tally.killed.load(Ordering::Relaxed) {
                            tally.outage.store(true, Ordering::Relaxed);
                        }
                        // Envoy would apply its failure mode; a client here just retries.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }));
    }
    let ok_at_least = |n: u64| {
        let tally = tally.clone();
        move || {
            let tally = tally.clone();
            async move { tally.ok.load(Ordering::Relaxed) >= n }
        }
    };
    eventually(Duration::from_secs(20), "load flowing", ok_at_least(300)).await;

    let first_master = set.master.port;
    let killed_at = Instant::now();
    tally.killed.store(true, Ordering::Relaxed);
    set.master.kill();
    let ok_at_kill = tally.ok.load(Ordering::Relaxed);

    // The sentinels' own failover: until they name the replica.
    let mut named_at = None;
    while named_at.is_none() {
        if set.master_port() == Some(set.replica.port) {
            named_at = Some(Instant::now());
        }
        assert!(killed_at.elapsed() < Duration::from_secs(60), "no failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let named_at = named_at.unwrap();
    eventually(
        Duration::from_secs(30),
        "service back",
        ok_at_least(ok_at_kill + 300),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    let back_at = tally.first_ok_after_outage.lock().unwrap().unwrap();

    let failover = named_at.duration_since(killed_at);
    let followed = back_at.saturating_duration_since(named_at);
    let outage = back_at.duration_since(killed_at);
    let ok = tally.ok.load(Ordering::Relaxed);
    let unavailable = tally.unavailable.load(Ordering::Relaxed);
    let counted = counter(&set);
    println!(
        "sentinels named the replica {failover:?} after the kill; first admission {followed:?} \
         after that ({outage:?} after the kill); {unavailable} UNAVAILABLE meanwhile; {ok} admitted, {counted} counted \
         on the new master"
    );
    assert_ne!(set.replica.port, first_master);
    assert!(info(&set.replica, "replication").contains("role:master"));
    // The move is the probe's: within a few probe periods of the sentinels' decision.
    assert!(
        followed < Duration::from_secs(3),
        "followed {followed:?} after the failover; log:\n{}",
        server.log()
    );
    // The outage was answered and counted as such.
    assert!(unavailable > 0);
    let counted_errors = server
        .metric("floodgate_errors_total{kind=\"store_unavailable\"}")
        .await
        .unwrap_or(0.0);
    assert!(counted_errors >= 1.0, "errors counted: {counted_errors}");
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    // Nothing counted twice: Redis holds at most what was admitted, plus the calls in
    // flight at the kill (answered UNAVAILABLE, possibly applied and replicated).
    assert!(
        counted <= ok + CLIENTS,
        "counted {counted} > admitted {ok} + {CLIENTS} in flight"
    );
    // Every admission after the failover is on the new master (what the old one
    // acknowledged but had not yet replicated may be lost: replication is asynchronous).
    assert!(
        counted >= ok - ok_at_kill,
        "counted {counted}, admitted after the kill {}",
        ok - ok_at_kill
    );
    let log = server.log();
    assert!(
        log.contains("Redis master found through the sentinels"),
        "{log}"
    );
}

/// The one counter's count, read from the new master (`"window count"`).
fn counter(set: &Sentinels) -> u64 {
    let mut c = set.replica.conn();
    let keys: Vec<String> = redis::cmd("KEYS").arg("fg:v2:*").query(&mut c).unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let v: String = redis::cmd("GET").arg(&keys[0]).query(&mut c).unwrap();
    v.split(' ').nth(1).unwrap().parse().unwrap()
}
