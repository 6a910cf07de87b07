//! TLS and mutual TLS on the gRPC port, through rustls (ring), never OpenSSL.
//!
//! - **Server TLS** from a PEM certificate chain and key (`--grpc-tls-cert-file`,
//!   `--grpc-tls-key-file`; the reference's `GRPC_SERVER_TLS_CERT`/`_KEY`). ALPN `h2`.
//! - **Client certificates** (`--grpc-tls-client-ca-file`, `GRPC_CLIENT_TLS_CACERT`):
//!   every client must present one that chains to the CA, or the handshake fails.
//! - **An allow-list** of client identities (`--grpc-tls-client-identities`,
//!   `GRPC_CLIENT_TLS_SAN`): SAN DNS names or URIs ([`identity::Pattern`]), checked in the
//!   handshake, so a certificate the CA signed for someone else never gets to send a byte
//!   of HTTP/2.
//! - **Rotation.** The files are polled every [`RELOAD_EVERY`]; when their bytes change and
//!   they still make a valid configuration, new connections use it. Established
//!   connections keep the session they have: nothing is dropped. An invalid change (a key
//!   that does not match, a half-written file) keeps the previous configuration, logged
//!   and counted (`floodgate_tls_reloads_total{result="failure"}`); the next poll tries
//!   again.
//!
//! Where it sits: the listener accepts TCP, wraps it in a [`TlsConn`] (handshake run
//! lazily inside the first reads and writes, see [`stream`]), and the connection guard
//! that times handshakes and idleness wraps *that*, so the guard and HTTP/2 see plaintext.
//! The client's identities ride on the connection to every request (see
//! [`crate::listener::PeerInfo`]), where the RLS layer checks who may send charges and
//! quota requests.
//!
//! tonic's own `ServerTlsConfig` is not used: it takes its certificate once, at start,
//! and has no hook to check identities in the handshake; this module is the same
//! tokio-rustls tonic uses, under tonic's `serve_with_incoming`.

pub mod identity;
mod stream;

pub use stream::{Peer, TlsConn};

use identity::{AllowList, Pattern, Refused};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// How often the certificate files are looked at for a change.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// What the gRPC port's TLS is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM certificate chain, the server's own first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates client certificates must chain to; `None`: no client
    /// certificate is asked for.
    pub client_ca: Option<PathBuf>,
    /// The client identities allowed to connect; empty: any the CA signed.
    pub allowed: Vec<Pattern>,
}

/// The files' bytes, to tell a change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Files {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// Accepts TLS connections with the current configuration, swapped on rotation.
pub struct Acceptor {
    settings: TlsSettings,
    current: RwLock<(Files, Arc<ServerConfig>)>,
    metrics: Arc<TlsMetrics>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("settings", &self.settings)
            .finish()
    }
}

impl Acceptor {
    /// Reads the files and builds the configuration; `Err` names the file at fault.
    pub fn new(settings: TlsSettings, metrics: Arc<TlsMetrics>) -> Result<Acceptor, String> {
        let files = read(&settings)?;
        let config = build(&settings, &files)?;
        Ok(Acceptor {
            settings,
            current: RwLock::new((files, config)),
            metrics,
        })
    }

    /// Starts the handshake of `tcp` (it runs inside the connection's first reads).
    pub fn accept(&self, tcp: TcpStream) -> TlsConn {
        let config = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone();
        let remote = tcp.peer_addr().ok();
        TlsConn::new(
            tokio_rustls::TlsAcceptor::from(config).accept(tcp),
            remote,
            self.metrics.clone(),
        )
    }

    /// Looks at the files once: a change that makes a valid configuration is swapped in
    /// (`Ok(true)`); an unchanged one does nothing (`Ok(false)`); an invalid one keeps
    /// the current configuration (`Err`).
    pub fn reload(&self) -> Result<bool, String> {
        let files = read(&self.settings)?;
        if self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            == files
        {
            return Ok(false);
        }
        let config = build(&self.settings, &files)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = (files, config);
        Ok(true)
    }

    /// Polls the files every [`RELOAD_EVERY`] until `stop`.
    pub async fn watch(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_EVERY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            match self.reload() {
                Ok(false) => failing = false,
                Ok(true) => {
                    failing = false;
                    self.metrics.reloads[0].inc();
                    tracing::info!("gRPC TLS certificates reloaded; new connections use them");
                }
                Err(e) => {
                    if !failing {
                        self.metrics.reloads[1].inc();
                        tracing::warn!(error = %e, "gRPC TLS certificates changed but cannot be used; keeping the previous ones");
                    }
                    failing = true;
                }
            }
        }
    }
}

