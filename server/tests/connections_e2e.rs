//! End to end against clients that hold connections instead of calling: HTTP/2 connections
//! that send only PINGs, one peer taking every slot, and the metrics port flooded under a
//! low open-files limit. The real binary, real sockets; several peers are several
//! loopback addresses (127.0.0.N).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::net::SocketAddr;
use std::time::Duration;
use support::sockets::{closed_by_server, connect_from, loopback};
use support::{ask, descriptor, envoy_request, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
"#;

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("edge.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    path
}

/// A gRPC call from a fresh client, answered within 10 s (a starved port times out).
async fn fresh_call(server: &Server) -> Result<i32, String> {
    let call = async {
        let mut client = server.client().await;
        let req = envoy_request("edge", vec![descriptor(&[("tenant", "t")])]);
        ask(&mut client, req).await.map(|r| r.overall_code)
    };
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(Ok(code)) => Ok(code),
        Ok(Err(status)) => Err(format!("{status:?}")),
        Err(_) => Err("no answer within 10 s".into()),
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];
const PING: [u8; 17] = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
/// A connection-level WINDOW_UPDATE of one byte.
const WINDOW_UPDATE: [u8; 13] = [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// An HTTP/2 client that completes the handshake, then sends a PING and a WINDOW_UPDATE
/// every 200 ms and never a call, until the server closes it. Returns whether it did
/// within `within`.
async fn pings_only(addr: SocketAddr, within: Duration) -> bool {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(PREFACE).await.unwrap();
    conn.write_all(&SETTINGS).await.unwrap();
    let mut buf = [0u8; 1024];
    // The server's SETTINGS.
    assert!(conn.read(&mut buf).await.unwrap() > 0);
    conn.write_all(&SETTINGS_ACK).await.unwrap();
    let keep_pinging = async {
        loop {
            let sent = async {
                conn.write_all(&PING).await?;
                conn.write_all(&WINDOW_UPDATE).await
            };
            if sent.await.is_err() {
                return;
            }
            // The PING's acknowledgement (and anything else), or the close.
            let read = tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf));
            if let Ok(Ok(0) | Err(_)) = read.await {
                return;
            }
        }
    };
    tokio::time::timeout(within, keep_pinging).await.is_ok()
}

/// `--max-connections 10 --idle-timeout-ms 3000`: ten connections that send only PINGs
/// and WINDOW_UPDATEs used to stay open for good, and a new caller got UNAVAILABLE. They
/// carry no call, so they are idle: closed after 3 s, and the caller is answered. A
/// client that calls keeps its connection meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_only_ping_are_idle() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &config(dir.path()),
        &["--max-connections", "11", "--idle-timeout-ms", "3000"],
    );
    let mut caller = server.client().await;
    let request = || envoy_request("edge", vec![descriptor(&[("tenant", "t")])]);
    assert_eq!(
        ask(&mut caller, request()).await.unwrap().overall_code,
        Code::Ok as i32
    );
    let pingers: Vec<_> = (0..10)
        .map(|_| tokio::spawn(pings_only(server.grpc, Duration::from_secs(20))))
        .collect();
    // The caller calls every 500 ms throughout: its connection carries calls.
    let calls = tokio::spawn(async move {
        for _ in 0..12 {
            let r = ask(&mut caller, request()).await.unwrap();
            assert_eq!(r.overall_code, Code::Ok as i32);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    for p in pingers {
        assert!(p.await.unwrap(), "a PING-only connection stayed open");
    }
    calls.await.unwrap();
    assert_eq!(
        server
            .metric("floodgate_connections_closed_total{reason=\"idle_timeout\"}")
            .await,
        Some(10.0),
        "the ten PING-only connections, not the caller's"
    );
    assert_eq!(fresh_call(&server).await, Ok(Code::Ok as i32));
}

/// One peer holding connections gets its share, not the port: beyond
/// `--max-connections-per-peer` (and `--http-max-connections-per-peer`) its new
/// connections are closed at once, while other peers are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_cannot_take_every_slot() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &config(dir.path()),
        &[
            "--max-connections",
            "20",
            "--max-connections-per-peer",
            "5",
            "--http-max-connections-per-peer",
            "3",
            // The held connections are silent: no timeout may free a slot meanwhile.
            "--handshake-timeout-ms",
            "60000",
            "--http-header-timeout-ms",
            "60000",
        ],
    );
    let hog = loopback(2);
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(connect_from(server.grpc, hog).await);
    }
    for _ in 0..3 {
        held.push(connect_from(server.http, hog).await);
    }
    server.metric_reaches("floodgate_connections", 5.0).await;
    let mut sixth = connect_from(server.grpc, hog).await;
    assert!(closed_by_server(&mut sixth, Duration::from_secs(5)).await);
    let mut fourth = connect_from(server.http, hog).await;
    assert!(closed_by_server(&mut fourth, Duration::from_secs(5)).await);
    let refused = "floodgate_connections_closed_total{reason=\"peer_over_limit\"}";
    assert_eq!(server.metric(refused).await, Some(1.0));
    let refused = "floodgate_http_connections_closed_total{reason=\"peer_over_limit\"}";
    assert_eq!(server.metric(refused).await, Some(1.0));
    // Other peers (this test's client is 127.0.0.1) are served on both ports.
    assert_eq!(fresh_call(&server).await, Ok(Code::Ok as i32));
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    drop(held);
}

