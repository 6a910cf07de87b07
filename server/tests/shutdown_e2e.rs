//! End to end: SIGTERM drains before it stops. `/healthz` turns `503 draining` at once
//! while gRPC keeps answering, on connections old and new, for `--shutdown-delay-ms`;
//! then the process exits cleanly. Before, SIGTERM closed both listeners at once, so
//! `/healthz` went straight to "connection refused" while proxies still sent calls.
//! SIGINT, and a second signal during the delay, stop at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::time::{Duration, Instant};
use support::{ask, descriptor, envoy_request, eventually, Server};

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 1000 }
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    support::config_file("edge.yaml", CONFIG)
}

fn request() -> floodgate_server::proto::rls::RateLimitRequest {
    envoy_request("edge", vec![descriptor(&[("tenant", "acme")])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_draining_while_grpc_serves_for_the_delay_then_stops() {
    let (_dir, path) = config();
    let mut server = Server::start(&path, &["--shutdown-delay-ms", "3000"]);
    let mut client = server.client().await;
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));

    server.signal("TERM");
    let signalled = Instant::now();
    eventually(Duration::from_secs(10), "/healthz 503", || async {
        server.get("/healthz").await.0 == 503
    })
    .await;
    assert_eq!(
        server.get("/healthz").await,
        (503, "draining: shutting down".to_owned())
    );
    // Still serving: the connection it had, and one made now.
    let r = ask(&mut client, request()).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    let mut fresh = server.client().await;
    let r = ask(&mut fresh, request()).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(
        signalled.elapsed() < Duration::from_millis(3000),
        "the checks above took the whole delay ({:?}); they prove nothing",
        signalled.elapsed()
    );

    let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(30)))
        .expect("stopped after the delay");
    assert!(status.success(), "{status:?}\n{}", server.log());
    assert!(
        signalled.elapsed() >= Duration::from_millis(3000),
        "stopped {:?} after SIGTERM, before the 3 s delay",
        signalled.elapsed()
    );
    assert!(
        server.log().contains("/healthz answers 503 draining"),
        "{}",
        server.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_and_a_second_signal_stop_at_once() {
    let (_dir, path) = config();
    for signals in [&["INT"][..], &["TERM", "TERM"][..]] {
        let mut server = Server::start(&path, &["--shutdown-delay-ms", "600000"]);
        for (i, s) in signals.iter().enumerate() {
            if i > 0 {
                eventually(Duration::from_secs(10), "draining", || async {
                    server.get("/healthz").await.0 == 503
                })
                .await;
            }
            server.signal(s);
        }
        let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(20)))
            .unwrap_or_else(|| panic!("{signals:?} did not stop it within 20 s of a 10 min delay"));
        assert!(
            status.success(),
            "{signals:?}: {status:?}\n{}",
            server.log()
        );
    }
}
