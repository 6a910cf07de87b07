//! The server configured by Envoy Gateway's environment alone (`CONFIG_TYPE=GRPC_XDS_SOTW`,
//! `CONFIG_GRPC_XDS_*`, `USE_PROMETHEUS`, `PROMETHEUS_ADDR`): the node and headers it
//! subscribes with, a real Envoy limited across an xDS update, the reference's health path
//! and metrics listener.

use super::ads::{Management, Snapshot};
use super::{
    answer_to, clear_of_midnight, client, configs, edge, send, Envoy, Upstream, DAY, WAIT,
};
use floodgate_integration::server::Server;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reference_variables_alone_configure_the_client() {
    let (push, snapshot) = watch::channel::<Snapshot>(None);
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let ads = Management::start(any, snapshot, seen_tx, Arc::default()).await;
    push.send_replace(Some(("1".into(), edge(&[("acme", 2, DAY)]))));
    let server_url = ads.addr.to_string();
    // A port for the reference's metrics listener (Envoy Gateway's is :19001).
    let prometheus = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let prometheus_addr = prometheus.to_string();
    let server = Server::start_without_file(
        &[],
        &[
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", &prometheus_addr),
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", &server_url),
            ("CONFIG_GRPC_XDS_NODE_ID", "envoy-gateway"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "cluster=edge"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "x-xds-token:s3cret",
            ),
        ],
    );
    let (grpc, http) = (server.grpc(), server.http());
    let first = tokio::time::timeout(WAIT, seen.recv())
        .await
        .expect("a subscription")
        .unwrap();
    assert_eq!(
        first.token.as_deref(),
        Some("s3cret"),
        "the additional header"
    );
    let node = first.request.node.expect("node");
    assert_eq!(node.id, "envoy-gateway");
    assert!(node
        .metadata
        .is_some_and(|m| m.fields.contains_key("cluster")));
    assert_eq!(
        answer_to(&mut seen, "nonce-1").await.request.version_info,
        "1"
    );

    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::native_ratelimit("edge", "x-tenant-id", "tenant", upstream.addr(), grpc),
        1,
    )
    .await;
    let ingress = envoy.url("ingress", "/");
    clear_of_midnight().await;
    assert_eq!(send(&ingress, "acme", 3).await, (2, 1));
    // An update as Envoy Gateway pushes one when a policy changes: acme's limit is
    // raised (its count starts afresh), globex is new.
    push.send_replace(Some((
        "2".into(),
        edge(&[("acme", 4, DAY), ("globex", 1, DAY)]),
    )));
    assert_eq!(
        answer_to(&mut seen, "nonce-2").await.request.version_info,
        "2"
    );
    assert_eq!(send(&ingress, "acme", 6).await, (4, 2), "acme's new limit");
    assert_eq!(send(&ingress, "globex", 2).await, (1, 1), "globex's limit");
    assert_eq!(
        upstream.count(),
        2 + 4 + 1,
        "only admitted requests reach it"
    );
    // The reference's health path, for probes written for its image.
    let probe = client()
        .get(format!("http://{http}/healthcheck"))
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);
    assert_eq!(probe.text().await.unwrap(), "ok");
    // The metrics on their own listener too, the reference's series among them.
    let scraped = client()
        .get(format!("http://{prometheus}/metrics"))
        .send()
        .await
        .unwrap();
    let text = scraped.text().await.unwrap();
    assert!(
        text.contains("floodgate_xds_updates_total{result=\"applied\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("ratelimit_service_rate_limit_total_hits"),
        "{text}"
    );
    ads.stop().await;
}
