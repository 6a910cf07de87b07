//! The over-limit cache end to end: a real Envoy loading floodgate.wasm, the real
//! floodgate-server (memory store, fixed windows that report the window's end as
//! `duration_until_reset`) and an upstream that counts. Calls are read from the server's
//! own `/metrics`, never inferred from the filter's.

use floodgate_integration::client::{get, statuses, Reply};
use floodgate_integration::{client, configs, wait, Envoy, Server, Upstream};
use futures::future::join_all;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A fixed window of an hour: the tests using it keep clear of its end
/// ([`clear_of_the_hours_end`]), so their count never starts afresh mid-test.
const TEN_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 10
";

const ONE_PER_SECOND: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 1
";

/// One global rule on `x-tenant-id` with an `x-cost` header; the cache on or off.
fn plugin(cache: bool) -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2_000,
                "failure_mode": "deny", "cache_over_limit": cache},
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "cost": {"header": "x-cost"},
            "global": {}
        }],
        "failure_status": 503
    })
}

/// Calls the server answered, by result.
async fn calls(server: &Server) -> (u64, u64) {
    let ok = server
        .metric(r#"floodgate_requests_total{result="ok"}"#)
        .await;
    let over = server
        .metric(r#"floodgate_requests_total{result="over_limit"}"#)
        .await;
    (ok as u64, over as u64)
}

/// `total` GETs for tenant `acme`, from `clients` clients each sending one at a time.
async fn storm(url: &str, clients: usize, total: usize) -> Vec<Reply> {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks = (0..clients).map(|_| {
        let (next, url, c) = (next.clone(), url.to_string(), client());
        tokio::spawn(async move {
            let mut replies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < total {
                replies.push(get(&c, &url, &[("x-tenant-id", "acme")]).await);
            }
            replies
        })
    });
    join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.expect("client task"))
        .collect()
}

/// Returns once at least 30 s are left in the current hour: more than a storm takes on a
/// loaded machine. So a test on [`TEN_PER_HOUR`] counts within one window.
async fn clear_of_the_hours_end() {
    wait::clear_of_window_end(Duration::from_secs(3_600), Duration::from_secs(30)).await;
}

async fn start(limits: &str, cache: bool) -> (Server, Upstream, Envoy) {
    let server = Server::start(limits, &[]);
    let upstream = Upstream::start().await;
    let yaml = configs::floodgate_global(&plugin(cache), upstream.addr(), server.grpc());
    let envoy = Envoy::start(&yaml, 2).await;
    (server, upstream, envoy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_over_limit_storm_is_answered_from_the_cache() {
    let (server, upstream, envoy) = start(TEN_PER_HOUR, true).await;
    clear_of_the_hours_end().await;
    let replies = storm(&envoy.url("ingress", "/"), 16, 3_000).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&200), Some(&10), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&2_990), "{counts:?}");
    assert_eq!(upstream.count(), 10);
    let (ok, over) = calls(&server).await;
    assert_eq!(ok, 10);
    let without_call = 2_990 - over;
    assert!(
        without_call * 100 >= 2_990 * 99,
        "{without_call} of 2990 rejections without a call ({over} calls said over limit)"
    );
    // The filter counts the same: every rejection is either a call or the cache.
    let stat = "wasmcustom.floodgate.over_limit_cached";
    wait::until(
        "the cached rejections counted",
        Duration::from_secs(10),
        || async { (envoy.stat(stat).await == Some(without_call)).then_some(()) },
    )
    .await;
    envoy
        .expect_stat("wasmcustom.floodgate.rls.calls", ok + over)
        .await;
    for r in replies.iter().filter(|r| r.status == 429) {
        let wait: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .expect("seconds");
        assert!((1..=3_600).contains(&wait), "retry-after {wait}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(r.header("x-ratelimit-limit"), Some("10"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_cache_off_the_storm_makes_a_call_per_request() {
    let (server, upstream, envoy) = start(TEN_PER_HOUR, false).await;
    clear_of_the_hours_end().await;
    let replies = storm(&envoy.url("ingress", "/"), 16, 3_000).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&429), Some(&2_990), "{counts:?}");
    assert_eq!(upstream.count(), 10);
    assert_eq!(calls(&server).await, (10, 2_990));
    envoy
        .expect_stat("wasmcustom.floodgate.rls.calls", 3_000)
        .await;
    assert_eq!(
        envoy.stat("wasmcustom.floodgate.over_limit_cached").await,
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cheaper_request_after_a_cached_costly_denial_asks_the_service() {
    let (server, _upstream, envoy) = start(TEN_PER_HOUR, true).await;
    clear_of_the_hours_end().await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let send = |cost: &'static str| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            get(&c, &url, &[("x-tenant-id", "acme"), ("x-cost", cost)])
                .await
                .status
        }
    };
    // The window is full: no hit fits until it ends, whatever the service's way of
    // reporting `duration_until_reset` for a costly denial.
    assert_eq!(send("10").await, 200);
    assert_eq!(send("10").await, 429);
    assert_eq!(calls(&server).await, (1, 1));
    // Cost 10 and more are now denied in the proxy.
    assert_eq!(send("10").await, 429);
    assert_eq!(send("11").await, 429);
    assert_eq!(calls(&server).await, (1, 1), "no call for cost >= 10");
    // A cheaper request says something the cached denial does not: it is asked about.
    assert_eq!(send("1").await, 429);
    assert_eq!(
        calls(&server).await,
        (1, 2),
        "the cost-1 request reached the service"
    );
    // Its own denial is remembered now: cost 1 and more are denied in the proxy.
    assert_eq!(send("1").await, 429);
    assert_eq!(calls(&server).await, (1, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cached_denial_expires_when_the_window_ends() {
    let (server, upstream, envoy) = start(ONE_PER_SECOND, true).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let acme = [("x-tenant-id", "acme")];
    // Two requests in one window: the second is denied until the window's end. (A window
    // that ends between them admits the second; start over in the next one.)
    let denied = wait::until(
        "a denial within one window",
        Duration::from_secs(10),
        || async {
            let first = get(&c, &url, &acme).await;
            let second = get(&c, &url, &acme).await;
            (first.status == 200 && second.status == 429).then_some(second)
        },
    )
    .await;
    assert_eq!(denied.header("retry-after"), Some("1"));
    let calls_then = calls(&server).await;
    let cached = get(&c, &url, &acme).await;
    if calls(&server).await == calls_then {
        assert_eq!(cached.status, 429, "rejected from the cache");
    }
    // When the window ends, the next request is asked about and admitted.
    let admitted_before = upstream.count();
    wait::until(
        "a request admitted after the window",
        Duration::from_secs(10),
        || async { (get(&c, &url, &acme).await.status == 200).then_some(()) },
    )
    .await;
    assert_eq!(upstream.count(), admitted_before + 1);
    assert!(calls(&server).await.0 > calls_then.0);
}
