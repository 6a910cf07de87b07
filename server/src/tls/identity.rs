//! Client identities: the names a verified client certificate carries (its SAN DNS names
//! and URIs, so SPIFFE IDs such as `spiffe://cluster.local/ns/istio-system/sa/gateway`),
//! the patterns an operator allows, and the verifier that refuses any other certificate
//! at the handshake.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::sync::Arc;
use x509_parser::extensions::GeneralName;

/// One allowed identity: a SAN DNS name or URI, exact, or a prefix when it ends in `*`
/// (`spiffe://cluster.local/ns/istio-system/*`). DNS names compare without case, URIs
/// exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    prefix: bool,
}

impl Pattern {
    /// Parses one pattern; `Err` for an empty one or a `*` anywhere but at the end.
    pub fn parse(s: &str) -> Result<Pattern, String> {
        let (text, prefix) = match s.strip_suffix('*') {
            Some(t) => (t, true),
            None => (s, false),
        };
        if s.is_empty() || text.contains('*') {
            return Err(format!(
                "{s:?}: an identity is a SAN DNS name or URI, exact or ending in *"
            ));
        }
        Ok(Pattern {
            text: text.to_owned(),
            prefix,
        })
    }

    /// Whether `name` (one of a certificate's identities) matches.
    pub fn matches(&self, name: &str) -> bool {
        let dns = !name.contains(':');
        let (t, n) = (self.text.as_bytes(), name.as_bytes());
        let eq = |a: &[u8], b: &[u8]| {
            if dns {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        if self.prefix {
            n.len() >= t.len() && eq(&n[..t.len()], t)
        } else {
            eq(n, t)
        }
    }
}

/// Whether any of `names` matches any of `allowed`.
pub fn allowed(allowed: &[Pattern], names: &[String]) -> bool {
    names.iter().any(|n| allowed.iter().any(|p| p.matches(n)))
}

/// The SAN DNS names and URIs of a DER certificate (empty when it has none or does not
/// parse: such a certificate has no identity to allow).
pub fn names(cert: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(cert) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some((*d).to_owned()),
            GeneralName::URI(u) => Some((*u).to_owned()),
            _ => None,
        })
        .collect()
}

/// The CA's verifier, then the allow-list: a certificate the CA signed but whose
/// identities are not on the list fails the handshake.
#[derive(Debug)]
pub struct AllowList {
    /// The chain check (rustls' WebPKI verifier over the client CA).
    pub inner: Arc<dyn ClientCertVerifier>,
    /// The identities allowed to connect.
    pub allowed: Vec<Pattern>,
}

impl ClientCertVerifier for AllowList {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if allowed(&self.allowed, &names(end_entity)) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A call refused for its caller's identity (counted by [`super::TlsMetrics`]; who may
/// make which call is decided in `rls::permit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A charge (`x-floodgate-charge`), answered `PERMISSION_DENIED`.
    Charge,
    /// A quota request (`x-floodgate-quota`), answered without a grant.
    Quota,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }

    #[test]
    fn exact_and_prefix_patterns() {
        let spiffe = "spiffe://cluster.local/ns/istio-system/sa/gateway";
        assert!(p(spiffe).matches(spiffe));
        assert!(!p(spiffe).matches("spiffe://cluster.local/ns/istio-system/sa/gatewayX"));
        assert!(!p(spiffe).matches("SPIFFE://cluster.local/ns/istio-system/sa/gateway"));
        assert!(p("spiffe://cluster.local/ns/istio-system/*").matches(spiffe));
        assert!(!p("spiffe://cluster.local/ns/other/*").matches(spiffe));
        assert!(p("envoy.mesh.example").matches("Envoy.Mesh.Example"));
        assert!(!p("envoy.mesh.example").matches("envoy.mesh.example.evil"));
        assert!(p("*").matches("anything"));
        for bad in ["", "a*b", "**"] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?}");
        }
        let list = [p("a.example"), p("spiffe://td/*")];
        assert!(allowed(&list, &["x".into(), "spiffe://td/sa/x".into()]));
        assert!(!allowed(&list, &[]));
    }
}
