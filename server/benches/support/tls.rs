//! The TLS rows of `make bench-server`: the same floodgate-server (memory store, one hot
//! key) started twice, plaintext and with `--grpc-tls-*` (mutual TLS, a client certificate
//! checked against the CA and an identity allow-list), facing the same client; then the
//! handshake alone: connections opened one after the other, each with one call, and the
//! server's CPU per connection. Certificates are made here by `rcgen`.

use super::{cpu_now, cpu_since, load_with, server_command, start, BoxError};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use std::net::SocketAddr;
use std::time::Instant;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const IDENTITY: &str = "spiffe://cluster.local/ns/edge/sa/gateway";

/// A CA, a server leaf for `localhost`, and a client leaf for [`IDENTITY`], as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    client: ClientTlsConfig,
}

fn pki() -> Result<Pki, BoxError> {
    let dir = tempfile::tempdir()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_pem = ca_params.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |sans: Vec<SanType>| -> Result<(String, String), BoxError> {
        let mut p = CertificateParams::new(Vec::<String>::new())?;
        p.subject_alt_names = sans;
        let key = KeyPair::generate()?;
        Ok((p.signed_by(&key, &issuer)?.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(vec![SanType::DnsName("localhost".try_into()?)])?;
    let (client_cert, client_key) = leaf(vec![SanType::URI(IDENTITY.try_into()?)])?;
    for (name, pem) in [
        ("ca.pem", &ca_pem),
        ("server.pem", &server_cert),
        ("server.key", &server_key),
    ] {
        std::fs::write(dir.path().join(name), pem)?;
    }
    let client = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca_pem))
        .identity(Identity::from_pem(client_cert, client_key))
        .domain_name("localhost");
    Ok(Pki { dir, client })
}

/// Plaintext against mutual TLS, per stream count, then the handshake's cost.
pub async fn compare(
    config: &std::path::Path,
    secs: u64,
    stream_counts: &[usize],
) -> Result<(), BoxError> {
    let pki = pki()?;
    let path = |f: &str| pki.dir.path().join(f).display().to_string();
    let (ca, cert, key) = (path("ca.pem"), path("server.pem"), path("server.key"));
    let (_plain, plain_addr) = start(server_command(config, &[]))?;
    let tls_flags = [
        "--grpc-tls-cert-file",
        &cert,
        "--grpc-tls-key-file",
        &key,
        "--grpc-tls-client-ca-file",
        &ca,
        "--grpc-tls-client-identities",
        IDENTITY,
    ];
    let (tls, tls_addr) = start(server_command(config, &tls_flags))?;

    println!(
        "floodgate-server over mutual TLS vs plaintext, memory store, one key, {secs} s per row"
    );
    println!();
    println!("| streams | plaintext decisions/s | mTLS decisions/s | ratio | plaintext p50 / p99 µs | mTLS p50 / p99 µs |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for &streams in stream_counts {
        let p = load_with(plain_addr, None, streams, false, secs, &[]).await?;
        let t = load_with(tls_addr, Some(&pki.client), streams, false, secs, &[]).await?;
        println!(
            "| {streams} | {:.0} | {:.0} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} |",
            p.per_sec,
            t.per_sec,
            t.per_sec / p.per_sec,
            p.p50_us,
            p.p99_us,
            t.p50_us,
            t.p99_us
        );
    }
    println!();
    let n = 200;
    let (plain_ms, _) = connections(plain_addr, None, n, 0).await?;
    let (tls_ms, tls_cpu) = connections(tls_addr, Some(&pki.client), n, tls.0.id()).await?;
    println!(
        "new connection + first call, {n} one after the other: plaintext {plain_ms:.2} ms, \
         mTLS {tls_ms:.2} ms each; the TLS server's CPU {tls_cpu} per connection"
    );
    println!();
    Ok(())
}

/// Opens `n` connections one after the other, one call each: milliseconds per
/// connection, and `pid`'s CPU per connection (µs, `-` if unknown).
async fn connections(
    addr: SocketAddr,
    tls: Option<&ClientTlsConfig>,
    n: u32,
    pid: u32,
) -> Result<(f64, String), BoxError> {
    let before = cpu_now(&[pid]);
    let started = Instant::now();
    for _ in 0..n {
        let channel = match tls {
            None => {
                Channel::from_shared(format!("http://{addr}"))?
                    .connect()
                    .await?
            }
            Some(t) => {
                Channel::from_shared(format!("https://{addr}"))?
                    .tls_config(t.clone())?
                    .connect()
                    .await?
            }
        };
        let mut client = super::RateLimitServiceClient::new(channel);
        client
            .should_rate_limit(super::request("hot".into()))
            .await?;
    }
    let per_ms = started.elapsed().as_secs_f64() * 1_000.0 / f64::from(n);
    let cpu = cpu_since(&before, &cpu_now(&[pid]))
        .first()
        .copied()
        .flatten()
        .filter(|_| pid != 0)
        .map_or("-".to_owned(), |s| {
            format!("{:.0} µs", s * 1e6 / f64::from(n))
        });
    Ok((per_ms, cpu))
}
