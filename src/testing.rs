//! Test doubles shared by the unit tests of several modules.

use crate::descriptor::RequestView;
use crate::response::Headers;
use std::borrow::Cow;
use std::collections::HashMap;

/// Headers from literal pairs, for comparing with replies.
pub fn h(pairs: &[(&'static str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(k, v)| (Cow::Borrowed(*k), v.to_string()))
        .collect()
}

/// A request as a plain map of headers (pseudo-headers included), counting look-ups so
/// that tests can check how many host calls the real view would make.
#[derive(Debug, Default, Clone)]
pub struct FakeRequest {
    pub headers: HashMap<String, String>,
    pub peer: Option<String>,
    pub lookups: usize,
}

impl FakeRequest {
    /// A request with these headers, from peer `10.1.2.3:55555`.
    pub fn new(pairs: &[(&str, &str)]) -> FakeRequest {
        FakeRequest {
            headers: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            peer: Some("10.1.2.3:55555".into()),
            lookups: 0,
        }
    }

    fn get(&mut self, name: &str) -> Option<String> {
        self.lookups += 1;
        self.headers.get(name).cloned()
    }
}

impl RequestView for FakeRequest {
    fn header(&mut self, name: &str) -> Option<String> {
        self.get(name)
    }
    fn raw_path(&mut self) -> Option<String> {
        self.get(":path")
    }
    fn method(&mut self) -> Option<String> {
        self.get(":method")
    }
    fn authority(&mut self) -> Option<String> {
        self.get(":authority")
    }
    fn peer_address(&mut self) -> Option<String> {
        self.lookups += 1;
        self.peer.clone()
    }
}
