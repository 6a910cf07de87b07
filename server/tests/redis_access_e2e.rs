//! Reaching Redis safely, end to end with the real binary and real `redis-server`s: a
//! password that never reaches the log or argv, from a file or `REDIS_AUTH`, and
//! `rediss://` with a CA and a client certificate (certificates made here by `rcgen`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use floodgate_server::proto::rls::rate_limit_response::Code;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::certs::Ca;
use support::redis::RedisServer;
use support::{ask, descriptor, envoy_request, eventually, Server};

const PASSWORD: &str = "s3cretPW";

const CONFIG: &str = r#"
domain: access
descriptors:
  - key: k
    rate_limit: { unit: week, requests_per_unit: 3 }
"#;

fn config() -> (tempfile::TempDir, PathBuf) {
    support::config_file("access.yaml", CONFIG)
}

/// Five requests on one fresh key: the limit admits exactly three, so Redis both
/// answered and counted.
async fn three_of_five(server: &Server, value: &str) {
    eventually(Duration::from_secs(20), "the store up", || async {
        server.get("/healthz").await.0 == 200
    })
    .await;
    let mut client = server.client().await;
    let mut admitted = 0;
    for _ in 0..5 {
        let r = ask(
            &mut client,
            envoy_request("access", vec![descriptor(&[("k", value)])]),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}; log:\n{}", server.log()));
        admitted += usize::from(r.overall_code == Code::Ok as i32);
    }
    assert_eq!(admitted, 3, "log:\n{}", server.log());
}

