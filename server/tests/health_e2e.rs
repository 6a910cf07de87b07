//! End to end: `/healthz` says whether the store can decide, not only whether a socket
//! connects. A Redis that answers but refuses our credentials or our script used to leave
//! `/healthz` at `200 ok` while every call answered UNAVAILABLE, so Kubernetes kept
//! routing to a replica that could decide nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::time::Duration;
use support::redis::RedisServer;
use support::{ask, descriptor, envoy_request, eventually, Server};

const CONFIG: &str = r#"
domain: shared
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100 }
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    support::config_file("shared.yaml", CONFIG)
}

/// One call; `Ok` with the overall code, or the gRPC error.
async fn call(server: &Server) -> Result<i32, tonic::Status> {
    let mut client = server.client().await;
    let req = envoy_request("shared", vec![descriptor(&[("user", "u")])]);
    ask(&mut client, req).await.map(|r| r.overall_code)
}

/// Polls `/healthz` until it answers `status`; its body then.
async fn healthz_becomes(server: &Server, status: u16) -> String {
    eventually(
        Duration::from_secs(20),
        &format!("/healthz {status}"),
        || async { server.get("/healthz").await.0 == status },
    )
    .await;
    server.get("/healthz").await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_refuses_our_credentials_is_unhealthy_until_it_accepts_them() {
    let redis = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let (_dir, path) = config();
    let server = Server::start(&path, &["--redis-url", &redis.url()]);

    let body = healthz_becomes(&server, 503).await;
    assert!(
        body.starts_with("degraded: store cannot decide (auth): ") && body.contains("NOAUTH"),
        "{body}"
    );
    assert_eq!(
        server.metric("floodgate_store_up{store=\"redis\"}").await,
        Some(0.0)
    );
    assert!(
        server
            .metric("floodgate_store_failures_total{cause=\"auth\"}")
            .await
            >= Some(1.0)
    );
    let e = call(&server).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    assert!(e.message().contains("(auth)"), "{e:?}");

    // With the password the same Redis decides, and a healthy server says so.
    let with_password = format!("redis://:s3cret@127.0.0.1:{}", redis.port);
    let good = Server::start(&path, &["--redis-url", &with_password]);
    assert_eq!(good.get("/healthz").await, (200, "ok".to_owned()));
    assert_eq!(call(&good).await.unwrap(), Code::Ok as i32);

    // Redis stops asking for one: the first server's probe sees it decide again.
    let mut admin = redis::Client::open(with_password.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("")
        .query(&mut admin)
        .unwrap();
    assert_eq!(healthz_becomes(&server, 200).await, "ok");
    assert_eq!(call(&server).await.unwrap(), Code::Ok as i32);
}

/// A Redis that answers `PING` and `TIME` but cannot run the script (here `EVALSHA` is
/// renamed away, as a locked-down Redis may have it) is unhealthy too: the probe runs the
/// decision script itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_cannot_run_the_script_is_unhealthy() {
    let redis = RedisServer::start_with(&["--rename-command", "EVALSHA", "EVALSHA_HIDDEN"]);
    let (_dir, path) = config();
    let server = Server::start(&path, &["--redis-url", &redis.url()]);
    let body = healthz_becomes(&server, 503).await;
    assert!(
        body.starts_with("degraded: store cannot decide (script): "),
        "{body}"
    );
    assert!(
        server
            .metric("floodgate_store_failures_total{cause=\"script\"}")
            .await
            >= Some(1.0)
    );
    assert_eq!(
        call(&server).await.unwrap_err().code(),
        tonic::Code::Unavailable
    );
}
