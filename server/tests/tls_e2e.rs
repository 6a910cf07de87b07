//! TLS and mutual TLS on the gRPC port, end to end with the real binary and tonic clients
//! over rustls: certificates made here by `rcgen`, rotated on disk under a live
//! connection, identities refused at the handshake, and charges and quota requests
//! limited to named identities.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::certs::{Ca, Leaf};
use support::{descriptor, envoy_request, eventually, Server};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const CONFIG: &str = r#"
domain: tls
descriptors:
  - key: k
    rate_limit: { unit: week, requests_per_unit: 1000 }
    quota: { requests: 10, valid_ms: 60000 }
"#;

const GATEWAY: &str = "spiffe://cluster.local/ns/edge/sa/gateway";
const LLM_GATEWAY: &str = "spiffe://cluster.local/ns/llm/sa/gateway";
const STRANGER: &str = "spiffe://cluster.local/ns/other/sa/job";

struct Setup {
    ca: Ca,
    server_leaf: Leaf,
    _dir: tempfile::TempDir,
    config: PathBuf,
}

fn setup() -> Setup {
    let ca = Ca::new("test gRPC CA");
    let server_leaf = ca.leaf("server", &["localhost", "127.0.0.1"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tls.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    Setup {
        ca,
        server_leaf,
        _dir: dir,
        config,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A TLS client trusting `ca`, presenting `identity` (certificate and key files) if any.
async fn client(
    server: &Server,
    ca: &Path,
    identity: Option<&Leaf>,
) -> Result<RateLimitServiceClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(ca).unwrap()))
        .domain_name("localhost");
    if let Some(leaf) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(&leaf.cert).unwrap(),
            std::fs::read(&leaf.key).unwrap(),
        ));
    }
    let channel = Channel::from_shared(format!("https://{}", server.grpc))
        .unwrap()
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await?;
    Ok(RateLimitServiceClient::new(channel))
}

fn request() -> RateLimitRequest {
    envoy_request("tls", vec![descriptor(&[("k", "v")])])
}

async fn call(
    c: &mut RateLimitServiceClient<Channel>,
    headers: &[(&'static str, &'static str)],
) -> Result<RateLimitResponse, tonic::Status> {
    let mut r = tonic::Request::new(request());
    for (k, v) in headers {
        r.metadata_mut().insert(*k, v.parse().unwrap());
    }
    c.should_rate_limit(r).await.map(|r| r.into_inner())
}

async fn ok(c: &mut RateLimitServiceClient<Channel>) {
    let r = call(c, &[]).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
}

/// The handshake fails: tonic reports it at connect, or (TLS 1.3: the client finishes
/// before the server has checked its certificate) as a transport error of the first call.
async fn refused(server: &Server, ca: &Path, identity: Option<&Leaf>) {
    if let Ok(mut c) = client(server, ca, identity).await {
        let e = call(&mut c, &[]).await.unwrap_err();
        assert!(
            matches!(
                e.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
            ),
            "{e:?}"
        );
    }
}