/// Under `ulimit -n 256`, 300 connections to the HTTP port that stay silent or send half
/// a request used to stay open for good: the descriptors ran out, gRPC calls got
/// DEADLINE_EXCEEDED, `/healthz` timed out, and the log said `cannot accept gRPC
/// connections; Too many open files`. The HTTP port now has its own cap (64 of the 256
/// descriptors; the gRPC port's automatic cap is what is left after it and 100 for the
/// rest) and closes what does not finish a request head in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_port_cannot_starve_the_grpc_port_of_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_fd_limit(
        &config(dir.path()),
        &["--http-header-timeout-ms", "2000"],
        256,
    );
    // 300 connections from 20 peers (15 each, under the per-peer cap): the port's own cap
    // is what holds. Odd ones send half a request head.
    let mut attack = Vec::new();
    for i in 0..300 {
        let mut conn = connect_from(server.http, loopback(2 + (i % 20) as u8)).await;
        if i % 2 == 1 {
            // The server may already have closed it (over the cap): ignore.
            let _ = conn
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: floodgate\r\n")
                .await;
        }
        attack.push(conn);
    }
    // While the HTTP port is full, the gRPC port answers at once.
    for _ in 0..3 {
        assert_eq!(fresh_call(&server).await, Ok(Code::Ok as i32));
    }
    // Every attacking connection is closed: at once over the cap, or at the header timeout.
    for conn in &mut attack {
        assert!(closed_by_server(conn, Duration::from_secs(30)).await);
    }
    assert_eq!(server.get("/healthz").await, (200, "ok".to_owned()));
    let closed =
        |reason: &str| format!("floodgate_http_connections_closed_total{{reason=\"{reason}\"}}");
    let over = server.metric(&closed("over_limit")).await.unwrap();
    let timed_out = server.metric(&closed("header_timeout")).await.unwrap();
    // Each was closed for a counted reason: over the cap of 64 on arrival, or out of time.
    assert!(
        over >= 1.0 && timed_out >= 1.0,
        "{over} over, {timed_out} timed out"
    );
    assert!(over + timed_out >= 300.0, "{over} + {timed_out}");
    assert_eq!(
        server.metric("floodgate_accept_errors_total").await,
        Some(0.0),
        "the gRPC port never ran out of descriptors"
    );
    let log = server.log();
    assert!(!log.contains("Too many open files"), "{log}");
    assert_eq!(fresh_call(&server).await, Ok(Code::Ok as i32));
}

/// A client that asks and never reads its answers holds its connection only until the
/// HTTP idle timeout: the server's writes block, and nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_that_reads_nothing_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &config(dir.path()),
        &[
            "--http-idle-timeout-ms",
            "1000",
            "--http-header-timeout-ms",
            "60000",
        ],
    );
    let mut conn = TcpStream::connect(server.http).await.unwrap();
    // Far more answer bytes than the sockets' buffers hold.
    let asks = "GET /metrics HTTP/1.1\r\nHost: floodgate\r\n\r\n".repeat(3000);
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.write_all(asks.as_bytes())).await;
    server
        .metric_reaches(
            "floodgate_http_connections_closed_total{reason=\"idle_timeout\"}",
            1.0,
        )
        .await;
    assert!(closed_by_server(&mut conn, Duration::from_secs(20)).await);
}
