//! A reply's body: most rejections send the configured body, which every one of them
//! shares with the configuration instead of copying it.

use std::sync::Arc;

/// The body of an HTTP reply.
#[derive(Debug, Clone, Eq)]
pub enum Body {
    /// `response.body` as configured, shared (no allocation, no copy per rejection). An
    /// `Arc` because a configuration is `Sync` (the fuzz targets keep one in a static);
    /// on wasm32 without threads its count is a plain increment, as an `Rc`'s.
    Configured(Arc<str>),
    /// A body of its own: the rate limit service's, a problem document, a message.
    Own(Vec<u8>),
}

impl Body {
    /// The bytes sent.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Configured(text) => text.as_bytes(),
            Body::Own(bytes) => bytes,
        }
    }
}

/// Two bodies are the same when they send the same bytes, shared or not.
impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// Bytes of its own (tests and the rare bodies built whole).
impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body::Own(bytes)
    }
}
