//! The gRPC port's TLS flags, and the reference service's variables beside them (a flag
//! wins over a variable): `GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`,
//! `GRPC_SERVER_TLS_KEY`, `GRPC_CLIENT_TLS_CACERT`, and `GRPC_CLIENT_TLS_SAN` (one name
//! there; a comma-separated list here). A TLS setting that cannot take effect (a client CA
//! without a server certificate, identities without a client CA) is refused, never
//! silently ignored.

use crate::rls::permit::Who;
use crate::tls::identity::Pattern;
use crate::tls::TlsSettings;
use clap::Args;
use std::path::PathBuf;

/// The gRPC port's TLS flags.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve gRPC over TLS with this PEM certificate chain (with --grpc-tls-key-file);
    /// reloaded when the file changes. Environment: GRPC_SERVER_TLS_CERT (with
    /// GRPC_SERVER_USE_TLS=true).
    #[arg(long, value_name = "PATH")]
    pub grpc_tls_cert_file: Option<PathBuf>,

    /// The PEM private key of --grpc-tls-cert-file. Environment: GRPC_SERVER_TLS_KEY.
    #[arg(long, value_name = "PATH")]
    pub grpc_tls_key_file: Option<PathBuf>,

    /// Require client certificates that chain to these PEM CA certificates (mutual TLS).
    /// Environment: GRPC_CLIENT_TLS_CACERT.
    #[arg(long, value_name = "PATH")]
    pub grpc_tls_client_ca_file: Option<PathBuf>,

    /// Accept only client certificates naming one of these identities (comma-separated
    /// SAN DNS names or URIs such as SPIFFE IDs; a trailing * matches a prefix); others
    /// fail the handshake. Environment: GRPC_CLIENT_TLS_SAN.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub grpc_tls_client_identities: Vec<String>,

    /// Only clients whose certificate names one of these identities may send charges
    /// (x-floodgate-charge); others get PERMISSION_DENIED. Default: any client.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub charge_identities: Vec<String>,

    /// Only clients whose certificate names one of these identities get quota leases
    /// (x-floodgate-quota); others are answered without a grant. Default: any client.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub quota_identities: Vec<String>,
}

/// The gRPC port's TLS and who may spend, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// `None`: plaintext.
    pub tls: Option<TlsSettings>,
    /// Who may send charges.
    pub charges: Who,
    /// Who may ask for leases.
    pub quota: Who,
}

impl TlsArgs {
    /// Resolves the flags against the environment as `env` reads it.
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Resolved, String> {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        let use_tls = match var("GRPC_SERVER_USE_TLS").as_deref() {
            None => false,
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => true,
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => false,
            Some(v) => return Err(format!("GRPC_SERVER_USE_TLS {v:?}: expected true or false")),
        };
        let pick = |flag: &Option<PathBuf>, name: &str| {
            flag.clone().or_else(|| var(name).map(PathBuf::from))
        };
        let cert = pick(&self.grpc_tls_cert_file, "GRPC_SERVER_TLS_CERT");
        let key = pick(&self.grpc_tls_key_file, "GRPC_SERVER_TLS_KEY");
        let client_ca = pick(&self.grpc_tls_client_ca_file, "GRPC_CLIENT_TLS_CACERT");
        let identities = if self.grpc_tls_client_identities.is_empty() {
            var("GRPC_CLIENT_TLS_SAN")
                .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect())
                .unwrap_or_default()
        } else {
            self.grpc_tls_client_identities.clone()
        };
        let patterns = |list: &[String], what: &str| {
            list.iter()
                .map(|s| Pattern::parse(s).map_err(|e| format!("{what}: {e}")))
                .collect::<Result<Vec<_>, _>>()
        };
        let allowed = patterns(&identities, "--grpc-tls-client-identities")?;
        let who = |list: &[String], what: &str| -> Result<Who, String> {
            if list.is_empty() {
                return Ok(Who::Anyone);
            }
            if client_ca.is_none() {
                return Err(format!(
                    "{what} needs client certificates (--grpc-tls-client-ca-file): identities come only from them"
                ));
            }
            Ok(Who::Identities(patterns(list, what)?))
        };
        let charges = who(&self.charge_identities, "--charge-identities")?;
        let quota = who(&self.quota_identities, "--quota-identities")?;
        let from_flags = self.grpc_tls_cert_file.is_some() || self.grpc_tls_key_file.is_some();
        let on = from_flags || use_tls;
        let tls = match (on, cert, key) {
            (false, None, None) => None,
            (false, _, _) => {
                return Err("GRPC_SERVER_TLS_CERT/_KEY are set but GRPC_SERVER_USE_TLS is not true".into())
            }
            (true, Some(cert), Some(key)) => Some(TlsSettings {
                cert,
                key,
                client_ca,
                allowed,
            }),
            (true, _, _) => {
                return Err("TLS needs both --grpc-tls-cert-file and --grpc-tls-key-file (GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY)".into())
            }
        };
        if tls.is_none() {
            if self.grpc_tls_client_ca_file.is_some() || var("GRPC_CLIENT_TLS_CACERT").is_some() {
                return Err("a client CA (--grpc-tls-client-ca-file, GRPC_CLIENT_TLS_CACERT) needs TLS: give --grpc-tls-cert-file and --grpc-tls-key-file".into());
            }
        } else if !identities.is_empty() && tls.as_ref().is_some_and(|t| t.client_ca.is_none()) {
            return Err("--grpc-tls-client-identities needs client certificates (--grpc-tls-client-ca-file)".into());
        }
        Ok(Resolved {
            tls,
            charges,
            quota,
        })
    }
}

#[cfg(test)]
mod tests;
