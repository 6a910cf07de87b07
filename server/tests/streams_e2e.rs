//! The gRPC port's per-connection stream cap and per-call timeout, against the real binary
//! with a raw HTTP/2 client (frames written by hand, so nothing client-side enforces the
//! server's limits for it): the cap is advertised in the server's SETTINGS, a stream beyond
//! it is refused, a call whose body trickles in is ended by the timeout however steadily it
//! trickles, and the connection keeps serving calls afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::RateLimitRequest;
use prost::Message;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{descriptor, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 3;
const REFUSED_STREAM: u32 = 7;

/// One frame as read from the server.
#[derive(Debug, Clone)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
    at: Instant,
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK header block of literal fields without indexing (no Huffman), which every
/// decoder must accept.
fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0);
        for s in [name, value] {
            assert!(s.len() < 127);
            block.push(s.len() as u8);
            block.extend_from_slice(s.as_bytes());
        }
    }
    block
}

/// A ShouldRateLimit call's HEADERS, without END_STREAM (the body follows).
fn call_headers(stream: u32) -> Vec<u8> {
    let block = header_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (
            ":path",
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        ),
        (":authority", "floodgate"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    frame(HEADERS, END_HEADERS, stream, &block)
}

/// A whole gRPC message: the 5-byte prefix and the encoded request.
fn grpc_message(req: &RateLimitRequest) -> Vec<u8> {
    let body = req.encode_to_vec();
    let mut m = vec![0];
    m.extend_from_slice(&(body.len() as u32).to_be_bytes());
    m.extend_from_slice(&body);
    m
}

/// Reads frames until the connection ends, sending each on `tx`.
async fn read_frames(mut read: OwnedReadHalf, tx: mpsc::UnboundedSender<Frame>) {
    loop {
        let mut head = [0u8; 9];
        if read.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        if read.read_exact(&mut payload).await.is_err() {
            return;
        }
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let f = Frame {
            kind: head[3],
            flags: head[4],
            stream,
            payload,
            at: Instant::now(),
        };
        if tx.send(f).is_err() {
            return;
        }
    }
}

/// Waits (bounded) for a frame matching `wanted`, keeping every frame seen in `seen`.
async fn wait_for(
    rx: &mut mpsc::UnboundedReceiver<Frame>,
    seen: &mut Vec<Frame>,
    within: Duration,
    what: &str,
    wanted: impl Fn(&Frame) -> bool,
) -> Frame {
    if let Some(f) = seen.iter().find(|f| wanted(f)) {
        return f.clone();
    }
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(f)) => {
                seen.push(f.clone());
                if wanted(&f) {
                    return f;
                }
            }
            Ok(None) => panic!("the connection closed before {what}; frames: {seen:?}"),
            Err(_) => panic!("no {what} within {within:?}; frames: {seen:?}"),
        }
    }
}

/// Whether `f` ends `stream` from the server's side: trailers (HEADERS with END_STREAM),
/// or a reset.
fn ends(f: &Frame, stream: u32) -> bool {
    f.stream == stream && (f.kind == RST_STREAM || (f.kind == HEADERS && f.flags & END_STREAM != 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_beyond_the_cap_are_refused_and_a_trickled_call_times_out() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/valid/example.yaml");
    let server = Server::start(
        &config,
        &["--max-concurrent-streams", "4", "--call-timeout-ms", "1500"],
    );
    let conn = TcpStream::connect(server.grpc).await.unwrap();
    let (read, mut write) = conn.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(read_frames(read, tx));
    write.write_all(PREFACE).await.unwrap();
    write.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    let mut seen = Vec::new();

    // The cap is advertised.
    let settings = wait_for(
        &mut rx,
        &mut seen,
        Duration::from_secs(10),
        "server SETTINGS",
        |f| f.kind == SETTINGS && f.flags & ACK == 0,
    )
    .await;
    let advertised = settings.payload.chunks(6).find_map(|s| {
        (u16::from_be_bytes([s[0], s[1]]) == SETTINGS_MAX_CONCURRENT_STREAMS)
            .then(|| u32::from_be_bytes([s[2], s[3], s[4], s[5]]))
    });
    assert_eq!(advertised, Some(4), "SETTINGS: {:?}", settings.payload);
    write
        .write_all(&frame(SETTINGS, ACK, 0, &[]))
        .await
        .unwrap();
    wait_for(
        &mut rx,
        &mut seen,
        Duration::from_secs(10),
        "SETTINGS ACK",
        |f| f.kind == SETTINGS && f.flags & ACK != 0,
    )
    .await;

    // Four calls open, their bodies never finished; a fifth is refused.
    let opened = Instant::now();
    for stream in [1, 3, 5, 7] {
        write.write_all(&call_headers(stream)).await.unwrap();
    }
    // Stream 1's message announces 1,000 bytes, which then trickle in.
    write
        .write_all(&frame(DATA, 0, 1, &[0, 0, 0, 0x03, 0xe8]))
        .await
        .unwrap();
    write.write_all(&call_headers(9)).await.unwrap();
    let refused = wait_for(
        &mut rx,
        &mut seen,
        Duration::from_secs(10),
        "RST_STREAM of stream 9",
        |f| f.kind == RST_STREAM && f.stream == 9,
    )
    .await;
    assert_eq!(
        u32::from_be_bytes([
            refused.payload[0],
            refused.payload[1],
            refused.payload[2],
            refused.payload[3]
        ]),
        REFUSED_STREAM
    );

    // A byte every 100 ms is steady activity, yet the call ends at its timeout.
    let stop = Arc::new(AtomicBool::new(false));
    let trickling = stop.clone();
    let trickle = tokio::spawn(async move {
        while !trickling.load(Ordering::Relaxed) {
            if write.write_all(&frame(DATA, 0, 1, &[7])).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        write
    });
    let ended = wait_for(
        &mut rx,
        &mut seen,
        Duration::from_secs(8),
        "the end of trickled stream 1",
        |f| ends(f, 1),
    )
    .await;
    let took = ended.at - opened;
    assert!(
        took >= Duration::from_millis(1400),
        "stream 1 ended after {took:?}, before its 1.5 s timeout"
    );
    for stream in [3, 5, 7] {
        wait_for(
            &mut rx,
            &mut seen,
            Duration::from_secs(8),
            "the end of an unfinished call",
            |f| ends(f, stream),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut write = trickle.await.unwrap();

    // The connection still decides whole calls.
    let stream = 11;
    let req = RateLimitRequest {
        domain: "web".into(),
        descriptors: vec![descriptor(&[("remote_address", "10.0.0.1")])],
        hits_addend: 0,
    };
    write.write_all(&call_headers(stream)).await.unwrap();
    write
        .write_all(&frame(DATA, END_STREAM, stream, &grpc_message(&req)))
        .await
        .unwrap();
    wait_for(
        &mut rx,
        &mut seen,
        Duration::from_secs(10),
        "an answer on stream 11",
        |f| f.kind == DATA && f.stream == stream && !f.payload.is_empty(),
    )
    .await;
    let _ = server;
}
