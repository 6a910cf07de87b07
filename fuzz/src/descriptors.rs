//! Descriptor building and costs from arbitrary request bytes, through the whole filter
//! decision ([`floodgate::limiter::Limiter`]): which rules apply, their values, cost
//! headers, the local buckets in a small table, the encoded RLS request, and the answer.
//!
//! Input fields (see [`crate::input`]), raw bytes as the host layer reads them: `:path`,
//! `:method`, `:authority`, the peer address (as text, invalid UTF-8 replaced, the way
//! the host reads a property), `x-tenant`, `x-user`, `x-cost`, `x-global-cost`,
//! `content-type`; the rest of the input is the rate limit service's response message.
//! An absent field is an absent header. A header field holding LF (which no header value
//! can hold) is that header sent once per line: two or more lines are a repeated header.

use crate::input::Fields;
use floodgate::config::Config;
use floodgate::limiter::{Limiter, Verdict};
use floodgate::metrics::Tally;
use floodgate::request::descriptor::{self, Lookup, RequestView};
use floodgate::shared::placement::PlacementKey;
use floodgate::shared::{SetError, SharedData, StoreError, Versioned};
use floodgate::wire::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use floodgate::wire::rls::Answer;
use prost::Message;
use std::cell::RefCell;
use std::collections::HashMap;

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
    let config = limiter.config();
    let max_value = config.max_descriptor_value_bytes;
    // A refusal (a bad cost, a repeated header, a value too long or not UTF-8 for a
    // global rule) is a fine answer; what applies must be well formed.
    if let Ok(applied) = descriptor::applicable(&config.rules, max_value, &mut request) {
        for applied in applied {
            let entries = &config.rules[applied.rule].entries;
            assert_eq!(applied.values.len(), entries.len(), "one value per entry");
            assert!(
                applied.values.iter().all(|v| !v.is_empty()),
                "an empty value"
            );
            assert!(
                applied.values.iter().all(|v| v.len() <= max_value),
                "a value longer than max_descriptor_value_bytes"
            );
        }
    }
    let store = Shared::default();
    let mut tally = Tally::new(limiter.config().rules.len());
    for now_s in [1_000, 1_000, 1_001] {
        let now = || Some(now_s * 1_000_000_000);
        if let Verdict::Ask(ask) = limiter.check(&mut request, now, &store, &mut tally) {
            let sent = RateLimitRequest::decode(ask.call.message());
            assert!(
                sent.as_ref()
                    .is_ok_and(|s| s.domain == "fuzz" && !s.descriptors.is_empty()),
                "our RLS request does not decode into one with descriptors: {sent:?}"
            );
            let answer = Answer::Response(rest.to_vec());
            limiter.answer(ask.pending, answer, &mut request, now, &store, &mut tally);
        }
    }
    // 8 slots, and the table's record of how many slot keys exist.
    assert!(
        store.map.borrow().len() <= 8 + 1,
        "shared data outgrew max_buckets"
    );
    tally.drain().for_each(drop);
}

/// The limiter for [`CONFIG`], built once per thread (it is not `Sync`: its placement key
/// may change under it, as in a VM): parsing is not what this target fuzzes.
fn limiter() -> &'static Limiter {
    thread_local! {
        static LIMITER: &'static Limiter = Box::leak(Box::new(
            match Config::parse(CONFIG.as_bytes()) {
                Ok(config) => Limiter::new(config, PlacementKey::from_bytes([0x5a; 16])),
                // Ours, and pinned by the replay test: a refusal is a bug in this target.
                Err(e) => unreachable!("the descriptors target's configuration is refused: {e}"),
            },
        ));
    }
    LIMITER.with(|l| *l)
}

/// The request the fields describe, and the bytes after them.
fn request(data: &[u8]) -> (Request, &[u8]) {
    let mut fields = Fields::new(data);
    let owned = |fields: &mut Fields| fields.bytes().map(<[u8]>::to_vec);
    let mut request = Request {
        path: owned(&mut fields),
        method: owned(&mut fields),
        authority: owned(&mut fields),
        peer: fields.text(),
        headers: HashMap::new(),
    };
    for name in HEADERS {
        if let Some(value) = fields.bytes() {
            let lines = value.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            request.headers.insert(name, lines);
        }
    }
    (request, fields.rest())
}

/// A request as the host layer sees one.
#[derive(Debug)]
struct Request {
    path: Option<Vec<u8>>,
    method: Option<Vec<u8>>,
    authority: Option<Vec<u8>>,
    peer: Option<String>,
    /// Each header's values, one per line it was sent on.
    headers: HashMap<&'static str, Vec<Vec<u8>>>,
}

impl RequestView for Request {
    fn header(&mut self, name: &str) -> Lookup {
        match self.headers.get(name).map(Vec::as_slice) {
            None | Some([]) => Lookup::Absent,
            Some([one]) => Lookup::One(one.clone()),
            Some(_) => Lookup::Repeated,
        }
    }
    fn content_type(&mut self) -> Option<Vec<u8>> {
        // Envoy keeps one content-type, joining repeats with a comma.
        let values = self.headers.get("content-type")?;
        Some(values.join(&b","[..]))
    }
    fn raw_path(&mut self) -> Option<Vec<u8>> {
        self.path.clone()
    }
    fn method(&mut self) -> Option<Vec<u8>> {
        self.method.clone()
    }
    fn authority(&mut self) -> Option<Vec<u8>> {
        self.authority.clone()
    }
    fn peer_address(&mut self) -> Option<String> {
        self.peer.clone()
    }
}

/// Each key's value and CAS token.
type Slots = HashMap<Vec<u8>, (Vec<u8>, u32)>;

/// Shared data with the host's semantics (a CAS token per key, a missing key created by
/// any write), for one thread.
#[derive(Debug, Default)]
struct Shared {
    map: RefCell<Slots>,
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
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        Ok(self.map.borrow().get(key).map(|(value, cas)| Versioned {
            value: value.clone(),
            cas: *cas,
        }))
    }

    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        let token = self.token();
        let mut map = self.map.borrow_mut();
        match map.get_mut(key) {
            Some(entry) if entry.1 != cas => Err(SetError::Conflict),
            Some(entry) => {
                *entry = (value.to_vec(), token);
                Ok(())
            }
            None => {
                map.insert(key.to_vec(), (value.to_vec(), token));
                Ok(())
            }
        }
    }

    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let token = self.token();
        self.map
            .borrow_mut()
            .insert(key.to_vec(), (value.to_vec(), token));
        Ok(())
    }
}