fn read(s: &TlsSettings) -> Result<Files, String> {
    let file = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    Ok(Files {
        cert: file(&s.cert)?,
        key: file(&s.key)?,
        client_ca: s.client_ca.as_ref().map(file).transpose()?,
    })
}

fn build(s: &TlsSettings, f: &Files) -> Result<Arc<ServerConfig>, String> {
    let certs = CertificateDer::pem_slice_iter(&f.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", s.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate", s.cert.display()));
    }
    let key =
        PrivateKeyDer::from_pem_slice(&f.key).map_err(|e| format!("{}: {e}", s.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match (&s.client_ca, &f.client_ca) {
        (Some(path), Some(pem)) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| format!("{}: {e}", path.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!("{}: no PEM certificate", path.display()));
            }
            let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if s.allowed.is_empty() {
                builder.with_client_cert_verifier(inner)
            } else {
                builder.with_client_cert_verifier(Arc::new(AllowList {
                    inner,
                    allowed: s.allowed.clone(),
                }))
            }
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{} and {}: {e}", s.cert.display(), s.key.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Why a handshake failed, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeError {
    /// Client certificates are required and none came.
    NoClientCertificate,
    /// The client's certificate does not chain to the CA (or is expired, or malformed).
    UntrustedCertificate,
    /// The CA signed it, but its identities are not on the allow-list.
    IdentityNotAllowed,
    /// Anything else: not TLS at all (a plaintext client), a protocol error, a close.
    Protocol,
}

const HANDSHAKE_ERRORS: [(HandshakeError, &str); 4] = [
    (HandshakeError::NoClientCertificate, "no_client_certificate"),
    (
        HandshakeError::UntrustedCertificate,
        "untrusted_certificate",
    ),
    (HandshakeError::IdentityNotAllowed, "identity_not_allowed"),
    (HandshakeError::Protocol, "protocol"),
];

impl HandshakeError {
    /// The reason an accept error carries.
    pub fn of(e: &io::Error) -> HandshakeError {
        match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::NoCertificatesPresented) => HandshakeError::NoClientCertificate,
            Some(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            )) => HandshakeError::IdentityNotAllowed,
            Some(rustls::Error::InvalidCertificate(_)) => HandshakeError::UntrustedCertificate,
            _ => HandshakeError::Protocol,
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        HANDSHAKE_ERRORS[self as usize].1
    }
}

/// A label set of one fixed name and value (the TLS counters' only shape).
type StaticLabels = [(&'static str, &'static str); 1];

/// The TLS metrics, registered with the others. Counting is an atomic increment on a
/// handle created up front.
#[derive(Debug)]
pub struct TlsMetrics {
    handshakes: Counter,
    errors_family: Family<StaticLabels, Counter>,
    errors: [Counter; 4],
    reloads_family: Family<StaticLabels, Counter>,
    reloads: [Counter; 2],
    refused_family: Family<StaticLabels, Counter>,
    refused: [Counter; 2],
}

impl Default for TlsMetrics {
    fn default() -> Self {
        let errors_family = Family::<StaticLabels, Counter>::default();
        let errors = HANDSHAKE_ERRORS
            .map(|(_, label)| errors_family.get_or_create_owned(&[("reason", label)]));
        let reloads_family = Family::<StaticLabels, Counter>::default();
        let reloads = ["success", "failure"]
            .map(|label| reloads_family.get_or_create_owned(&[("result", label)]));
        let refused_family = Family::<StaticLabels, Counter>::default();
        let refused =
            ["charge", "quota"].map(|label| refused_family.get_or_create_owned(&[("call", label)]));
        TlsMetrics {
            handshakes: Counter::default(),
            errors_family,
            errors,
            reloads_family,
            reloads,
            refused_family,
            refused,
        }
    }
}

impl TlsMetrics {
    /// Counts a call refused for its caller's identity.
    pub fn refused(&self, call: Refused) {
        self.refused[call as usize].inc();
    }

    fn handshake_ok(&self) {
        self.handshakes.inc();
    }

    fn handshake_failed(&self, why: HandshakeError) {
        self.errors[why as usize].inc();
    }

    /// Adds these metrics to `registry` (counters' exported names gain `_total`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_tls_handshakes",
            "TLS handshakes completed on the gRPC port",
            self.handshakes.clone(),
        );
        registry.register(
            "floodgate_tls_handshake_errors",
            "TLS handshakes the gRPC port refused or that failed, by reason",
            self.errors_family.clone(),
        );
        registry.register(
            "floodgate_identity_refusals",
            "Charges (refused) and quota requests (answered without a grant) from a client identity not allowed them",
            self.refused_family.clone(),
        );
        registry.register(
            "floodgate_tls_reloads",
            "Changes of the gRPC port's certificate files, by whether they were applied",
            self.reloads_family.clone(),
        );
    }
}
