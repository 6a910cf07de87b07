//! End to end: the real binary, a real tonic client, real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::{rate_limit::Unit, Code};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{admitted, ask, descriptor, envoy_request, eventually, Server};

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: generic_key
    value: checkout
    rate_limit: { unit: minute, requests_per_unit: 3, name: checkout }
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 1000, algorithm: token_bucket, burst: 40 }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 5, algorithm: sliding_window_log }
"#;

fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("edge.yaml");
    // Write then rename, so the watcher never reads a half-written file.
    let tmp = dir.join(".edge.yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

#[tokio::test]
async fn answers_what_envoys_native_filter_sends() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &[]);
    let mut client = server.client().await;
    let checkout = || envoy_request("edge", vec![descriptor(&[("generic_key", "checkout")])]);
    for left in [2, 1, 0] {
        let r = ask(&mut client, checkout()).await.unwrap();
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert_eq!(r.statuses.len(), 1);
        let s = &r.statuses[0];
        assert_eq!(s.limit_remaining, left);
        let limit = s.current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.requests_per_unit, limit.unit, limit.name.as_str()),
            (3, Unit::Minute as i32, "checkout")
        );
        let reset = s.duration_until_reset.as_ref().unwrap();
        assert!(reset.seconds <= 60);
    }
    let r = ask(&mut client, checkout()).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);

    // Several descriptors: one status each, in order; the over-limit one decides overall.
    let r = ask(
        &mut client,
        envoy_request(
            "edge",
            vec![
                descriptor(&[("remote_address", "10.0.0.1")]),
                descriptor(&[("generic_key", "checkout")]),
                descriptor(&[("unmatched", "x")]),
            ],
        ),
    )
    .await
    .unwrap();
    let codes: Vec<i32> = r.statuses.iter().map(|s| s.code).collect();
    assert_eq!(
        codes,
        [Code::Ok as i32, Code::OverLimit as i32, Code::Ok as i32]
    );
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    // Nothing was consumed by the rejected request: the bucket still has 40.
    let r = ask(
        &mut client,
        envoy_request("edge", vec![descriptor(&[("remote_address", "10.0.0.1")])]),
    )
    .await
    .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 39);
}

#[tokio::test]
async fn an_empty_domain_is_a_grpc_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &[]);
    let mut client = server.client().await;
    let e = ask(
        &mut client,
        envoy_request("", vec![descriptor(&[("tenant", "a")])]),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_on_one_key_get_exactly_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    // The default runtime (a worker per core) and the single-threaded one.
    for extra in [&[][..], &["--worker-threads", "1"]] {
        let server = Server::start(&write_config(dir.path(), CONFIG), extra);
        let mut clients = Vec::new();
        for _ in 0..16 {
            clients.push(server.client().await);
        }
        let request = envoy_request("edge", vec![descriptor(&[("tenant", "t")])]);
        assert_eq!(admitted(clients, request, 10).await, 5, "{extra:?}");
    }
}

#[tokio::test]
async fn healthz_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&write_config(dir.path(), CONFIG), &[]);
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    let mut client = server.client().await;
    for _ in 0..4 {
        ask(
            &mut client,
            envoy_request("edge", vec![descriptor(&[("generic_key", "checkout")])]),
        )
        .await
        .unwrap();
    }
    ask(
        &mut client,
        envoy_request("nope", vec![descriptor(&[("a", "b")])]),
    )
    .await
    .unwrap();
    let m = |s: &'static str| {
        let server = &server;
        async move { server.metric(s).await }
    };
    assert_eq!(
        m("floodgate_decisions_total{domain=\"edge\",result=\"ok\"}").await,
        Some(3.0)
    );
    assert_eq!(
        m("floodgate_decisions_total{domain=\"edge\",result=\"over_limit\"}").await,
        Some(1.0)
    );
    assert_eq!(
        m("floodgate_decisions_total{domain=\"\",result=\"no_limit\"}").await,
        Some(1.0)
    );
    assert_eq!(
        m("floodgate_requests_total{result=\"over_limit\"}").await,
        Some(1.0)
    );
    assert_eq!(
        m("floodgate_store_latency_seconds_count{store=\"memory\"}").await,
        Some(4.0)
    );
    // The classic text format unless the scraper asks for OpenMetrics.
    let classic = server.get_raw("/metrics", "").await.to_ascii_lowercase();
    assert!(
        classic.contains("content-type: text/plain; version=0.0.4"),
        "{classic}"
    );
    assert!(classic.contains("# type floodgate_requests_total counter"));
    let accept = "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n";
    let open = server.get_raw("/metrics", accept).await;
    assert!(
        open.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{open}"
    );
    assert!(open.contains("floodgate_requests_total{result=\"over_limit\"} 1\n"));
    assert!(open.ends_with("# EOF\n"));
    assert_eq!(server.get("/nope").await.0, 404);
}

