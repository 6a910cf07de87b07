//! A [`RequestView`] over a plain list of headers.

use crate::request::descriptor::{Lookup, RequestView};

/// A request as a plain list of headers (pseudo-headers included, repeats allowed),
/// counting look-ups so that tests can check how many host calls the real view would
/// make.
#[derive(Debug, Default, Clone)]
pub struct FakeRequest {
    pub headers: Vec<(String, Vec<u8>)>,
    pub peer: Option<String>,
    pub lookups: usize,
}

impl FakeRequest {
    /// A request with these headers, from peer `10.1.2.3:55555`.
    pub fn new(pairs: &[(&str, &str)]) -> FakeRequest {
        FakeRequest {
            headers: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
            peer: Some("10.1.2.3:55555".into()),
            lookups: 0,
        }
    }

    /// Adds one more header (a repeat if the name is already there), as raw bytes.
    pub fn with(mut self, name: &str, value: &[u8]) -> FakeRequest {
        self.headers.push((name.to_string(), value.to_vec()));
        self
    }

    fn lookup(&mut self, name: &str) -> Lookup {
        self.lookups += 1;
        let mut values = self.headers.iter().filter(|(k, _)| k == name);
        match (values.next(), values.next()) {
            (None, _) => Lookup::Absent,
            (Some((_, v)), None) => Lookup::One(v.clone()),
            (Some(_), Some(_)) => Lookup::Repeated,
        }
    }

    fn first(&mut self, name: &str) -> Option<Vec<u8>> {
        self.lookups += 1;
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

impl RequestView for FakeRequest {
    fn header(&mut self, name: &str) -> Lookup {
        self.lookup(name)
    }
    fn content_type(&mut self) -> Option<Vec<u8>> {
        self.first("content-type")
    }
    fn raw_path(&mut self) -> Option<Vec<u8>> {
        self.first(":path")
    }
    fn method(&mut self) -> Option<Vec<u8>> {
        self.first(":method")
    }
    fn authority(&mut self) -> Option<Vec<u8>> {
        self.first(":authority")
    }
    fn peer_address(&mut self) -> Option<String> {
        self.lookups += 1;
        self.peer.clone()
    }
}

impl crate::usage::ResponseView for FakeRequest {
    fn header(&mut self, name: &str) -> Lookup {
        self.lookup(name)
    }
}
