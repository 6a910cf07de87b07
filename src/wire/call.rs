//! A call to the rate limit service, ready for the host to send: its request headers in
//! the host's pair encoding and its body, the framed `ShouldRateLimit` request.
//!
//! Every call goes to the same cluster with the same gRPC headers; only these vary: the
//! quota header of a call that asks for leases ([`rls::QUOTA_HEADER`]), the charge
//! header of a stream-end charge ([`rls::CHARGE_HEADER`]), and the hold and release
//! headers of fleet-wide concurrency rules, whose value is the request's own hold id (so
//! those calls encode their own set, [`CallHeaders::hold`], [`CallHeaders::release`]). So [`CallHeaders`] encodes the
//! plain set and the charge set once, when the configuration is applied, and each call
//! shares one (a reference count, no copy). A call that asks for quota asks for its first
//! `n` descriptors, and `n` is fixed by the rules that matched (every global rule leases
//! unless it says `"quota": false`), so the set for each `n` is encoded on first use and
//! shared from then on, up to [`MAX_SHARED_QUOTA_SETS`] descriptors.

use super::grpc;
use super::rls;
use crate::config::RlsConfig;
use crate::reply::Headers;
use crate::request::header_map::{append_pair, HeaderMap, Lookup};
use floodgate_common::headers::{HOLD_HEADER, RELEASE_HEADER};
use std::cell::RefCell;
use std::rc::Rc;

/// The most descriptors a call may ask quota for and still share a set encoded once;
/// a larger call (only a configuration with that many global rules makes one) encodes
/// its own. Bounds what the shared sets hold whatever requests match.
pub const MAX_SHARED_QUOTA_SETS: usize = 16;

/// One call, as the host sends it to the rate limit service's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The request headers, encoded as the host takes them ([`Headers::encoded`]).
    headers: Encoded,
    /// The body: the `ShouldRateLimit` request, framed ([`grpc::start_frame`]).
    pub body: Vec<u8>,
}

/// A call's encoded request headers: one of the sets every call shares, or its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Encoded {
    /// A set encoded once ([`CallHeaders`]).
    Shared(Rc<[u8]>),
    /// This call's own (with its quota header).
    Own(Vec<u8>),
}

impl Call {
    /// The request headers, encoded as the host takes them ([`Headers::encoded`]).
    pub fn headers(&self) -> &[u8] {
        match &self.headers {
            Encoded::Shared(set) => set,
            Encoded::Own(own) => own,
        }
    }

    /// The `ShouldRateLimit` request in the body, without its frame prefix.
    pub fn message(&self) -> &[u8] {
        self.body.get(grpc::FRAME_PREFIX..).unwrap_or_default()
    }

    /// The value of the request header `name`, if the call carries it once. Decodes the
    /// whole set: for tests and tools, not for the request path.
    pub fn header(&self, name: &str) -> Option<Vec<u8>> {
        match HeaderMap::decode(self.headers().to_vec())?.lookup(name) {
            Lookup::One(value) => Some(value),
            Lookup::Absent | Lookup::Repeated => None,
        }
    }
}

/// The request header sets of one rate limit service's calls, encoded once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallHeaders {
    /// `:authority`, as Envoy's own gRPC client sends it: the cluster's name.
    cluster: String,
    /// The deadline the service is given (`grpc-timeout`).
    timeout_ms: u32,
    /// The gRPC headers of every call.
    plain: Rc<[u8]>,
    /// The same and the charge header.
    charge: Rc<[u8]>,
    /// The plain set and a quota header asking for the first `n` descriptors, at index
    /// `n - 1`, encoded on first use (a configuration is applied once per VM; the
    /// filter's contexts run on one thread, so a `RefCell` suffices).
    quota: RefCell<Vec<Option<Rc<[u8]>>>>,
}

