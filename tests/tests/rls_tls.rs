//! A real Envoy calls floodgate-server over TLS and mutual TLS (`transport_socket` on the
//! RLS cluster), with floodgate's filter in global mode and with Envoy's native
//! `ratelimit` filter. Clients the server must refuse (no certificate, one from another
//! CA, one whose identity is not on the list) fail at the handshake, and the filter takes
//! its failure mode, counted. A certificate rotated under running proxies applies to new
//! connections and loses no count. Certificates are made here by `rcgen`.

#[path = "../../server/tests/support/certs.rs"]
#[allow(dead_code)]
mod certs;

use certs::{Ca, Leaf};
use floodgate_integration::client::statuses;
use floodgate_integration::{burst, client, configs, wait, Envoy, Server, Upstream};
use std::path::Path;
use std::time::Duration;

/// A token bucket, not the default fixed window: a test crossing a minute's boundary
/// would find a fixed window's counter reset (5 more admitted), and a bucket of 5
/// refilling 5 an hour gives back no whole request within a test.
const FIVE_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 5
      algorithm: token_bucket
";

/// The identity the proxies' certificates carry.
const GATEWAY: &str = "spiffe://cluster.local/ns/edge/sa/gateway";

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// floodgate-server over TLS with `server_leaf`; with `client_ca`, mutual TLS allowing
/// only [`GATEWAY`].
fn server(server_leaf: &Leaf, client_ca: Option<&Path>) -> Server {
    let mut flags = vec![
        "--grpc-tls-cert-file",
        s(&server_leaf.cert),
        "--grpc-tls-key-file",
        s(&server_leaf.key),
    ];
    if let Some(ca) = client_ca {
        flags.extend(["--grpc-tls-client-ca-file", s(ca)]);
        flags.extend(["--grpc-tls-client-identities", GATEWAY]);
    }
    Server::start(FIVE_PER_HOUR, &flags)
}

