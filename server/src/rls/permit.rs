//! Who may spend another caller's budget: the client identities allowed to send charges
//! (`x-floodgate-charge`) and quota requests (`x-floodgate-quota`).
//!
//! A charge counts into debt whatever it finds and a lease takes hits ahead of use, so a
//! client that can send either can spend or lock any tenant's limit. Over mutual TLS the
//! operator can name who may (`--charge-identities`, `--quota-identities`); the
//! identities are the SAN DNS names and URIs of the client's verified certificate. Any
//! other caller's charge is refused `PERMISSION_DENIED`, and its quota request is answered
//! as if it had asked for none (a plain admission, no grant): a filter that asks for
//! leases keeps working, one call per request. Both are counted in
//! `floodgate_identity_refusals_total{call}`.

pub use crate::tls::identity::Refused;
use crate::tls::identity::{self, Pattern};

/// Who may make a kind of call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Who {
    /// Every caller (the default, and the only choice without mutual TLS).
    #[default]
    Anyone,
    /// Only callers whose certificate names one of these identities.
    Identities(Vec<Pattern>),
}

impl Who {
    /// Whether a caller with these identities may.
    pub fn admits(&self, identities: &[String]) -> bool {
        match self {
            Who::Anyone => true,
            Who::Identities(allowed) => identity::allowed(allowed, identities),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_identities() {
        let who = Who::Identities(vec![Pattern::parse("spiffe://td/ns/edge/*").unwrap()]);
        assert!(who.admits(&["spiffe://td/ns/edge/sa/gw".into()]));
        assert!(!who.admits(&["spiffe://td/ns/other/sa/x".into()]));
        assert!(!who.admits(&[]), "plaintext or no certificate: no identity");
        assert!(Who::Anyone.admits(&[]));
    }
}
