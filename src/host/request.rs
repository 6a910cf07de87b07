//! [`RequestView`] on the request being processed: one host call per value asked for,
//! except ordinary headers, which come all at once on first use (and `content-type`,
//! taken from them once they are there).

use super::hostcalls;
use crate::request::descriptor::{Lookup, RequestView};
use crate::request::header_map::HeaderMap;

/// The current request's headers and connection, read from the host on demand.
///
/// Pseudo-headers come one by one (`proxy_get_header_map_value`): there is only one of
/// each, and most rules read no ordinary header at all. Ordinary headers come as the
/// whole list (`proxy_get_header_map_pairs`), fetched once: the single-value call returns
/// only a header's first value, and a repeated cost or descriptor header must be seen.
#[derive(Default)]
pub struct HostRequest {
    /// `None` until the first ordinary header is asked for; then the list, or `None`
    /// inside if the host could not give it.
    headers: Option<Option<HeaderMap>>,
}

impl HostRequest {
    fn pseudo(name: &str) -> Option<Vec<u8>> {
        hostcalls::request_header(name).ok().flatten()
    }
}

impl RequestView for HostRequest {
    fn header(&mut self, name: &str) -> Lookup {
        let headers = self.headers.get_or_insert_with(|| {
            hostcalls::request_header_pairs()
                .ok()
                .map(HeaderMap::from_host)
        });
        match headers {
            Some(map) => map.lookup(name),
            // Unreadable headers: as if absent, as the single-value call reported them.
            None => Lookup::Absent,
        }
    }

    #[inline]
    fn content_type(&mut self) -> Option<Vec<u8>> {
        // From the list when a rule already fetched it: one host call less per rejection,
        // and a walk without the checks, which the rule's look-up made.
        // A repeated value asks the host, whose single-value call answers the first one:
        // the reply's protocol is then what it was before the list was read.
        match &self.headers {
            Some(Some(map)) => match map.content_type() {
                Lookup::One(value) => Some(value),
                Lookup::Absent => None,
                Lookup::Repeated => Self::pseudo("content-type"),
            },
            _ => Self::pseudo("content-type"),
        }
    }

    fn raw_path(&mut self) -> Option<Vec<u8>> {
        Self::pseudo(":path")
    }

    fn method(&mut self) -> Option<Vec<u8>> {
        Self::pseudo(":method")
    }

    fn authority(&mut self) -> Option<Vec<u8>> {
        Self::pseudo(":authority")
    }

    fn peer_address(&mut self) -> Option<String> {
        hostcalls::property(&["source", "address"])
            .ok()
            .flatten()
            .and_then(|bytes| String::from_utf8(bytes).ok())
    }
}
