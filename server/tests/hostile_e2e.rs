//! End to end against hostile clients: the real binary, real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::RateLimitRequest;
use std::time::Duration;
use support::sockets::{closed_by_server, silent_connections};
use support::{ask, descriptor, envoy_request, eventually, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 5 }
"#;

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("edge.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    path
}

/// 3,000 distinct 50 KB values used to grow the memory store by the
/// values themselves (about 150 MB). A counter now holds a fixed-size fingerprint, so
/// they cost what 3,000 small values cost: well under a megabyte, plus allocator noise.
#[tokio::test]
async fn a_counters_memory_does_not_depend_on_its_values_length() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path()), &[]);
    let mut client = server.client().await;
    let value = |i: usize| format!("{i:08}{}", "v".repeat(50 * 1024));
    // Warm up: connection buffers and the first table allocations are not what we measure.
    for i in 0..200 {
        let r = ask(
            &mut client,
            envoy_request("edge", vec![descriptor(&[("tenant", &value(i))])]),
        );
        assert_eq!(r.await.unwrap().overall_code, Code::Ok as i32);
    }
    let before = server.rss_bytes();
    let n = 3_000;
    for i in 200..200 + n {
        let r = ask(
            &mut client,
            envoy_request("edge", vec![descriptor(&[("tenant", &value(i))])]),
        );
        assert_eq!(r.await.unwrap().overall_code, Code::Ok as i32);
    }
    let grown = server.rss_bytes().saturating_sub(before);
    // Every value got its own counter (the sweep publishes the count every second).
    let cells = || async {
        server
            .metric("floodgate_store_cells{store=\"memory\"}")
            .await
            == Some((200 + n) as f64)
    };
    eventually(Duration::from_secs(5), "3,200 cells", cells).await;
    // The values alone are 150 MB; 16 MB leaves room for the allocator, not for values.
    assert!(
        grown < 16 << 20,
        "RSS grew by {} MB over {n} counters of 50 KB values",
        grown >> 20
    );
}

/// A token budget of 1,000 per minute (burst 1,000), charged the way floodgate's filter
/// charges an LLM answer's tokens.
const BUDGET: &str = r#"
domain: llm
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1000, algorithm: token_bucket }
"#;

/// A stream-end charge of `hits` for tenant `t`: `x-floodgate-charge: 1`.
fn charge(t: &str, hits: u32) -> tonic::Request<RateLimitRequest> {
    let mut req = tonic::Request::new(RateLimitRequest {
        domain: "llm".into(),
        descriptors: vec![descriptor(&[("tenant", t)])],
        hits_addend: hits,
    });
    req.metadata_mut()
        .insert("x-floodgate-charge", "1".parse().unwrap());
    req
}

/// One answer reporting `u32::MAX` tokens used to put the bucket that many tokens into
/// debt: a `duration_until_reset` of 8 years, and two charges 16. Debt is capped at one
/// burst now: one hit fits again once 1,001 tokens are back, 60.06 s, however much is
/// charged.
#[tokio::test]
async fn a_huge_charge_blocks_for_one_burst_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.yaml");
    std::fs::write(&path, BUDGET).unwrap();
    let server = Server::start(&path, &[]);
    let mut client = server.client().await;
    for _ in 0..2 {
        let answer = client
            .should_rate_limit(charge("victim", u32::MAX))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::OverLimit as i32);
        let reset = answer.statuses[0].duration_until_reset.unwrap();
        // 1,001 tokens at 1,000 per minute, to the ns (Redis or not, never later).
        assert_eq!((reset.seconds, reset.nanos), (60, 60_000_000), "{answer:?}");
    }
}

/// `--refuse-charges`: a charge is answered PERMISSION_DENIED and counts nothing, so no
/// caller can put a limit into debt; admissions are decided as usual.
#[tokio::test]
async fn refused_charges_count_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.yaml");
    std::fs::write(&path, BUDGET).unwrap();
    let server = Server::start(&path, &["--refuse-charges"]);
    let mut client = server.client().await;
    let e = client
        .should_rate_limit(charge("victim", u32::MAX))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    assert_eq!(
        e.message(),
        "charges (x-floodgate-charge) are refused by this server (--refuse-charges)"
    );
    let check = envoy_request("llm", vec![descriptor(&[("tenant", "victim")])]);
    let r = ask(&mut client, check).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(
        r.statuses[0].limit_remaining, 999,
        "the charge took nothing"
    );
    assert_eq!(
        server
            .metric("floodgate_errors_total{kind=\"permission_denied\"}")
            .await,
        Some(1.0)
    );
}