/// 20 requests for `tenant`: exactly 5 pass, and only those reach the upstream.
async fn limited(envoy: &Envoy, upstream: &Upstream, tenant: &str, server: &Server) {
    let replies = burst(
        &client(),
        &envoy.url("ingress", "/"),
        &[("x-tenant-id", tenant)],
        20,
    )
    .await;
    let counts = statuses(&replies);
    assert_eq!(
        counts.get(&200),
        Some(&5),
        "{counts:?}\n{}\n{}",
        server.log(),
        envoy.log()
    );
    assert_eq!(counts.get(&429), Some(&15), "{counts:?}");
    assert_eq!(upstream.count_for(tenant), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_filter_and_the_native_filter_over_tls_and_mutual_tls() {
    let ca = Ca::new("rls CA");
    let server_leaf = ca.leaf("rls", &["localhost"]);
    let gateway = ca.leaf("gateway", &[GATEWAY]);
    let upstream = Upstream::start().await;

    // TLS: Envoy checks the server; the server asks nothing of Envoy.
    let tls = server(&server_leaf, None);
    let plugin = configs::global_tenant_plugin();
    let yaml = configs::floodgate_global(&plugin, upstream.addr(), tls.grpc());
    let envoy = Envoy::start(&configs::rls_over_tls(&yaml, &ca.cert(), None), 2).await;
    limited(&envoy, &upstream, "tls-filter", &tls).await;

    // Mutual TLS with an allowed identity: the filter, then Envoy's native filter.
    let mtls = server(&server_leaf, Some(&ca.cert()));
    let client_cert = Some((gateway.cert.as_path(), gateway.key.as_path()));
    let yaml = configs::floodgate_global(&plugin, upstream.addr(), mtls.grpc());
    let envoy = Envoy::start(&configs::rls_over_tls(&yaml, &ca.cert(), client_cert), 2).await;
    limited(&envoy, &upstream, "mtls-filter", &mtls).await;
    let yaml = configs::native_ratelimit(
        "edge",
        "x-tenant-id",
        "tenant",
        upstream.addr(),
        mtls.grpc(),
    );
    let native = Envoy::start(&configs::rls_over_tls(&yaml, &ca.cert(), client_cert), 2).await;
    limited(&native, &upstream, "mtls-native", &mtls).await;
    assert!(mtls.metric("floodgate_tls_handshakes_total").await >= 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_proxies_fail_at_the_handshake_and_take_the_failure_mode() {
    let ca = Ca::new("rls CA");
    let server_leaf = ca.leaf("rls", &["localhost"]);
    let mtls = server(&server_leaf, Some(&ca.cert()));
    let other = Ca::new("another CA");
    let untrusted = other.leaf("untrusted", &[GATEWAY]);
    let stranger = ca.leaf("stranger", &["spiffe://cluster.local/ns/other/sa/job"]);
    let upstream = Upstream::start().await;
    let plugin = configs::global_tenant_plugin(); // failure_mode deny, status 503
    let cases: [(&str, Option<&Leaf>); 3] = [
        ("no_client_certificate", None),
        ("untrusted_certificate", Some(&untrusted)),
        ("identity_not_allowed", Some(&stranger)),
    ];
    for (reason, leaf) in cases {
        let yaml = configs::floodgate_global(&plugin, upstream.addr(), mtls.grpc());
        let client_cert = leaf.map(|l| (l.cert.as_path(), l.key.as_path()));
        let envoy = Envoy::start(&configs::rls_over_tls(&yaml, &ca.cert(), client_cert), 2).await;
        let replies = burst(
            &client(),
            &envoy.url("ingress", "/"),
            &[("x-tenant-id", reason)],
            4,
        )
        .await;
        assert_eq!(
            statuses(&replies).get(&503),
            Some(&4),
            "{reason}: {:?}",
            statuses(&replies)
        );
        envoy
            .expect_stat("wasmcustom.floodgate.failure_mode_denied", 4)
            .await;
        let refused = mtls
            .metric(&format!(
                "floodgate_tls_handshake_errors_total{{reason=\"{reason}\"}}"
            ))
            .await;
        assert!(refused >= 1.0, "{reason}: {refused}\n{}", mtls.log());
    }
    assert_eq!(upstream.count(), 0, "nothing reached the upstream");
    assert_eq!(mtls.metric("floodgate_tls_handshakes_total").await, 0.0);
}

/// cert-manager's rotation under running proxies: a new server certificate (here from a
/// new CA that the proxies' trust bundle already holds) is written over the files. New
/// connections get it (an Envoy trusting only the new CA is served), the Envoy from
/// before keeps calling, and the limit carries on exactly across the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotated_server_certificates_keep_every_envoy_limited_exactly() {
    let ca = Ca::new("rls CA");
    let next = Ca::new("next CA");
    let server_leaf = ca.leaf("rls", &["localhost"]);
    let gateway = ca.leaf("gateway", &[GATEWAY]);
    let pem = |p: &Path| std::fs::read_to_string(p).expect("CA file");
    let bundle = ca.dir().join("bundle.pem");
    std::fs::write(&bundle, pem(&ca.cert()) + &pem(&next.cert())).expect("bundle");
    let mtls = server(&server_leaf, Some(&ca.cert()));
    let upstream = Upstream::start().await;
    let plugin = configs::global_tenant_plugin();
    let yaml = configs::floodgate_global(&plugin, upstream.addr(), mtls.grpc());
    let client_cert = Some((gateway.cert.as_path(), gateway.key.as_path()));
    let url = |envoy: &Envoy| envoy.url("ingress", "/");
    let tenant = [("x-tenant-id", "rotated")];

    let before = Envoy::start(&configs::rls_over_tls(&yaml, &bundle, client_cert), 2).await;
    let replies = burst(&client(), &url(&before), &tenant, 3).await;
    assert_eq!(statuses(&replies).get(&200), Some(&3), "{}", mtls.log());

    let (cert, key) = next.leaf_pem(&["localhost"]);
    std::fs::write(&server_leaf.key, key).expect("write key");
    std::fs::write(&server_leaf.cert, cert).expect("write certificate");
    let reloads = "floodgate_tls_reloads_total{result=\"success\"}";
    wait::until(
        "the certificate reload",
        Duration::from_secs(20),
        || async { (mtls.metric(reloads).await >= 1.0).then_some(()) },
    )
    .await;

    let after = Envoy::start(&configs::rls_over_tls(&yaml, &next.cert(), client_cert), 2).await;
    let replies = burst(&client(), &url(&after), &tenant, 20).await;
    let counts = statuses(&replies);
    assert_eq!(counts.get(&200), Some(&2), "{counts:?}\n{}", after.log());
    assert_eq!(counts.get(&429), Some(&18), "{counts:?}");
    let replies = burst(&client(), &url(&before), &tenant, 4).await;
    assert_eq!(statuses(&replies).get(&429), Some(&4), "{}", before.log());
    assert_eq!(upstream.count_for("rotated"), 5);
}
