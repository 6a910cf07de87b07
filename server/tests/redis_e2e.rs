//! End to end with Redis: real floodgate-server binaries sharing a real `redis-server`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::redis::RedisServer;
use support::{admitted, ask, descriptor, envoy_request, eventually, Server};

// Long units, so no window or refill boundary falls inside a test run.
const CONFIG: &str = r#"
domain: shared
descriptors:
  - key: fw
    rate_limit: { unit: week, requests_per_unit: 50 }
  - key: tb
    rate_limit: { unit: day, requests_per_unit: 50, algorithm: token_bucket }
  - key: swl
    rate_limit: { unit: day, requests_per_unit: 50, algorithm: sliding_window_log }
  - key: swc
    rate_limit: { unit: week, requests_per_unit: 50, algorithm: sliding_window_counter }
  - key: open
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    support::config_file("shared.yaml", CONFIG)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_sharing_one_redis_admit_exactly_the_limit() {
    let redis = RedisServer::start();
    let (_dir, path) = config();
    let url = redis.url();
    // One on the default runtime (a worker per core), one single-threaded: both exact.
    let servers = [
        Server::start(&path, &["--redis-url", &url]),
        Server::start(&path, &["--redis-url", &url, "--worker-threads", "1"]),
    ];
    for key in ["fw", "tb", "swl", "swc"] {
        let mut clients = Vec::new();
        for server in &servers {
            for _ in 0..8 {
                clients.push(server.client().await);
            }
        }
        let request = envoy_request("shared", vec![descriptor(&[(key, "hot")])]);
        let admitted = admitted(clients, request, 10).await;
        assert_eq!(admitted, 50, "{key}: 160 asked over two servers");
    }
    for server in &servers {
        assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
        assert_eq!(
            server.metric("floodgate_store_up{store=\"redis\"}").await,
            Some(1.0)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_load_and_restarted() {
    let mut redis = RedisServer::start();
    let (_dir, path) = config();
    let mut server = Server::start(
        &path,
        &["--redis-url", &redis.url(), "--redis-timeout-ms", "200"],
    );

    let ok = Arc::new(AtomicU64::new(0));
    let unavailable = Arc::new(AtomicU64::new(0));
    let slowest_error_ms = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let mut client = server.client().await;
        let (ok, unavailable, slowest, stop) = (
            ok.clone(),
            unavailable.clone(),
            slowest_error_ms.clone(),
            stop.clone(),
        );
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let r = ask(
                    &mut client,
                    envoy_request("shared", vec![descriptor(&[("open", "x")])]),
                )
                .await;
                match r {
                    Ok(r) => {
                        assert_eq!(r.overall_code, Code::Ok as i32);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(status) => {
                        // Every failure is UNAVAILABLE, so Envoy's failure mode applies.
                        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                        unavailable.fetch_add(1, Ordering::Relaxed);
                        let ms = started.elapsed().as_millis() as u64;
                        slowest.fetch_max(ms, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let at_least = |counter: &Arc<AtomicU64>, n: u64| {
        let counter = counter.clone();
        move || {
            let counter = counter.clone();
            async move { counter.load(Ordering::Relaxed) >= n }
        }
    };
    eventually(Duration::from_secs(20), "load flowing", at_least(&ok, 200)).await;

    redis.kill();
    eventually(
        Duration::from_secs(20),
        "UNAVAILABLE answers",
        at_least(&unavailable, 500),
    )
    .await;
    let (status, body) = server.get("/healthz").await;
    assert_eq!(status, 503);
    assert!(body.starts_with("degraded"), "{body}");
    assert_eq!(
        server.metric("floodgate_store_up{store=\"redis\"}").await,
        Some(0.0)
    );
    assert!(
        server
            .metric("floodgate_errors_total{kind=\"store_unavailable\"}")
            .await
            >= Some(500.0)
    );

    redis.restart();
    let ok_before = ok.load(Ordering::Relaxed);
    eventually(
        Duration::from_secs(20),
        "service resumed",
        at_least(&ok, ok_before + 200),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    assert!(server.running(), "the process never exits");
    assert!(
        slowest_error_ms.load(Ordering::Relaxed) < 1_000,
        "errors answered quickly: slowest {} ms",
        slowest_error_ms.load(Ordering::Relaxed)
    );
    let log = server.log();
    let down_lines = log.matches("Redis cannot decide").count();
    assert!(
        (1..=2).contains(&down_lines),
        "one line per outage, not per request:\n{log}"
    );
    assert!(log.contains("Redis can decide again"), "{log}");
}

#[tokio::test]
async fn a_server_starts_degraded_without_redis_and_recovers_when_it_comes() {
    let mut redis = RedisServer::start();
    redis.kill();
    let (_dir, path) = config();
    let server = Server::start(&path, &["--redis-url", &redis.url()]);
    assert_eq!(server.get("/healthz").await.0, 503);
    let mut client = server.client().await;
    let e = ask(
        &mut client,
        envoy_request("shared", vec![descriptor(&[("open", "x")])]),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    redis.restart();
    eventually(Duration::from_secs(20), "healthz ok", || async {
        server.get("/healthz").await.0 == 200
    })
    .await;
    let r = ask(
        &mut client,
        envoy_request("shared", vec![descriptor(&[("open", "x")])]),
    )
    .await
    .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
}

#[test]
fn a_malformed_redis_url_stops_startup() {
    let (_dir, path) = config();
    let out = Command::new(support::BIN)
        .arg("--config")
        .arg(&path)
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .args(["--redis-url", "http://nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no ready line");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--redis-url http://nope"));
}
