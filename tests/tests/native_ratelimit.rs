//! floodgate-server as a drop-in rate limit service behind stock Envoy: its native
//! `envoy.filters.http.ratelimit` filter asks our server, and requests over the limit
//! never reach the upstream.

use floodgate_integration::client::statuses;
use floodgate_integration::{burst, client, configs, Envoy, Server, Upstream};

const LIMITS: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: minute
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
