//! Descriptor building and costs from arbitrary request bytes, through the whole filter
//! decision ([`floodgate::limiter::Limiter`]): which rules apply, their values, cost
//! headers, the local buckets in a small table, the encoded RLS request, and the answer.
//!
//! Input fields (see [`crate::input`]), each read as header bytes are by the host layer
//! (invalid UTF-8 replaced): `:path`, `:method`, `:authority`, the peer address,
//! `x-tenant`, `x-user`, `x-cost`, `x-global-cost`, `content-type`; the rest of the input
//! is the rate limit service's response message. An absent field is an absent header.

use crate::input::Fields;
use floodgate::config::Config;
use floodgate::descriptor::{self, RequestView};
use floodgate::limiter::{Limiter, Verdict};
use floodgate::metrics::Tally;
use floodgate::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use floodgate::rls::Answer;
use floodgate::shared::{SetError, SharedData, StoreError, Versioned};
use prost::Message;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Every kind of descriptor source, match, cost and limit, with a table of 8 buckets so
/// that a few inputs fill it.
const CONFIG: &str = r#"{
  "rls": {"cluster": "rls", "domain": "fuzz"},
  "max_buckets": 8,
  "response": {"headers_on_allowed": true},
  "rules": [
    {"name": "api-tenant", "match": {"path_prefix": "/api/", "methods": ["GET", "POST"]},
     "descriptors": [{"key": "tenant", "header": "x-tenant"}, {"key": "path", "source": "path"}],
     "cost": {"header": "x-cost"}, "local": {"capacity": 5, "refill_per_second": 0.5}},
    {"name": "client", "shadow": true,
     "descriptors": [{"key": "client", "source": "remote_address"}, {"key": "method", "source": "method"}],
     "local": {"capacity": 3, "refill_per_second": 1}},
    {"name": "host",
     "descriptors": [{"key": "authority", "source": "authority"}, {"key": "route", "value": "all"}],
     "local": {"capacity": 100, "refill_per_second": 100}},
    {"name": "user-global", "descriptors": [{"key": "user", "header": "x-user"}],
     "cost": {"header": "x-global-cost"}, "global": {}},
    {"name": "shadow-global", "match": {"methods": ["DELETE"]}, "shadow": true,
     "descriptors": [{"key": "tenant", "header": "x-tenant"}], "global": {}}
  ]
}"#;

/// Header names the fields fill, in order (after the four pseudo values).
const HEADERS: [&str; 5] = [
    "x-tenant",
    "x-user",
    "x-cost",
    "x-global-cost",
    "content-type",
];

/// Runs the request `data` describes through the filter three times (twice at once, once a
/// second later), so that buckets are created, drained and refilled.
pub fn run(data: &[u8]) {
    let limiter = limiter();
    let (mut request, rest) = request(data);
    for applied in descriptor::applicable(&limiter.config().rules, &mut request) {
        let entries = &limiter.config().rules[applied.rule].entries;
        assert_eq!(applied.values.len(), entries.len(), "one value per entry");
        assert!(
            applied.values.iter().all(|v| !v.is_empty()),
            "an empty value"
        );
    }
    let store = Shared::default();
    let mut tally = Tally::new(limiter.config().rules.len());
    for now_s in [1_000, 1_000, 1_001] {
        let now = || Some(now_s * 1_000_000_000);
        if let Verdict::Ask(ask) = limiter.check(&mut request, now, &store, &mut tally) {
            let sent = RateLimitRequest::decode(ask.message.as_slice());
            assert!(
                sent.as_ref()
                    .is_ok_and(|s| s.domain == "fuzz" && !s.descriptors.is_empty()),
                "our RLS request does not decode into one with descriptors: {sent:?}"
            );
            let answer = Answer::Response(rest.to_vec());
            limiter.answer(ask.pending, answer, &mut request, now, &store, &mut tally);
        }
    }
    assert!(
        store.map.borrow().len() <= 8,
        "shared data outgrew max_buckets"
    );
    tally.drain().for_each(drop);
}

/// The limiter for [`CONFIG`], built once: parsing is not what this target fuzzes.
fn limiter() -> &'static Limiter {
    static LIMITER: OnceLock<Limiter> = OnceLock::new();
    LIMITER.get_or_init(|| match Config::parse(CONFIG.as_bytes()) {
        Ok(config) => Limiter::new(config),
        // Ours, and pinned by the replay test: a refusal is a bug in this target.
        Err(e) => unreachable!("the descriptors target's configuration is refused: {e}"),
    })
}

/// The request the fields describe, and the bytes after them.
fn request(data: &[u8]) -> (Request, &[u8]) {
    let mut fields = Fields::new(data);
    let mut request = Request {
        path: fields.text(),
        method: fields.text(),
        authority: fields.text(),
        peer: fields.text(),
        headers: HashMap::new(),
    };
    for name in HEADERS {
        if let Some(value) = fields.text() {
            request.headers.insert(name, value);
        }
    }
    (request, fields.rest())
}

/// A request as the host layer sees one.
#[derive(Debug)]
struct Request {
    path: Option<String>,
    method: Option<String>,
    authority: Option<String>,
    peer: Option<String>,
    headers: HashMap<&'static str, String>,
}

impl RequestView for Request {
    fn header(&mut self, name: &str) -> Option<String> {
        self.headers.get(name).cloned()
    }
    fn raw_path(&mut self) -> Option<String> {
        self.path.clone()
    }
    fn method(&mut self) -> Option<String> {
        self.method.clone()
    }
    fn authority(&mut self) -> Option<String> {
        self.authority.clone()
    }
    fn peer_address(&mut self) -> Option<String> {
        self.peer.clone()
    }
}

/// Shared data with the host's semantics (a CAS token per key, a missing key created by
/// any write), for one thread.
#[derive(Debug, Default)]
struct Shared {
    map: RefCell<HashMap<String, (Vec<u8>, u32)>>,
    next_cas: RefCell<u32>,
}

impl Shared {
    fn token(&self) -> u32 {
        let mut next = self.next_cas.borrow_mut();
        *next = next.wrapping_add(1);
        *next
    }
}

impl SharedData for Shared {
    fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        Ok(self.map.borrow().get(key).map(|(value, cas)| Versioned {
            value: value.clone(),
            cas: *cas,
        }))
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), SetError> {
        let token = self.token();
        let mut map = self.map.borrow_mut();
        match map.get_mut(key) {
            Some(entry) if entry.1 != cas => Err(SetError::Conflict),
            Some(entry) => {
                *entry = (value.to_vec(), token);
                Ok(())
            }
            None => {
                map.insert(key.to_owned(), (value.to_vec(), token));
                Ok(())
            }
        }
    }

    fn create(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let token = self.token();
        self.map
            .borrow_mut()
            .insert(key.to_owned(), (value.to_vec(), token));
        Ok(())
    }
}