fn tls_flags(setup: &Setup) -> Vec<String> {
    vec![
        "--grpc-tls-cert-file".into(),
        s(&setup.server_leaf.cert).into(),
        "--grpc-tls-key-file".into(),
        s(&setup.server_leaf.key).into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn server_tls_refuses_plaintext_and_serves_tls() {
    let setup = setup();
    let server = Server::start(&setup.config, &refs(&tls_flags(&setup)));
    let mut c = client(&server, &setup.ca.cert(), None).await.unwrap();
    ok(&mut c).await;
    // A plaintext (h2c) client gets nowhere.
    let plain = RateLimitServiceClient::connect(format!("http://{}", server.grpc)).await;
    if let Ok(mut plain) = plain {
        assert!(plain.should_rate_limit(request()).await.is_err());
    }
    // A client that does not trust the server's CA refuses it.
    let other = Ca::new("another CA");
    assert!(client(&server, &other.cert(), None).await.is_err());
    assert_eq!(
        server.metric("floodgate_tls_handshakes_total").await,
        Some(1.0)
    );
    assert!(
        server
            .metric("floodgate_tls_handshake_errors_total{reason=\"protocol\"}")
            .await
            >= Some(1.0),
        "the plaintext client's"
    );
    // The HTTP port stays plain, on its own bind.
    assert_eq!(server.get("/healthz").await.0, 200);
}

#[tokio::test]
async fn mutual_tls_and_the_identity_allow_list_refuse_at_the_handshake() {
    let setup = setup();
    let mut flags = tls_flags(&setup);
    flags.extend([
        "--grpc-tls-client-ca-file".to_owned(),
        s(&setup.ca.cert()).to_owned(),
        "--grpc-tls-client-identities".to_owned(),
        format!("{GATEWAY},spiffe://cluster.local/ns/llm/*"),
    ]);
    let server = Server::start(&setup.config, &refs(&flags));
    let ca = setup.ca.cert();
    for allowed in [GATEWAY, LLM_GATEWAY] {
        let leaf = setup.ca.leaf("allowed", &[allowed]);
        let mut c = client(&server, &ca, Some(&leaf)).await.unwrap();
        ok(&mut c).await;
    }
    // No certificate; one from another CA; one this CA signed for someone not listed.
    refused(&server, &ca, None).await;
    let other = Ca::new("another CA");
    refused(&server, &ca, Some(&other.leaf("untrusted", &[GATEWAY]))).await;
    refused(&server, &ca, Some(&setup.ca.leaf("stranger", &[STRANGER]))).await;
    for (reason, at_least) in [
        ("no_client_certificate", 1.0),
        ("untrusted_certificate", 1.0),
        ("identity_not_allowed", 1.0),
    ] {
        let n = server
            .metric(&format!(
                "floodgate_tls_handshake_errors_total{{reason=\"{reason}\"}}"
            ))
            .await;
        assert!(n >= Some(at_least), "{reason}: {n:?}\n{}", server.log());
    }
    assert_eq!(
        server.metric("floodgate_tls_handshakes_total").await,
        Some(2.0)
    );
}

#[tokio::test]
async fn rotated_certificates_apply_to_new_connections_and_drop_none() {
    let setup = setup();
    let server = Server::start(&setup.config, &refs(&tls_flags(&setup)));
    let mut established = client(&server, &setup.ca.cert(), None).await.unwrap();
    ok(&mut established).await;

    // cert-manager's way: a new certificate (here from a new CA) written over the files.
    let next = Ca::new("next CA");
    let (cert, key) = next.leaf_pem(&["localhost"]);
    std::fs::write(&setup.server_leaf.key, key).unwrap();
    std::fs::write(&setup.server_leaf.cert, cert).unwrap();
    eventually(Duration::from_secs(20), "the reload", || async {
        server
            .metric("floodgate_tls_reloads_total{result=\"success\"}")
            .await
            >= Some(1.0)
    })
    .await;

    // New connections get the new certificate; the established one keeps working.
    let mut fresh = client(&server, &next.cert(), None).await.unwrap();
    ok(&mut fresh).await;
    assert!(client(&server, &setup.ca.cert(), None).await.is_err());
    for _ in 0..3 {
        ok(&mut established).await;
    }
    assert_eq!(
        server.metric("floodgate_tls_handshakes_total").await,
        Some(2.0)
    );

    // A broken change (a key that does not match) keeps the current certificate.
    let (_, other_key) = next.leaf_pem(&["localhost"]);
    std::fs::write(&setup.server_leaf.key, other_key).unwrap();
    eventually(Duration::from_secs(20), "the refused reload", || async {
        server
            .metric("floodgate_tls_reloads_total{result=\"failure\"}")
            .await
            >= Some(1.0)
    })
    .await;
    let mut still = client(&server, &next.cert(), None).await.unwrap();
    ok(&mut still).await;
}

#[tokio::test]
async fn only_named_identities_may_charge_or_lease() {
    let setup = setup();
    let mut flags = tls_flags(&setup);
    flags.extend([
        "--grpc-tls-client-ca-file".to_owned(),
        s(&setup.ca.cert()).to_owned(),
        "--charge-identities".to_owned(),
        LLM_GATEWAY.to_owned(),
        "--quota-identities".to_owned(),
        GATEWAY.to_owned(),
    ]);
    let server = Server::start(&setup.config, &refs(&flags));
    let ca = setup.ca.cert();
    let mut gateway = client(&server, &ca, Some(&setup.ca.leaf("gw", &[GATEWAY])))
        .await
        .unwrap();
    let mut llm = client(&server, &ca, Some(&setup.ca.leaf("llm", &[LLM_GATEWAY])))
        .await
        .unwrap();

    // Charges: the LLM gateway's counts; the other gateway's is refused.
    let e = call(&mut gateway, &[("x-floodgate-charge", "1")])
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    call(&mut llm, &[("x-floodgate-charge", "1")])
        .await
        .unwrap();

    // Leases: the gateway gets a grant; the LLM gateway a plain admission.
    let r = call(&mut gateway, &[("x-floodgate-quota", "0")])
        .await
        .unwrap();
    assert!(r.statuses[0].quota.is_some(), "{r:?}");
    let r = call(&mut llm, &[("x-floodgate-quota", "0")]).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(r.statuses[0].quota.is_none(), "{r:?}");

    for call in ["charge", "quota"] {
        let n = server
            .metric(&format!(
                "floodgate_identity_refusals_total{{call=\"{call}\"}}"
            ))
            .await;
        assert_eq!(n, Some(1.0), "{call}");
    }
}

#[tokio::test]
async fn a_stalled_handshake_holds_nobody_up_and_is_closed_in_time() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let setup = setup();
    let mut flags = tls_flags(&setup);
    flags.extend(["--handshake-timeout-ms".to_owned(), "1000".to_owned()]);
    let server = Server::start(&setup.config, &refs(&flags));
    // Ten connections that start a TLS record and stop there.
    let mut stalled = Vec::new();
    for _ in 0..10 {
        let mut s = tokio::net::TcpStream::connect(server.grpc).await.unwrap();
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).await.unwrap();
        stalled.push(s);
    }
    // Handshakes run concurrently: a real client is served meanwhile.
    let mut c = client(&server, &setup.ca.cert(), None).await.unwrap();
    ok(&mut c).await;
    // Each stalled one is closed by the handshake timer (TLS and preface together).
    for mut s in stalled {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
            .await
            .expect("closed in time");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    }
    assert_eq!(
        server
            .metric("floodgate_connections_closed_total{reason=\"handshake_timeout\"}")
            .await,
        Some(10.0)
    );
    ok(&mut c).await;
}
