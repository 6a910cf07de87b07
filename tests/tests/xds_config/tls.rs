//! The xDS stream over mutual TLS: the management server's certificate checked against
//! `--config-xds-ca` under the name `--config-xds-san` gives, ours shown from
//! `--config-xds-cert`/`--config-xds-key`; a server whose certificate another CA signed is
//! never trusted with the configuration.

use super::ads::{Management, Snapshot};
use super::certs::Ca;
use super::{answer_to, edge, DAY, WAIT};
use floodgate_integration::server::Server;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A management server presenting a `localhost` certificate of `server_ca`, asking for a
/// client certificate of `client_ca`.
async fn management(
    server_ca: &Ca,
    client_ca: &Ca,
    snapshot: watch::Receiver<Snapshot>,
    seen: mpsc::UnboundedSender<super::Seen>,
) -> Management {
    let leaf = server_ca.leaf("xds", &["localhost"]);
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(
            std::fs::read(&leaf.cert).unwrap(),
            std::fs::read(&leaf.key).unwrap(),
        ))
        .client_ca_root(Certificate::from_pem(
            std::fs::read(client_ca.cert()).unwrap(),
        ));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    Management::start_tls(any, snapshot, seen, Arc::default(), Some(tls)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stream_runs_over_mutual_tls_and_an_untrusted_server_gets_nothing() {
    let ca = Ca::new("xds-ca");
    let client = ca.leaf("floodgate", &["floodgate"]);
    let (push, snapshot) = watch::channel::<Snapshot>(None);
    push.send_replace(Some(("1".into(), edge(&[("acme", 2, DAY)]))));
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let ads = management(&ca, &ca, snapshot.clone(), seen_tx.clone()).await;
    // An IP in the URL, the certificate's name given apart.
    let url = format!("https://127.0.0.1:{}", ads.addr.port());
    let flags = |url: &str| {
        vec![
            "--config-xds".to_owned(),
            url.to_owned(),
            "--config-xds-ca".to_owned(),
            path(&ca.cert()).to_owned(),
            "--config-xds-san".to_owned(),
            "localhost".to_owned(),
            "--config-xds-cert".to_owned(),
            path(&client.cert).to_owned(),
            "--config-xds-key".to_owned(),
            path(&client.key).to_owned(),
        ]
    };
    let args = flags(&url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_without_file(&args, &[]);
    let ack = tokio::time::timeout(WAIT, answer_to(&mut seen, "nonce-1"))
        .await
        .unwrap_or_else(|_| panic!("no ACK over TLS:\n{}", server.log()));
    assert_eq!(ack.request.version_info, "1");
    assert_eq!(
        server
            .metric("floodgate_xds_updates_total{result=\"applied\"}")
            .await,
        1.0
    );
    ads.stop().await;
    drop(server);

    // A management server whose certificate another CA signed: no stream, nothing applied.
    let impostor = Ca::new("impostor");
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let ads = management(&impostor, &ca, snapshot, seen_tx).await;
    let args = flags(&format!("https://127.0.0.1:{}", ads.addr.port()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_without_file(&args, &[]);
    floodgate_integration::wait::until("a refused attempt and a retry", WAIT, || async {
        (server.metric("floodgate_xds_reconnects_total").await >= 1.0).then_some(())
    })
    .await;
    assert!(seen.try_recv().is_err(), "the impostor got a request");
    assert_eq!(
        server
            .metric("floodgate_xds_updates_total{result=\"applied\"}")
            .await,
        0.0
    );
    assert_eq!(server.metric("floodgate_xds_connected").await, 0.0);
    let log = server.log();
    assert!(log.contains("cannot connect"), "{log}");
    ads.stop().await;
}
