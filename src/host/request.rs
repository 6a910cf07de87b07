//! [`RequestView`] on the request being processed: one host call per value asked for.

use super::abi;
use crate::descriptor::RequestView;

/// The current request's headers and connection, read from the host on demand.
pub struct HostRequest;

/// Header bytes as text; invalid UTF-8 (obs-text) is replaced rather than refused.
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl RequestView for HostRequest {
    fn header(&mut self, name: &str) -> Option<String> {
        abi::request_header(name).ok().flatten().map(text)
    }

    fn raw_path(&mut self) -> Option<String> {
        self.header(":path")
    }

    fn method(&mut self) -> Option<String> {
        self.header(":method")
    }

    fn authority(&mut self) -> Option<String> {
        self.header(":authority")
    }

    fn peer_address(&mut self) -> Option<String> {
        abi::property(&["source", "address"])
            .ok()
            .flatten()
            .map(text)
    }
}
