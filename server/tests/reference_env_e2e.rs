//! End to end: the real binary started with no flag at all, configured only by the
//! reference service's environment variables, as a deployment of envoyproxy/ratelimit
//! configures it: the configuration from `RUNTIME_ROOT`/`RUNTIME_SUBDIRECTORY`, the
//! listeners from `GRPC_HOST`/`GRPC_PORT` and `HOST`/`PORT`, its flags' variables, json
//! logs; a variable naming a feature we lack refuses to start, saying what to use.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::process::{Command, Stdio};
use support::{ask, descriptor, envoy_request, Server, BIN};

const CONFIG: &str = "domain: web\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n";

/// A runtime tree as the reference reads it: ROOT/SUBDIRECTORY/config/*.yaml.
fn runtime_tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let app = root.path().join("ratelimit").join("config");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("web.yaml"), CONFIG).unwrap();
    root
}

#[tokio::test]
async fn the_references_variables_alone_configure_the_server() {
    let root = runtime_tree();
    let server = Server::start_reference(&[
        ("RUNTIME_ROOT", root.path().to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("LOG_LEVEL", "info"),
        ("LOG_FORMAT", "json"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("BACKEND_TYPE", "redis"),
        ("SHADOW_MODE", "false"),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("LIMIT_REMAINING_HEADER", "X-Left"),
        ("USE_PROMETHEUS", "true"),
        // Its own metrics listener (the reference's :9090 by default) on any free port.
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ]);
    let mut client = server.client().await;
    let request = || envoy_request("web", vec![descriptor(&[("user", "a")])]);
    for _ in 0..2 {
        let ok = ask(&mut client, request()).await.unwrap();
        assert_eq!(ok.overall_code, Code::Ok as i32);
    }
    let over = ask(&mut client, request()).await.unwrap();
    assert_eq!(over.overall_code, Code::OverLimit as i32);
    assert!(
        over.response_headers_to_add
            .iter()
            .any(|h| h.key == "X-Left"),
        "LIMIT_REMAINING_HEADER names the header: {:?}",
        over.response_headers_to_add
    );
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    // The reference's series, with its names and labels, beside ours.
    let (status, metrics) = server.get("/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "ratelimit_service_rate_limit_total_hits{domain=\"web\",key1=\"user\"} 3",
        "ratelimit_service_rate_limit_within_limit{domain=\"web\",key1=\"user\"} 2",
        "ratelimit_service_rate_limit_over_limit{domain=\"web\",key1=\"user\"} 1",
        "ratelimit_service_rate_limit_near_limit{domain=\"web\",key1=\"user\"} 1",
        "ratelimit_service_rate_limit_shadow_mode{domain=\"web\",key1=\"user\"} 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing:\n{metrics}"
        );
    }
    assert!(metrics.contains("floodgate_requests_total"), "ours stay");
    // JSON logs, and the variable that needs nothing here noted once.
    let log = server.log();
    let lines: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        assert!(
            line.starts_with('{') && line.ends_with('}'),
            "not JSON: {line}"
        );
    }
    assert_eq!(
        log.matches("RUNTIME_IGNOREDOTFILES is set: ignored")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn a_feature_we_lack_refuses_to_start_and_says_what_to_use() {
    let root = runtime_tree();
    let mut command = Command::new(BIN);
    for setting in floodgate_server::cli::reference::SETTINGS {
        command.env_remove(setting.name);
    }
    let out = command
        .envs([
            ("RUNTIME_ROOT", root.path().to_str().unwrap()),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", "memcached:11211"),
        ])
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no ready line");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("BACKEND_TYPE=\"memcache\" is not supported: the store is memory, or Redis with `REDIS_URL`")
            && err.contains("MEMCACHE_HOST_PORT is set: no memcache store"),
        "{err}"
    );
}

#[tokio::test]
async fn use_statsd_pushes_the_references_counters_over_udp() {
    let statsd = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = statsd.local_addr().unwrap().port().to_string();
    let root = runtime_tree();
    let server = Server::start_reference(&[
        ("RUNTIME_ROOT", root.path().to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("USE_STATSD", "true"),
        ("STATSD_HOST", "127.0.0.1"),
        ("STATSD_PORT", &port),
        ("STATS_FLUSH_INTERVAL", "100ms"),
    ]);
    let mut client = server.client().await;
    for _ in 0..3 {
        ask(
            &mut client,
            envoy_request("web", vec![descriptor(&[("user", "a")])]),
        )
        .await
        .unwrap();
    }
    // Sum each counter's increases until the three calls are all in.
    let mut totals = std::collections::BTreeMap::<String, u64>::new();
    let mut buf = vec![0u8; 2048];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while totals.get("ratelimit.service.rate_limit.web.user.total_hits") != Some(&3) {
        let n = tokio::time::timeout_at(deadline, statsd.recv(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no complete counts by statsd; got {totals:?}"))
            .unwrap();
        for line in std::str::from_utf8(&buf[..n]).unwrap().lines() {
            let (name, rest) = line.split_once(':').unwrap();
            let value: u64 = rest.strip_suffix("|c").unwrap().parse().unwrap();
            *totals.entry(name.to_owned()).or_default() += value;
        }
    }
    assert_eq!(
        totals["ratelimit.service.rate_limit.web.user.within_limit"],
        2
    );
    assert_eq!(
        totals["ratelimit.service.rate_limit.web.user.over_limit"],
        1
    );
    // The reference's series are not on /metrics unless asked for.
    let (_, metrics) = server.get("/metrics").await;
    assert!(
        !metrics.contains("ratelimit_service_rate_limit"),
        "{metrics}"
    );
}
