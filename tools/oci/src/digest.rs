//! Content addresses. Every blob in an OCI image is named by the SHA-256 of its bytes,
//! written `sha256:<64 lowercase hex digits>`.

use serde::{Serialize, Serializer};
use sha2::{Digest as _, Sha256};
use std::fmt;

/// The SHA-256 content address of some bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let sum = Sha256::digest(bytes);
        let mut hex = String::with_capacity(64);
        for byte in sum.iter() {
            hex.push(HEX[usize::from(byte >> 4)]);
            hex.push(HEX[usize::from(byte & 0x0f)]);
        }
        Digest { hex }
    }

    /// The 64 hex digits alone: what `WasmPlugin.spec.sha256` and blob file names take.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

const HEX: [char; 16] = [
    '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f',
];

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_sha256_test_vectors() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            Digest::of(b"abc").hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn serializes_with_the_algorithm_prefix() {
        let json = serde_json::to_string(&Digest::of(b"")).unwrap();
        assert_eq!(
            json,
            "\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\""
        );
    }
}
