//! floodgate-server configured over xDS, as Envoy Gateway configures the reference: an ADS
//! management server written here (tonic, the real state-of-the-world protocol over gRPC,
//! recording every request it receives) pushes `RateLimitConfig` resources to the real
//! floodgate-server binary, and a real Envoy's native `ratelimit` filter is limited by
//! them, exactly, across updates, a NACKed push and the management server's restart.

use floodgate_integration::client::statuses;
use floodgate_integration::server::Server;
use floodgate_integration::{burst, client, configs, wait, Envoy, Upstream};
use floodgate_server::proto::rls_conf::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

#[path = "xds_config/ads.rs"]
mod ads;
#[path = "../../server/tests/support/certs.rs"]
#[allow(dead_code)]
mod certs;
#[path = "xds_config/environment.rs"]
mod environment;
#[path = "xds_config/tls.rs"]
mod tls;
use ads::{Management, Seen, Snapshot, TYPE_URL};

const WAIT: Duration = Duration::from_secs(30);

/// One `RateLimitConfig`: domain `edge`, a per-day limit for each `tenant` value given.
fn edge(limits: &[(&str, u32, i32)]) -> Vec<prost_types::Any> {
    let descriptors = limits
        .iter()
        .map(|(tenant, rpu, unit)| RateLimitDescriptor {
            key: "tenant".into(),
            value: (*tenant).into(),
            rate_limit: Some(RateLimitPolicy {
                unit: *unit,
                requests_per_unit: *rpu,
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let resource = RateLimitConfig {
        name: "edge".into(),
        domain: "edge".into(),
        descriptors,
    };
    vec![prost_types::Any {
        type_url: TYPE_URL.into(),
        value: resource.encode_to_vec(),
    }]
}

/// A day's window: a test never straddles two, as it starts with [`clear_of_midnight`].
const DAY: i32 = RateLimitUnit::Day as i32;

/// Returns once at least 2 minutes are left before midnight UTC (a day's window ends):
/// more than a test here takes. Called before a test's first counted request, so no
/// count starts afresh mid-test; it waits only in a run started within 2 minutes of it.
async fn clear_of_midnight() {
    wait::clear_of_window_end(Duration::from_secs(86_400), Duration::from_secs(120)).await;
}

/// The next request the management server receives that answers `nonce`.
async fn answer_to(seen: &mut mpsc::UnboundedReceiver<Seen>, nonce: &str) -> Seen {
    tokio::time::timeout(WAIT, async {
        loop {
            let s = seen.recv().await.expect("the management server is gone");
            if s.request.response_nonce == nonce {
                return s;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no answer to {nonce} within {WAIT:?}"))
}

/// How many of `n` requests for `tenant` Envoy let through (200) and refused (429).
async fn send(url: &str, tenant: &str, n: usize) -> (usize, usize) {
    let replies = burst(&client(), url, &[("x-tenant-id", tenant)], n).await;
    let counts = statuses(&replies);
    let (ok, limited) = (
        counts.get(&200).copied().unwrap_or(0),
        counts.get(&429).copied().unwrap_or(0),
    );
    assert_eq!(ok + limited, n, "{tenant}: {counts:?}");
    (ok, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pushes_limit_exactly_across_updates_a_nack_and_a_management_restart() {
    let (push, snapshot) = watch::channel::<Snapshot>(None);
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let nonces = Arc::new(Mutex::new(0));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let ads = Management::start(any, snapshot.clone(), seen_tx.clone(), nonces.clone()).await;
    let ads_addr = ads.addr;

    let url = format!("http://{ads_addr}");
    let server = Server::start_without_file(
        &[
            "--config-xds",
            &url,
            "--config-xds-node-id",
            "test-node",
            "--healthy-once-configured",
            // Short waits (the reference's default is 10 s doubling to 60 s): the
            // reconnection below must come within a second or so.
            "--config-xds-backoff-initial",
            "200ms",
            "--config-xds-backoff-max",
            "1s",
        ],
        &[],
    );
    let (grpc, log) = (server.grpc(), || server.log());
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(
        &configs::native_ratelimit("edge", "x-tenant-id", "tenant", upstream.addr(), grpc),
        2,
    )
    .await;
    let ingress = envoy.url("ingress", "/");
    clear_of_midnight().await;

    // The subscription: our node, our type, wildcard, nothing applied yet.
    let first = tokio::time::timeout(WAIT, seen.recv())
        .await
        .expect("a subscription")
        .unwrap();
    assert_eq!(
        first.request.node.as_ref().map(|n| n.id.as_str()),
        Some("test-node")
    );
    assert_eq!(first.request.type_url, TYPE_URL);
    assert_eq!(
        (
            first.request.version_info.as_str(),
            first.request.response_nonce.as_str()
        ),
        ("", "")
    );

    // Before the first push every domain is unknown: answered OK, nothing limited; so
    // /healthz keeps Kubernetes' calls away (--healthy-once-configured).
    assert_eq!(send(&ingress, "acme", 3).await, (3, 0), "{}", log());
    assert_eq!(
        server.health_text().await,
        (503, "waiting: no configuration pushed yet".to_owned())
    );

    // The initial push: each limit exact.
    push.send_replace(Some((
        "v1".into(),
        edge(&[("acme", 5, DAY), ("globex", 4, DAY)]),
    )));
    let ack = answer_to(&mut seen, "nonce-1").await.request;
    assert_eq!(ack.version_info, "v1", "ACK carries the applied version");
    assert!(ack.error_detail.is_none(), "{:?}", ack.error_detail);
    assert_eq!(server.health_text().await, (200, "ok".to_owned()));
    assert_eq!(send(&ingress, "acme", 3).await, (3, 0));
    assert_eq!(send(&ingress, "globex", 2).await, (2, 0));

    // An update: acme's limit changes (its count starts afresh), globex's does not (its
    // count survives: 2 of 4 used), initech is new.
    let v2 = edge(&[("acme", 8, DAY), ("globex", 4, DAY), ("initech", 2, DAY)]);
    push.send_replace(Some(("v2".into(), v2)));
    assert_eq!(
        answer_to(&mut seen, "nonce-2").await.request.version_info,
        "v2"
    );
    assert_eq!(
        send(&ingress, "globex", 4).await,
        (2, 2),
        "globex's count survived the update"
    );
    assert_eq!(send(&ingress, "acme", 10).await, (8, 2), "acme's new limit");

    // An invalid push (a unit that does not exist): NACKed with the field path, the last
    // good version in force and enforced (initech still at 2).
    push.send_replace(Some(("v3".into(), edge(&[("acme", 100, 99)]))));
    let nack = answer_to(&mut seen, "nonce-3").await.request;
    assert_eq!(
        nack.version_info, "v2",
        "a NACK names the version still in force"
    );
    let detail = nack.error_detail.expect("a NACK carries its error");
    assert_eq!(detail.code, 3, "INVALID_ARGUMENT");
    assert!(
        detail
            .message
            .starts_with("xds:edge: descriptors[0].rate_limit.unit:"),
        "{}",
        detail.message
    );
    assert_eq!(send(&ingress, "initech", 3).await, (2, 1));
    assert_eq!(
        send(&ingress, "acme", 1).await,
        (0, 1),
        "v2's acme limit still holds"
    );
    assert_eq!(
        server
            .metric("floodgate_xds_updates_total{result=\"applied\"}")
            .await,
        2.0
    );
    assert_eq!(
        server
            .metric("floodgate_xds_updates_total{result=\"rejected\"}")
            .await,
        1.0
    );
    assert_eq!(server.metric("floodgate_xds_connected").await, 1.0);

    // The management server goes away: floodgate-server keeps limiting with v2.
    ads.stop().await;
    wait::until("the stream seen down", WAIT, || async {
        (server.metric("floodgate_xds_connected").await == 0.0).then_some(())
    })
    .await;
    assert_eq!(send(&ingress, "globex", 1).await, (0, 1));
    assert_eq!(send(&ingress, "initech", 1).await, (0, 1));

    // Back on the same port with a new version: the client reconnects, says what it has
    // (v2), and takes the push.
    let v4 = edge(&[
        ("acme", 8, DAY),
        ("globex", 4, DAY),
        ("initech", 2, DAY),
        ("hooli", 1, DAY),
    ]);
    push.send_replace(Some(("v4".into(), v4)));
    let ads = Management::start(ads_addr, snapshot.clone(), seen_tx.clone(), nonces.clone()).await;
    let restarted = std::time::Instant::now();
    let resubscribed = tokio::time::timeout(WAIT, seen.recv())
        .await
        .expect("a new subscription")
        .unwrap();
    // At most 1 s (the longest wait) and its spread: far under the default's 5 s minimum.
    assert!(
        restarted.elapsed() < Duration::from_secs(4),
        "reconnected after {:?}: the back-off flags were not honoured\n{}",
        restarted.elapsed(),
        log()
    );
    assert_eq!(resubscribed.request.version_info, "v2", "{}", log());
    assert_eq!(resubscribed.request.response_nonce, "");
    assert_eq!(
        answer_to(&mut seen, "nonce-4").await.request.version_info,
        "v4"
    );
    assert_eq!(
        send(&ingress, "hooli", 2).await,
        (1, 1),
        "the push after the restart applies"
    );
    assert_eq!(
        send(&ingress, "globex", 1).await,
        (0, 1),
        "unchanged limits kept their counts"
    );
    assert!(server.metric("floodgate_xds_reconnects_total").await >= 1.0);
    assert_eq!(server.metric("floodgate_xds_connected").await, 1.0);

    // Every request let through reached the upstream, and no other.
    assert_eq!(upstream.count(), 3 + 3 + 2 + 2 + 8 + 2 + 1, "{}", log());
    ads.stop().await;
}
