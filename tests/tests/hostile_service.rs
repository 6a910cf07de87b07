//! A misbehaving rate limit service end to end: a real Envoy loading
//! floodgate.wasm, spoken to over HTTP/1.1 by hand so that the response is read as the
//! bytes on the wire, in front of an upstream that records what reaches it, asking a
//! scripted service that sends what no real one should.

use floodgate_integration::fake_rls::{Scripted, Silent};
use floodgate_integration::raw_http::{self, RawResponse};
use floodgate_integration::{burst, client, configs, Envoy, Upstream};
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::RateLimitResponse;
use floodgate_server::proto::HeaderValue;
use serde_json::json;
use std::time::Instant;

fn header(key: &str, value: &str) -> HeaderValue {
    HeaderValue {
        key: key.into(),
        value: value.into(),
        raw_value: vec![],
    }
}

/// Every way the issue found to break a response or an upstream request with the
/// service's headers, plus one good header each way.
fn hostile_headers(code: Code) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code as i32,
        response_headers_to_add: vec![
            header("x-a", "v\r\nx-injected: yes"),
            header("x-nul", "a\0b"),
            header("x-b\r\nx-injected-name", "v"),
            header(":status", "502"),
            header("content-length", "3"),
            header("transfer-encoding", "chunked"),
            header("connection", "close"),
            header("x-good", "1"),
        ],
        request_headers_to_add: vec![
            header(":path", "/admin"),
            header("host", "evil.example"),
            header("content-length", "5"),
            header("x-r", "v\nx-smuggled: yes"),
            header("upgrade", "websocket"),
            header("x-good-req", "1"),
        ],
        ..RateLimitResponse::default()
    }
}

const RESPONSE_DROPPED: u64 = 7;
const REQUEST_DROPPED: u64 = 5;

fn assert_nothing_injected(reply: &RawResponse) {
    let head = reply.head();
    assert!(!head.contains("injected"), "{head}");
    assert!(!head.contains("x-nul"), "{head}");
    assert!(!head.contains("3,"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding"),
        "{head}"
    );
    assert_eq!(reply.header("x-good").as_deref(), Some("1"), "{head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn service_headers_cannot_inject_lines_or_break_an_allowed_request() {
    let rls = Scripted::start(hostile_headers(Code::Ok)).await;
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_global(
            &configs::global_tenant_plugin(),
            upstream.addr(),
            rls.addr(),
        ),
        2,
    )
    .await;
    let started = Instant::now();
    let reply = raw_http::get(envoy.listener("ingress"), "/", &[("x-tenant-id", b"acme")]).await;
    assert_eq!(reply.status(), 200, "{}", reply.head());
    assert_eq!(reply.body(), b"ok\n");
    assert_nothing_injected(&reply);
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );

    assert_eq!(upstream.paths(), ["/"]);
    let seen = &upstream.headers()[0];
    assert_eq!(seen.get("host").map(String::as_str), Some("test"));
    assert_eq!(seen.get("x-good-req").map(String::as_str), Some("1"));
    for absent in ["content-length", "x-r", "x-smuggled", "upgrade"] {
        assert!(
            !seen.contains_key(absent),
            "{absent} reached the upstream: {seen:?}"
        );
    }
    envoy
        .expect_stat(
            "wasmcustom.floodgate.rls.dropped_headers",
            RESPONSE_DROPPED + REQUEST_DROPPED,
        )
        .await;
    envoy.expect_stat("wasmcustom.floodgate.rls.ok", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn service_headers_cannot_inject_lines_into_a_rejection() {
    let rls = Scripted::start(hostile_headers(Code::OverLimit)).await;
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::floodgate_global(
            &configs::global_tenant_plugin(),
            upstream.addr(),
            rls.addr(),
        ),
        2,
    )
    .await;
    let reply = raw_http::get(envoy.listener("ingress"), "/", &[("x-tenant-id", b"acme")]).await;
    assert_eq!(reply.status(), 429, "{}", reply.head());
    assert_nothing_injected(&reply);
    assert_eq!(upstream.count(), 0);
    envoy
        .expect_stat(
            "wasmcustom.floodgate.rls.dropped_headers",
            RESPONSE_DROPPED + REQUEST_DROPPED,
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_of_failures_logs_a_bounded_number_of_lines() {
    let upstream = Upstream::start().await;
    let mut plugin = configs::global_tenant_plugin();
    plugin["rls"]["cluster"] = json!("no-such-cluster");
    plugin["rls"]["failure_mode"] = json!("allow");
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let started = Instant::now();
    let replies = burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme")],
        500,
    )
    .await;
    assert!(replies.iter().all(|r| r.status == 200));
    envoy
        .expect_stat("wasmcustom.floodgate.rls.error.not_sent", 500)
        .await;
    let periods = started.elapsed().as_secs() / 10 + 1;
    let lines = envoy
        .log()
        .lines()
        .filter(|l| l.contains("cannot call the rate limit service"))
        .count() as u64;
    // At most one line per worker (2) per 10 s period the storm lasted.
    assert!(
        (1..=2 * periods).contains(&lines),
        "{lines} log lines for 500 failures in {periods} periods"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overflowing_circuit_breaker_logs_a_bounded_number_of_lines() {
    let rls = Silent::start().await;
    let upstream = Upstream::start().await;
    let mut plugin = configs::global_tenant_plugin();
    plugin["rls"]["timeout_ms"] = json!(300);
    plugin["rls"]["failure_mode"] = json!("allow");
    // One call at a time to the service: every other request overflows the breaker.
    let mut ratelimit = configs::cluster("ratelimit", rls.addr(), true);
    ratelimit["circuit_breakers"] =
        json!({"thresholds": [{"max_requests": 1, "max_pending_requests": 1}]});
    let yaml = configs::bootstrap(
        vec![configs::listener(
            "ingress",
            vec![configs::floodgate_filter(&plugin)],
            "upstream",
        )],
        vec![
            configs::cluster("upstream", upstream.addr(), false),
            ratelimit,
        ],
    );
    let envoy = Envoy::start(&yaml, 2).await;
    let started = Instant::now();
    let replies = burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", "acme")],
        300,
    )
    .await;
    assert!(
        replies.iter().all(|r| r.status == 200),
        "failure_mode allow"
    );
    envoy
        .expect_stat("wasmcustom.floodgate.failure_mode_allowed", 300)
        .await;
    let periods = started.elapsed().as_secs() / 10 + 1;
    let log = envoy.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("rate limit service"))
        .count() as u64;
    // At most one line per cause (not sent, failed call) per worker per 10 s.
    assert!(
        (1..=2 * 2 * periods).contains(&lines),
        "{lines} log lines for 300 failures in {periods} periods:\n{log}"
    );
}
