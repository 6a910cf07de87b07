//! How the store proves who it is to Redis and checks who Redis is: credentials that never
//! need the command line, and TLS through rustls.
//!
//! - **Credentials.** A password comes from a file (`--redis-password-file`, e.g. a
//!   mounted Kubernetes Secret), from `REDIS_AUTH`, or from the URL; it is held in a
//!   [`Secret`] whose `Debug` shows nothing, and URLs are shown redacted
//!   ([`super::target::redact`]). Sentinels may have credentials of their own.
//! - **TLS.** A `rediss://` target is reached over rustls. The server's certificate is
//!   checked against the CA file (`--redis-tls-ca-file`, `REDIS_TLS_CACERT`) or, without
//!   one, the system's roots; a client certificate and key are presented when given (Redis
//!   `tls-auth-clients yes`). Skipping the host name check (for services whose
//!   certificates name something else) still verifies the chain. Files are read once, at
//!   start; a rotated client certificate takes effect on restart.

use redis::{ClientTlsConfig, ConnectionInfo, IntoConnectionInfo, TlsCertificates};
use std::fmt;

/// A password: shown as `***` by `Debug`, so it cannot leak through a logged struct.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `s`.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Credentials given apart from the URL; `None` keeps what the URL says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// The ACL user (`AUTH user password`); `None`: the URL's, or Redis's `default`.
    pub username: Option<String>,
    /// The password; `None`: the URL's, or none.
    pub password: Option<Secret>,
}

impl Auth {
    /// The reference service's `REDIS_AUTH` form: `password`, or `username:password`
    /// (split at the first `:`, as it does).
    pub fn from_reference(value: &str) -> Auth {
        match value.split_once(':') {
            Some((user, password)) => Auth {
                username: Some(user.to_owned()),
                password: Some(Secret::new(password)),
            },
            None => Auth {
                username: None,
                password: Some(Secret::new(value)),
            },
        }
    }

    /// Just a password (from a password file: all of it, less a final line break).
    pub fn password(password: &str) -> Auth {
        Auth {
            username: None,
            password: Some(Secret::new(
                password
                    .strip_suffix('\n')
                    .map_or(password, |p| p.strip_suffix('\r').unwrap_or(p)),
            )),
        }
    }

    /// Whether anything is set.
    pub fn is_set(&self) -> bool {
        self.username.is_some() || self.password.is_some()
    }
}

/// The TLS material, read from files at start.
#[derive(Clone, Default)]
pub struct TlsMaterial {
    /// PEM certificates the server's chain must end in; `None`: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// A PEM certificate chain and key presented to Redis.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Verify the chain but not that it names the host.
    pub skip_hostname_verification: bool,
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.client.is_some())
            .field(
                "skip_hostname_verification",
                &self.skip_hostname_verification,
            )
            .finish()
    }
}

impl TlsMaterial {
    /// The redis crate's form of it.
    pub fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self.client.as_ref().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: self.ca_pem.clone(),
        }
    }
}

/// Credentials and TLS for every connection the store makes.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// For the data nodes (the one Redis, the cluster's nodes, the sentinels' master).
    pub auth: Auth,
    /// For the sentinels themselves.
    pub sentinel_auth: Auth,
    /// For `rediss://` targets.
    pub tls: TlsMaterial,
}

/// A client for `url` with `auth` applied over the URL's own credentials and, for a
/// `rediss://` URL, `tls`. Errors name nothing secret.
pub fn client(url: &str, auth: &Auth, tls: &TlsMaterial) -> Result<redis::Client, String> {
    let info = with_auth(url.into_connection_info().map_err(|e| e.to_string())?, auth);
    client_for(info, tls)
}

/// A client for `info` (already carrying its credentials), with TLS when its address asks.
pub fn client_for(info: ConnectionInfo, tls: &TlsMaterial) -> Result<redis::Client, String> {
    if !matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
        return redis::Client::open(info).map_err(|e| e.to_string());
    }
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } = info.addr() {
        return Err(
            "the #insecure fragment (no certificate check at all) is not supported; \
             give the CA with --redis-tls-ca-file"
                .into(),
        );
    }
    let client =
        redis::Client::build_with_tls(info, tls.certificates()).map_err(|e| e.to_string())?;
    if !tls.skip_hostname_verification {
        return Ok(client);
    }
    let info = client.get_connection_info().clone();
    let mut addr = info.addr().clone();
    addr.set_danger_accept_invalid_hostnames(true);
    redis::Client::open(info.set_addr(addr)).map_err(|e| e.to_string())
}

/// `info` with `auth`'s user and password, where set, in place of its own.
pub fn with_auth(info: ConnectionInfo, auth: &Auth) -> ConnectionInfo {
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &auth.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &auth.password {
        settings = settings.set_password(password.expose());
    }
    info.set_redis_settings(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_auth_forms() {
        let a = Auth::from_reference("s3cret");
        assert_eq!(
            (a.username, a.password),
            (None, Some(Secret::new("s3cret")))
        );
        let a = Auth::from_reference("alice:pa:ss");
        assert_eq!(a.username.as_deref(), Some("alice"));
        assert_eq!(
            a.password.map(|p| p.expose().to_owned()).as_deref(),
            Some("pa:ss")
        );
        assert_eq!(
            Auth::password("pw\r\n").password,
            Some(Secret::new("pw")),
            "a file's final line break is not part of the password"
        );
        assert_eq!(Auth::password("pw\n\n").password, Some(Secret::new("pw\n")));
    }

    #[test]
    fn a_secret_never_debug_prints() {
        let a = Access {
            auth: Auth::from_reference("alice:s3cret"),
            ..Access::default()
        };
        let shown = format!("{a:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("alice"));
    }

    #[test]
    fn credentials_given_apart_replace_the_urls() {
        let info = with_auth(
            "redis://bob:old@h:1/2".into_connection_info().unwrap(),
            &Auth::password("new"),
        );
        assert_eq!(info.redis_settings().username(), Some("bob"));
        assert_eq!(info.redis_settings().password(), Some("new"));
        assert_eq!(info.redis_settings().db(), 2);
    }

    #[test]
    fn no_verification_off_mode() {
        let e = client(
            "rediss://h:1/#insecure",
            &Auth::default(),
            &TlsMaterial::default(),
        )
        .unwrap_err();
        assert!(e.contains("#insecure"), "{e}");
    }
}
