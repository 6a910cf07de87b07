//! Concurrency limits through the binary over gRPC: `x-floodgate-hold` and
//! `x-floodgate-release` from many callers at once, on the memory store and on two servers
//! sharing one real Redis (whose sorted set per counter is checked as documented).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::RateLimitRequest;
use std::time::Duration;
use support::redis::RedisServer;
use support::{descriptor, envoy_request, eventually, Server};
use tonic::transport::Channel;

const CONFIG: &str = r#"
domain: streams
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 5, algorithm: concurrency }
  - key: short
    rate_limit: { unit: second, requests_per_unit: 1, algorithm: concurrency }
  - key: rate
    rate_limit: { unit: hour, requests_per_unit: 1000 }
"#;

fn config() -> (tempfile::TempDir, std::path::PathBuf) {
    support::config_file("streams.yaml", CONFIG)
}

fn call(
    key: &str,
    value: &str,
    headers: &[(&'static str, &str)],
) -> tonic::Request<RateLimitRequest> {
    let mut req = tonic::Request::new(envoy_request(
        "streams",
        vec![descriptor(&[(key, value)]), descriptor(&[("rate", value)])],
    ));
    for (name, v) in headers {
        req.metadata_mut().append(*name, v.parse().unwrap());
    }
    req
}

async fn code(
    client: &mut RateLimitServiceClient<Channel>,
    req: tonic::Request<RateLimitRequest>,
) -> i32 {
    client
        .should_rate_limit(req)
        .await
        .unwrap()
        .into_inner()
        .overall_code
}

/// 40 callers over `servers` at once, each with its own id: exactly 5 hold; releasing them
/// (twice each, and ids never held) frees exactly 5 slots.
async fn exactly_the_limit_holds_at_once(servers: &[Server], tenant: &str) {
    let mut tasks = Vec::new();
    for i in 0..40 {
        let mut client = servers[i % servers.len()].client().await;
        let tenant = tenant.to_owned();
        tasks.push(tokio::spawn(async move {
            let id = format!("req-{i}");
            let ok = code(
                &mut client,
                call("tenant", &tenant, &[("x-floodgate-hold", &id)]),
            )
            .await;
            (id, ok == Code::Ok as i32)
        }));
    }
    let mut held = Vec::new();
    for t in tasks {
        let (id, ok) = t.await.unwrap();
        if ok {
            held.push(id);
        }
    }
    assert_eq!(held.len(), 5, "40 callers, a limit of 5 in flight");
    let mut client = servers[0].client().await;
    // Releases of ids that hold nothing free nothing.
    for id in ["req-999", "never"] {
        let ok = code(
            &mut client,
            call("tenant", tenant, &[("x-floodgate-release", id)]),
        )
        .await;
        assert_eq!(ok, Code::Ok as i32);
    }
    let refused = code(
        &mut client,
        call("tenant", tenant, &[("x-floodgate-hold", "late")]),
    )
    .await;
    assert_eq!(refused, Code::OverLimit as i32);
    // Each held id released twice (a retried release): five slots come back, no more.
    for id in &held {
        for server in servers {
            let mut c = server.client().await;
            let ok = code(
                &mut c,
                call("tenant", tenant, &[("x-floodgate-release", id)]),
            )
            .await;
            assert_eq!(ok, Code::Ok as i32);
        }
    }
    let mut admitted = 0;
    for i in 0..8 {
        let id = format!("again-{i}");
        admitted += usize::from(
            code(
                &mut client,
                call("tenant", tenant, &[("x-floodgate-hold", &id)]),
            )
            .await
                == Code::Ok as i32,
        );
    }
    assert_eq!(admitted, 5, "exactly the five released slots");
}

/// A hold nobody releases ends at its deadline (one second here).
async fn an_unreleased_hold_expires(server: &Server) {
    let mut client = server.client().await;
    // No hold header (Envoy's native filter): a hold of the server's own.
    assert_eq!(
        code(&mut client, call("short", "a", &[])).await,
        Code::Ok as i32
    );
    let over = client
        .should_rate_limit(call("short", "a", &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(over.overall_code, Code::OverLimit as i32);
    let reset = over.statuses[0].duration_until_reset.unwrap();
    assert!(
        reset.seconds == 0 && reset.nanos > 0,
        "{reset:?}: until the hold's deadline"
    );
    eventually(Duration::from_secs(5), "the hold's deadline", || {
        let mut client = client.clone();
        async move { code(&mut client, call("short", "a", &[])).await == Code::Ok as i32 }
    })
    .await;
}

/// Malformed ids, a header twice, both headers, release with a charge: INVALID_ARGUMENT
/// naming the header, counted.
async fn bad_hold_headers_are_invalid_argument(server: &Server) {
    let mut client = server.client().await;
    let long = "a".repeat(65);
    let cases: [(&[(&'static str, &str)], &str); 5] = [
        (
            &[("x-floodgate-hold", "a:b")],
            "x-floodgate-hold must be 1 to 64 bytes of [A-Za-z0-9._-]",
        ),
        (
            &[("x-floodgate-release", &long)],
            "x-floodgate-release must be 1 to 64 bytes of [A-Za-z0-9._-]",
        ),
        (
            &[("x-floodgate-hold", "a"), ("x-floodgate-hold", "b")],
            "x-floodgate-hold must be sent once",
        ),
        (
            &[("x-floodgate-hold", "a"), ("x-floodgate-release", "a")],
            "x-floodgate-hold and x-floodgate-release cannot be sent on one call",
        ),
        (
            &[("x-floodgate-release", "a"), ("x-floodgate-charge", "1")],
            "x-floodgate-release and x-floodgate-charge cannot be sent on one call",
        ),
    ];
    for (headers, message) in cases {
        let e = client
            .should_rate_limit(call("tenant", "bad", headers))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{headers:?}");
        assert_eq!(e.message(), message);
    }
    let errors = server
        .metric("floodgate_errors_total{kind=\"invalid_argument\"}")
        .await;
    assert_eq!(errors, Some(5.0));
    let acquired = server
        .metric("floodgate_holds_total{domain=\"streams\",event=\"acquired\"}")
        .await;
    assert_eq!(acquired, Some(0.0), "nothing was decided");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_on_the_memory_store() {
    let (_dir, path) = config();
    let server = Server::start(&path, &[]);
    bad_hold_headers_are_invalid_argument(&server).await;
    exactly_the_limit_holds_at_once(std::slice::from_ref(&server), "acme").await;
    an_unreleased_hold_expires(&server).await;
    // The first "short" hold was reclaimed by the write that took the second; once that
    // one's deadline passes too, the sweeps count the five holds of "acme" alone.
    server
        .metric_reaches("floodgate_holds_reclaimed_total", 1.0)
        .await;
    eventually(Duration::from_secs(5), "five slots in flight", || async {
        server.metric("floodgate_holds_in_flight").await == Some(5.0)
    })
    .await;
    assert_eq!(
        server
            .metric("floodgate_holds_total{domain=\"streams\",event=\"released\"}")
            .await,
        Some(7.0),
        "two unknown ids and the five held (once per server, here one)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_across_two_servers_sharing_redis() {
    let redis = RedisServer::start();
    let (_dir, path) = config();
    let url = redis.url();
    let servers = [
        Server::start(&path, &["--redis-url", &url]),
        Server::start(&path, &["--redis-url", &url, "--worker-threads", "1"]),
    ];
    bad_hold_headers_are_invalid_argument(&servers[0]).await;
    exactly_the_limit_holds_at_once(&servers, "acme").await;
    an_unreleased_hold_expires(&servers[1]).await;
    // The counter is a sorted set of "slots:id" scored by deadline (µs), expiring with
    // its latest hold.
    let mut conn = redis.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fg:v2:*:cc:5:h:-")
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(&keys[0])
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut conn)
        .unwrap();
    let mut ids: Vec<&str> = members.iter().map(|(m, _)| m.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "1:again-0",
            "1:again-1",
            "1:again-2",
            "1:again-3",
            "1:again-4"
        ]
    );
    let (time, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    for (_, score) in &members {
        let left_s = (*score as u64 / 1_000_000).saturating_sub(time);
        assert!(
            (3_590..=3_600).contains(&left_s),
            "deadline {score} µs, now {time} s"
        );
    }
    let pttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query(&mut conn).unwrap();
    assert!((3_590_000..=3_600_000).contains(&pttl), "{pttl}");
}
