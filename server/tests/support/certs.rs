//! Certificates made by the test, never committed: a CA, and leaves it signs for servers
//! and clients, each written as PEM files into a temporary directory.
//!
//! A name given to a leaf is a DNS name, an IP address (when it parses as one), or a URI
//! (when it contains `://`, e.g. a SPIFFE ID).

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::path::{Path, PathBuf};

/// A certificate authority that signs leaves.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    dir: tempfile::TempDir,
}

/// A leaf's files.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The PEM certificate.
    pub cert: PathBuf,
    /// The PEM private key (PKCS#8).
    pub key: PathBuf,
}

impl Ca {
    /// A fresh CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The CA certificate's file.
    pub fn cert(&self) -> PathBuf {
        let path = self.dir.path().join("ca.pem");
        if !path.exists() {
            std::fs::write(&path, &self.pem).unwrap();
        }
        path
    }

    /// The directory the files are written in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A leaf for a server and client alike, named `names`, written as `file`.pem and
    /// `file`.key.
    pub fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        let (cert, key) = self.leaf_pem(names);
        let leaf = Leaf {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert).unwrap();
        std::fs::write(&leaf.key, key).unwrap();
        leaf
    }

    /// A leaf's PEM certificate and key, not written anywhere.
    pub fn leaf_pem(&self, names: &[&str]) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        params.subject_alt_names = names.iter().map(|n| san(n)).collect();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn san(name: &str) -> SanType {
    if name.contains("://") {
        SanType::URI(name.try_into().unwrap())
    } else if let Ok(ip) = name.parse() {
        SanType::IpAddress(ip)
    } else {
        SanType::DnsName(name.try_into().unwrap())
    }
}
