//! floodgate-server as a drop-in rate limit service behind stock Envoy: its native
//! `envoy.filters.http.ratelimit` filter asks our server, and requests over the limit
//! never reach the upstream.

use floodgate_integration::client::statuses;
use floodgate_integration::{burst, client, configs, wait, Envoy, Server, Upstream};
use std::time::Duration;

/// envoyproxy/ratelimit's own format and algorithm, a fixed window (here of an hour): the
/// test keeps clear of the window's end, so its count never starts afresh mid-burst.
const LIMITS: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 5
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoys_own_ratelimit_filter_enforces_floodgate_server_limits() {
    let server = Server::start(LIMITS, &[]);
    let upstream = Upstream::start().await;
    let yaml = configs::native_ratelimit(
        "edge",
        "x-tenant-id",
        "tenant",
        upstream.addr(),
        server.grpc(),
    );
    let envoy = Envoy::start(&yaml, 2).await;
    let url = envoy.url("ingress", "/");

    // At least 20 s left in the hour: far more than the burst takes.
    wait::clear_of_window_end(Duration::from_secs(3_600), Duration::from_secs(20)).await;
    let replies = burst(&client(), &url, &[("x-tenant-id", "acme")], 20).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&200), Some(&5), "{counts:?}\n{}", server.log());
    assert_eq!(counts.get(&429), Some(&15), "{counts:?}");
    assert_eq!(
        upstream.count(),
        5,
        "rejected requests must not reach the upstream"
    );
    let rejected = replies
        .iter()
        .find(|r| r.status == 429)
        .expect("a rejection");
    assert_eq!(
        rejected
            .header("x-ratelimit-limit")
            .map(|v| v.starts_with('5')),
        Some(true)
    );

    // Another tenant has its own counter.
    let other = burst(&client(), &url, &[("x-tenant-id", "globex")], 3).await;
    assert_eq!(statuses(&other).get(&200), Some(&3));
    assert_eq!(
        server
            .metric("floodgate_requests_total{result=\"over_limit\"}")
            .await,
        15.0
    );
}