impl CallHeaders {
    /// The header sets of calls to the service `rls` configures.
    pub fn new(rls: &RlsConfig) -> CallHeaders {
        let mut headers = CallHeaders {
            cluster: rls.cluster.clone(),
            timeout_ms: rls.timeout_ms,
            plain: Rc::from(Vec::new()),
            charge: Rc::from(Vec::new()),
            quota: RefCell::new(Vec::new()),
        };
        headers.plain = Rc::from(headers.encode(None));
        headers.charge = Rc::from(headers.encode(Some(rls::CHARGE_HEADER)));
        headers
    }

    /// A call of `body` (from [`rls::encode_request`]) with the plain headers.
    pub fn plain(&self, body: Vec<u8>) -> Call {
        Call {
            headers: Encoded::Shared(Rc::clone(&self.plain)),
            body,
        }
    }

    /// A stream-end charge of `body` (every descriptor counted whether it fits or not).
    pub fn charge(&self, body: Vec<u8>) -> Call {
        Call {
            headers: Encoded::Shared(Rc::clone(&self.charge)),
            body,
        }
    }

    /// A call of `body` whose concurrency descriptors take their slots under the hold id
    /// `id` (`x-floodgate-hold`). Its own header set: the id is the request's.
    pub fn hold(&self, body: Vec<u8>, id: &str) -> Call {
        Call {
            headers: Encoded::Own(self.plain_and(HOLD_HEADER, id)),
            body,
        }
    }

    /// The release of the hold `id` (`x-floodgate-release`) on the concurrency descriptors
    /// in `body`, sent when the request's stream ends.
    pub fn release(&self, body: Vec<u8>, id: &str) -> Call {
        Call {
            headers: Encoded::Own(self.plain_and(RELEASE_HEADER, id)),
            body,
        }
    }

    /// A call of `body` that asks for quota leases for its first `descriptors`
    /// descriptors (the plain headers when that is none).
    pub fn with_quota(&self, body: Vec<u8>, descriptors: usize) -> Call {
        if descriptors == 0 {
            return self.plain(body);
        }
        if descriptors > MAX_SHARED_QUOTA_SETS {
            return Call {
                headers: Encoded::Own(self.encode_quota(descriptors)),
                body,
            };
        }
        let mut sets = self.quota.borrow_mut();
        if sets.len() < descriptors {
            sets.resize(descriptors, None);
        }
        let headers = match sets.get_mut(descriptors - 1) {
            Some(slot) => Encoded::Shared(Rc::clone(
                slot.get_or_insert_with(|| Rc::from(self.encode_quota(descriptors))),
            )),
            None => Encoded::Own(self.encode_quota(descriptors)),
        };
        Call { headers, body }
    }

    /// The plain set and a quota header asking for the first `descriptors`.
    fn encode_quota(&self, descriptors: usize) -> Vec<u8> {
        let indices: Vec<usize> = (0..descriptors).collect();
        let quota = floodgate_common::quota::encode(&indices);
        self.encode(Some((rls::QUOTA_HEADER, &quota)))
    }

    /// The plain set with (`name`, `value`) added last: the bytes [`CallHeaders::encode`]
    /// gives for that extra, from the set encoded once rather than from six new strings
    /// (a hold and its release encode one each, on every request that takes a hold).
    fn plain_and(&self, name: &'static str, value: &str) -> Vec<u8> {
        append_pair(&self.plain, name.as_bytes(), value.as_bytes())
            .unwrap_or_else(|| self.encode(Some((name, value))))
    }

    /// The gRPC headers of a `ShouldRateLimit` call, and `extra`, encoded. Written as a
    /// reply's [`Headers`] are, so that the module carries one encoder.
    fn encode(&self, extra: Option<(&'static str, &str)>) -> Vec<u8> {
        let headers = grpc::request_headers(rls::PATH, &self.cluster, self.timeout_ms);
        let mut pairs = Headers::new();
        for (name, value) in &headers {
            pairs.push(name, value);
        }
        if let Some((name, value)) = extra {
            pairs.push(name, value);
        }
        pairs.into_encoded()
    }
}

#[cfg(test)]
impl Call {
    /// Whether both calls share one encoded set.
    fn shares_headers_with(&self, other: &Call) -> bool {
        match (&self.headers, &other.headers) {
            (Encoded::Shared(a), Encoded::Shared(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