/// Connections that never send the HTTP/2 preface used to stay open
/// forever. Now they are closed after the handshake timeout, the excess over
/// `--max-connections` is closed at once, and a connected gRPC client keeps its answers
/// throughout.
#[tokio::test]
async fn silent_connections_are_closed_and_clients_keep_their_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &config(dir.path()),
        &["--max-connections", "40", "--handshake-timeout-ms", "1000"],
    );
    let mut client = server.client().await;
    let request = || envoy_request("edge", vec![descriptor(&[("tenant", "a")])]);
    assert_eq!(
        ask(&mut client, request()).await.unwrap().overall_code,
        Code::Ok as i32
    );

    // 39 fit beside the client's connection; 21 are over the limit.
    let mut silent = silent_connections(server.grpc, 60).await;
    server
        .metric_reaches(
            "floodgate_connections_closed_total{reason=\"over_limit\"}",
            21.0,
        )
        .await;
    assert_eq!(server.metric("floodgate_connections").await, Some(40.0));
    assert_eq!(
        ask(&mut client, request()).await.unwrap().overall_code,
        Code::Ok as i32
    );

    // Every silent connection is closed, none left open for ever.
    for conn in &mut silent {
        assert!(closed_by_server(conn, Duration::from_secs(20)).await);
    }
    server
        .metric_reaches(
            "floodgate_connections_closed_total{reason=\"handshake_timeout\"}",
            39.0,
        )
        .await;
    assert_eq!(
        server
            .metric("floodgate_connections_closed_total{reason=\"over_limit\"}")
            .await,
        Some(21.0)
    );
    assert_eq!(
        ask(&mut client, request()).await.unwrap().overall_code,
        Code::Ok as i32
    );
    let mut fresh = server.client().await;
    assert_eq!(
        ask(&mut fresh, request()).await.unwrap().overall_code,
        Code::Ok as i32
    );
}

/// A connection that completed the preface but then moves no byte is closed after the
/// idle timeout.
#[tokio::test]
async fn idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path()), &["--idle-timeout-ms", "500"]);
    let mut conn = TcpStream::connect(server.grpc).await.unwrap();
    conn.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // The server answers the preface with its SETTINGS, then nothing moves.
    let mut buf = [0u8; 256];
    assert!(conn.read(&mut buf).await.unwrap() > 0);
    assert!(closed_by_server(&mut conn, Duration::from_secs(20)).await);
    server
        .metric_reaches(
            "floodgate_connections_closed_total{reason=\"idle_timeout\"}",
            1.0,
        )
        .await;
}

/// Out of file descriptors, `accept` fails at once every time: the loop used to spin a
/// core on EMFILE. It backs off now (5 ms doubling to 1 s), and serves again once the
/// silent connections are closed.
#[tokio::test]
async fn out_of_file_descriptors_the_accept_loop_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_fd_limit(
        &config(dir.path()),
        &[
            "--max-connections",
            "5000",
            "--handshake-timeout-ms",
            "2000",
        ],
        64,
    );
    // More than the process has descriptors: the kernel completes the excess handshakes
    // into the backlog, and accept fails with EMFILE until the first ones are closed.
    let mut silent = silent_connections(server.grpc, 100).await;
    for conn in &mut silent {
        assert!(closed_by_server(conn, Duration::from_secs(30)).await);
    }
    let errors = server
        .metric("floodgate_accept_errors_total")
        .await
        .unwrap();
    assert!(errors >= 1.0, "the descriptors never ran out");
    // A spinning loop fails millions of times in these seconds; backing off, a handful.
    assert!(
        errors < 100.0,
        "{errors} accept errors: the loop is spinning"
    );
    let mut client = server.client().await;
    let request = envoy_request("edge", vec![descriptor(&[("tenant", "a")])]);
    assert_eq!(
        ask(&mut client, request).await.unwrap().overall_code,
        Code::Ok as i32
    );
}