/// Every call fails as the store's failure: `UNAVAILABLE`, for Envoy's failure mode.
async fn unavailable(server: &Server) {
    let mut client = server.client().await;
    for _ in 0..3 {
        let e = ask(
            &mut client,
            envoy_request("access", vec![descriptor(&[("k", "x")])]),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    }
}

#[tokio::test]
async fn a_password_in_the_url_never_reaches_the_log() {
    let redis = RedisServer::start_with(&["--requirepass", PASSWORD]);
    let (_dir, path) = config();
    let url = format!("redis://default:{PASSWORD}@127.0.0.1:{}/0", redis.port);
    let server = Server::start(&path, &["--redis-url", &url]);
    three_of_five(&server, "url").await;
    let log = server.log();
    assert!(
        !log.contains(PASSWORD),
        "the password is in the log:\n{log}"
    );
    assert!(log.contains("redis://default:***@127.0.0.1"), "{log}");
    assert!(
        log.contains("the Redis password is on the command line"),
        "{log}"
    );
}

#[tokio::test]
async fn a_malformed_url_with_a_password_is_refused_without_showing_it() {
    let (_dir, path) = config();
    let out = std::process::Command::new(support::BIN)
        .arg("--config")
        .arg(&path)
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .args(["--redis-url", &format!("redis://u:{PASSWORD}@h:notaport")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--redis-url redis://u:***@h:notaport"),
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[tokio::test]
async fn the_password_from_a_file_or_redis_auth_never_on_argv() {
    let redis = RedisServer::start_with(&["--requirepass", PASSWORD]);
    let (dir, path) = config();
    let file = dir.path().join("redis-password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let from_file = Server::start(
        &path,
        &[
            "--redis-url",
            &redis.url(),
            "--redis-password-file",
            file.to_str().unwrap(),
        ],
    );
    three_of_five(&from_file, "file").await;
    assert!(!from_file.argv().contains(PASSWORD), "{}", from_file.argv());

    // The reference's variables alone: REDIS_URL in its HOST:PORT form, REDIS_AUTH.
    let from_env = Server::start_env(
        &path,
        &[],
        &[
            ("REDIS_URL", &format!("127.0.0.1:{}", redis.port)),
            ("REDIS_AUTH", PASSWORD),
        ],
    );
    three_of_five(&from_env, "env").await;
    assert!(!from_env.argv().contains(PASSWORD));
    assert!(!from_env.log().contains(PASSWORD), "{}", from_env.log());

    // A wrong password: every call UNAVAILABLE, so Envoy's failure mode applies.
    let wrong = Server::start_env(
        &path,
        &["--redis-url", &redis.url()],
        &[("REDIS_AUTH", "default:nope")],
    );
    unavailable(&wrong).await;
}

/// A CA, Redis's certificate for 127.0.0.1, and a client certificate.
struct Pki {
    ca: Ca,
    redis: support::certs::Leaf,
    client: support::certs::Leaf,
}

fn pki(redis_names: &[&str]) -> Pki {
    let ca = Ca::new("test redis CA");
    Pki {
        redis: ca.leaf("redis", redis_names),
        client: ca.leaf("client", &["floodgate-server"]),
        ca,
    }
}

/// A Redis speaking only TLS with a certificate for `names` (client certificates
/// required when `auth_clients`), and its `rediss://` URL.
fn tls_redis(names: &[&str], auth_clients: bool) -> (Pki, RedisServer, String) {
    let pki = pki(names);
    let redis = RedisServer::start_tls(
        &pki.ca.cert(),
        (&pki.redis.cert, &pki.redis.key),
        (&pki.client.cert, &pki.client.key),
        auth_clients,
        &[],
    );
    let url = format!("rediss://127.0.0.1:{}", redis.port);
    (pki, redis, url)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test]
async fn rediss_with_a_ca_file_and_a_client_certificate() {
    let (pki, redis, url) = tls_redis(&["127.0.0.1", "localhost"], true);
    let (_dir, path) = config();
    let ca = pki.ca.cert();
    let server = Server::start(
        &path,
        &[
            "--redis-url",
            &url,
            "--redis-tls-ca-file",
            s(&ca),
            "--redis-tls-cert-file",
            s(&pki.client.cert),
            "--redis-tls-key-file",
            s(&pki.client.key),
        ],
    );
    three_of_five(&server, "flags").await;

    // The reference's variables: REDIS_TLS and REDIS_TLS_* name the same files.
    let env = Server::start_env(
        &path,
        &[],
        &[
            ("REDIS_URL", &format!("127.0.0.1:{}", redis.port)),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", s(&ca)),
            ("REDIS_TLS_CLIENT_CERT", s(&pki.client.cert)),
            ("REDIS_TLS_CLIENT_KEY", s(&pki.client.key)),
        ],
    );
    three_of_five(&env, "env").await;

    // Without the client certificate Redis (tls-auth-clients yes) refuses the handshake.
    let no_cert = Server::start(&path, &["--redis-url", &url, "--redis-tls-ca-file", s(&ca)]);
    unavailable(&no_cert).await;
    assert_eq!(no_cert.get("/healthz").await.0, 503);

    // A server certificate from another CA is not trusted.
    let other = Ca::new("another CA");
    let untrusted = Server::start(
        &path,
        &[
            "--redis-url",
            &url,
            "--redis-tls-ca-file",
            s(&other.cert()),
            "--redis-tls-cert-file",
            s(&pki.client.cert),
            "--redis-tls-key-file",
            s(&pki.client.key),
        ],
    );
    unavailable(&untrusted).await;
    assert_eq!(untrusted.get("/healthz").await.0, 503);

    // Plaintext to a TLS port gets nowhere either.
    let plain = Server::start(
        &path,
        &["--redis-url", &format!("redis://127.0.0.1:{}", redis.port)],
    );
    unavailable(&plain).await;
}

#[tokio::test]
async fn skipping_the_host_name_check_still_checks_the_chain() {
    // Redis's certificate names another host than the one dialled.
    let (pki, _redis, url) = tls_redis(&["redis.internal.example"], false);
    let (_dir, path) = config();
    let ca = pki.ca.cert();
    let checked = Server::start(&path, &["--redis-url", &url, "--redis-tls-ca-file", s(&ca)]);
    unavailable(&checked).await;
    let skipped = Server::start(
        &path,
        &[
            "--redis-url",
            &url,
            "--redis-tls-ca-file",
            s(&ca),
            "--redis-tls-skip-hostname-verification",
        ],
    );
    three_of_five(&skipped, "skip").await;
    let other = Ca::new("another CA");
    let untrusted = Server::start(
        &path,
        &[
            "--redis-url",
            &url,
            "--redis-tls-ca-file",
            s(&other.cert()),
            "--redis-tls-skip-hostname-verification",
        ],
    );
    unavailable(&untrusted).await;
}
