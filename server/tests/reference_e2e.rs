//! End to end: the real binary answers as envoyproxy/ratelimit does over gRPC, on
//! the memory store and on a real Redis, and honours the operator flags a migration needs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use floodgate_server::proto::rls::rate_limit_response::{rate_limit::Unit, Code};
use floodgate_server::proto::RateLimitDescriptor;
use support::redis::RedisServer;
use support::{ask, descriptor, envoy_request, Server};

// Long units, so no window boundary falls inside a test run.
const CONFIG: &str = r#"
domain: migrate
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2, name: per-user }
  - key: plan
    rate_limit: { unit: hour, requests_per_unit: 100 }
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    support::config_file("migrate.yaml", CONFIG)
}

fn overridden(entries: &[(&str, &str)], requests_per_unit: u32, unit: Unit) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(RateLimitOverride {
            requests_per_unit,
            unit: unit as i32,
        }),
        ..descriptor(entries)
    }
}

/// The protocol rows of the issue, asked of one running server.
async fn answers_like_the_reference(server: &Server) {
    let mut client = server.client().await;
    // An empty descriptor list is an error, with the reference's message.
    let e = ask(&mut client, envoy_request("migrate", vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(e.message(), "rate limit descriptor list must not be empty");

    // A descriptor's own limit replaces the configured one (2 per hour): 3 per day,
    // unnamed, on a counter of its own.
    let over = || envoy_request("migrate", vec![overridden(&[("user", "o")], 3, Unit::Day)]);
    for left in [2, 1, 0] {
        let r = ask(&mut client, over()).await.unwrap();
        assert_eq!(r.statuses[0].limit_remaining, left);
        let limit = r.statuses[0].current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("", 3, Unit::Day as i32)
        );
    }
    let r = ask(&mut client, over()).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let plain = envoy_request("migrate", vec![descriptor(&[("user", "o")])]);
    let r = ask(&mut client, plain).await.unwrap();
    assert_eq!(
        r.statuses[0].limit_remaining, 1,
        "the configured counter is its own"
    );

    // A rejected request: the over descriptor reports 0, the other what it really has.
    let both = || {
        envoy_request(
            "migrate",
            vec![descriptor(&[("plan", "p")]), descriptor(&[("user", "r")])],
        )
    };
    for _ in 0..2 {
        ask(&mut client, both()).await.unwrap();
    }
    let r = ask(&mut client, both()).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(
        (r.statuses[0].limit_remaining, r.statuses[1].limit_remaining),
        (98, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_rows_hold_on_the_memory_store() {
    let (_dir, path) = config();
    answers_like_the_reference(&Server::start(&path, &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_rows_hold_on_redis() {
    let redis = RedisServer::start();
    let (_dir, path) = config();
    answers_like_the_reference(&Server::start(&path, &["--redis-url", &redis.url()])).await;
}

/// `--counting per-descriptor`: the plan limit drains although every request is rejected.
async fn counts_per_descriptor(server: &Server) {
    let mut client = server.client().await;
    let both = || {
        envoy_request(
            "migrate",
            vec![descriptor(&[("plan", "q")]), descriptor(&[("user", "q")])],
        )
    };
    for _ in 0..5 {
        ask(&mut client, both()).await.unwrap();
    }
    let r = ask(&mut client, both()).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(
        r.statuses[0].limit_remaining, 94,
        "six requests, two admitted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_descriptor_counting_on_both_stores() {
    let (_dir, path) = config();
    counts_per_descriptor(&Server::start(&path, &["--counting", "per-descriptor"])).await;
    let redis = RedisServer::start();
    let url = redis.url();
    counts_per_descriptor(&Server::start(
        &path,
        &["--redis-url", &url, "--counting", "per-descriptor"],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_headers_and_near_limit_flags() {
    let (_dir, path) = config();
    let server = Server::start(
        &path,
        &[
            "--shadow-mode",
            "--limit-response-headers",
            "--reset-header",
            "X-RateLimit-Reset",
            "--near-limit-ratio",
            "0.5",
        ],
    );
    let mut client = server.client().await;
    let user = || envoy_request("migrate", vec![descriptor(&[("user", "s")])]);
    for _ in 0..3 {
        ask(&mut client, user()).await.unwrap();
    }
    let r = ask(&mut client, user()).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32, "--shadow-mode answers OK");
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(headers[0], ("RateLimit-Limit", "2"));
    assert_eq!(headers[1], ("RateLimit-Remaining", "0"));
    assert_eq!(headers[2].0, "X-RateLimit-Reset");
    let reset: u64 = headers[2].1.parse().unwrap();
    assert!((1..=3600).contains(&reset), "{reset}");
    assert_eq!(
        server
            .metric("floodgate_requests_total{result=\"shadow_over_limit\"}")
            .await,
        Some(2.0)
    );
    assert_eq!(
        server
            .metric("floodgate_near_limit_total{domain=\"migrate\"}")
            .await,
        Some(1.0),
        "the second request left 2 of 2 used, above ⌊2 × 0.5⌋"
    );
}

#[test]
fn flags_that_cannot_work_are_refused() {
    let (_dir, path) = config();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_floodgate-server"))
            .arg("--config")
            .arg(&path)
            .args(args)
            .arg("--check")
            .output()
            .unwrap()
    };
    let out = run(&["--near-limit-ratio", "1.5"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"1.5\" is not a ratio between 0 and 1"),
        "{err}"
    );
    let out = run(&["--response-headers", "--limit-response-headers"]);
    assert!(!out.status.success(), "two header styles at once");
    assert!(run(&["--counting", "per-descriptor"]).status.success());
}