#[tokio::test]
async fn a_valid_change_is_applied_and_an_invalid_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), CONFIG);
    // Watch the directory, as a Kubernetes ConfigMap would be mounted.
    let server = Server::start(dir.path(), &["--watch-interval-ms", "50"]);
    let mut client = server.client().await;
    let checkout = || envoy_request("edge", vec![descriptor(&[("generic_key", "checkout")])]);
    for _ in 0..3 {
        ask(&mut client, checkout()).await.unwrap();
    }
    assert_eq!(
        ask(&mut client, checkout()).await.unwrap().overall_code,
        Code::OverLimit as i32
    );

    write_config(
        dir.path(),
        &CONFIG.replace("requests_per_unit: 3,", "requests_per_unit: 100,"),
    );
    eventually(Duration::from_secs(20), "the new limit", || {
        let mut client = client.clone();
        async move {
            let r = ask(&mut client, checkout()).await.unwrap();
            r.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit
                == 100
        }
    })
    .await;
    assert_eq!(
        server
            .metric("floodgate_config_reloads_total{result=\"success\"}")
            .await,
        Some(1.0)
    );

    std::fs::write(&path, "domain: edge\ndescriptors:\n  - key: x\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n").unwrap();
    // A non-atomic write may first be seen half-written: that is a failure too.
    eventually(Duration::from_secs(20), "the failed reload", || async {
        server
            .metric("floodgate_config_reloads_total{result=\"failure\"}")
            .await
            >= Some(1.0)
    })
    .await;
    let r = ask(&mut client, checkout()).await.unwrap();
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        100,
        "old config kept"
    );
    assert!(
        server.log().contains("unknown unit \"fortnight\""),
        "{}",
        server.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        &write_config(dir.path(), CONFIG),
        &["--shutdown-delay-ms", "0"],
    );
    let mut client = server.client().await;
    ask(
        &mut client,
        envoy_request("edge", vec![descriptor(&[("tenant", "a")])]),
    )
    .await
    .unwrap();
    // The client stays connected: the server tells it to go away and stops anyway.
    let status = tokio::task::block_in_place(|| server.terminate());
    assert!(status.success(), "{status:?}\n{}", server.log());
}

#[test]
fn check_exits_zero_on_a_valid_config_and_one_with_the_error() {
    let ok = Command::new(support::BIN)
        .args(["--config", "tests/fixtures/config/valid", "--check"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "tests/fixtures/config/valid: OK (1 domain(s))\n"
    );

    let bad = Command::new(support::BIN)
        .args([
            "--config",
            "tests/fixtures/config/invalid/bad_unit.yaml",
            "--check",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let expected = std::fs::read_to_string("tests/fixtures/config/invalid/bad_unit.err").unwrap();
    assert_eq!(String::from_utf8_lossy(&bad.stderr), expected);
}

#[test]
fn an_invalid_config_stops_startup() {
    let out = Command::new(support::BIN)
        .args(["--config", "tests/fixtures/config/invalid/zero_burst.yaml"])
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no ready line");
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be greater than 0"));
}
