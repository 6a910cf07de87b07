//! From a request to the descriptors of the rules that apply to it.
//!
//! The request is read through [`RequestView`], so this module never calls the host:
//! the host layer implements the trait with header and property look-ups (each one a
//! host call, made only when a rule needs that value), and tests implement it with a map.

use crate::bucket::Quota;
use crate::config::{Entry, Match, Rule, Source};
use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;
use std::hash::Hasher;

/// What the rules may read from a request. Every method returns `None` when the value
/// is absent; implementations may fetch lazily and cache.
pub trait RequestView {
    /// A request header by lower-case name.
    fn header(&mut self, name: &str) -> Option<String>;
    /// The `:path` pseudo-header, query string included.
    fn raw_path(&mut self) -> Option<String>;
    /// The `:method` pseudo-header.
    fn method(&mut self) -> Option<String>;
    /// The `:authority` pseudo-header.
    fn authority(&mut self) -> Option<String>;
    /// The downstream peer address as the proxy reports it, e.g. `10.0.0.1:5678` or
    /// `[::1]:5678`.
    fn peer_address(&mut self) -> Option<String>;
}

/// Descriptor values of one rule, in entry order. Inline for up to four entries: these
/// small vectors are built on every request, and the heap costs more than the work.
pub type Values = SmallVec<[String; 4]>;

/// The rules that apply to one request (inline for up to four).
pub type AppliedRules = SmallVec<[Applied; 4]>;

/// A rule that applies to the request, with its descriptor values in entry order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Index of the rule in the configuration.
    pub rule: usize,
    /// One value per descriptor entry of the rule.
    pub values: Values,
}

/// The rules that apply to the request, in configuration order: those whose `match`
/// holds and whose every descriptor entry has a value.
pub fn applicable(rules: &[Rule], request: &mut impl RequestView) -> AppliedRules {
    let mut cache = Pseudo::default();
    let mut applied = AppliedRules::new();
    for (i, rule) in rules.iter().enumerate() {
        if !matches(&rule.matcher, request, &mut cache) {
            continue;
        }
        let values = rule
            .entries
            .iter()
            .map(|entry| value(entry, request, &mut cache))
            .collect::<Option<Values>>();
        if let Some(values) = values {
            applied.push(Applied { rule: i, values });
        }
    }
    applied
}

/// The path and method, fetched at most once per request: most rules match on them.
#[derive(Default)]
struct Pseudo {
    path: Option<Option<String>>,
    method: Option<Option<String>>,
}

impl Pseudo {
    fn path(&mut self, request: &mut impl RequestView) -> Option<&str> {
        self.path
            .get_or_insert_with(|| request.raw_path().map(|p| strip_query(&p).to_string()))
            .as_deref()
    }

    fn method(&mut self, request: &mut impl RequestView) -> Option<&str> {
        self.method
            .get_or_insert_with(|| request.method())
            .as_deref()
    }
}

fn matches(m: &Match, request: &mut impl RequestView, cache: &mut Pseudo) -> bool {
    if let Some(prefix) = &m.path_prefix {
        match cache.path(request) {
            Some(path) if path.starts_with(prefix.as_str()) => {}
            _ => return false,
        }
    }
    if !m.methods.is_empty() {
        match cache.method(request) {
            Some(method) if m.methods.iter().any(|allowed| allowed == method) => {}
            _ => return false,
        }
    }
    true
}

/// The value of one entry; `None` (and so "rule does not apply") when absent or empty.
fn value(entry: &Entry, request: &mut impl RequestView, cache: &mut Pseudo) -> Option<String> {
    let v = match &entry.source {
        Source::Header(name) => request.header(name),
        Source::Value(v) => Some(v.clone()),
        Source::Path => cache.path(request).map(str::to_string),
        Source::Method => cache.method(request).map(str::to_string),
        Source::Authority => request.authority(),
        Source::RemoteAddress => request.peer_address().map(|a| strip_port(&a).to_string()),
    }?;
    (!v.is_empty()).then_some(v)
}

/// The path without its query string or fragment.
pub fn strip_query(path: &str) -> &str {
    path.split(['?', '#']).next().unwrap_or(path)
}

/// The IP of an `ip:port` or `[ipv6]:port` address; anything else is returned as is.
pub fn strip_port(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match address.rsplit_once(':') {
        // Exactly one colon: IPv4 with port. More colons: a bare IPv6 address.
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => address,
    }
}

/// A 128-bit identity of one bucket: the rule (name and quota, so that a changed limit
/// starts afresh) and the descriptor values. Stored instead of the values themselves so
/// that a bucket's size never depends on what clients send.
///
/// SipHash with fixed keys keeps it identical in every worker's VM; 128 bits make an
/// accidental collision negligible at any table size.
pub fn fingerprint(rule: &str, quota: Quota, values: &[String]) -> u128 {
    keyed_fingerprint(0x6275_636b_6574_7631, rule, quota, values)
}

/// The identity of a global rule's fallback bucket. Hashed with its own key ("fallbk01"),
/// so it can never be a local bucket's even where their rule, quota and values coincide
/// (they cannot today: rule names are unique), and a fallback bucket never shares a slot
/// identity with a local one.
pub fn fallback_fingerprint(rule: &str, quota: Quota, values: &[String]) -> u128 {
    keyed_fingerprint(0x6661_6c6c_626b_3031, rule, quota, values)
}

fn keyed_fingerprint(key: u64, rule: &str, quota: Quota, values: &[String]) -> u128 {
    let mut h = SipHasher13::new_with_keys(0x666c_6f6f_6467_6174, key);
    write_field(&mut h, rule.as_bytes());
    h.write_u32(quota.capacity());
    h.write_u64(quota.rate_micro());
    for v in values {
        write_field(&mut h, v.as_bytes());
    }
    h.finish128().as_u128()
}

/// Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
fn write_field(h: &mut SipHasher13, bytes: &[u8]) {
    h.write_u64(bytes.len() as u64);
    h.write(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::testing::FakeRequest;

    fn rules(json: &str) -> Vec<Rule> {
        Config::parse(json.as_bytes()).unwrap().rules
    }

    const TWO_RULES: &str = r#"{"rules":[
        {"name":"api","match":{"path_prefix":"/api/","methods":["GET"]},
         "descriptors":[{"key":"tenant","header":"x-tenant"},{"key":"ip","source":"remote_address"},
                        {"key":"route","value":"api"},{"key":"path","source":"path"},
                        {"key":"host","source":"authority"},{"key":"m","source":"method"}],
         "local":{"capacity":1,"refill_per_second":1}},
        {"name":"all","descriptors":[{"key":"tenant","header":"x-tenant"}],
         "local":{"capacity":1,"refill_per_second":1}}]}"#;

    #[test]
    fn every_source_produces_its_value() {
        let rules = rules(TWO_RULES);
        let mut req = FakeRequest::new(&[
            (":path", "/api/items?page=2"),
            (":method", "GET"),
            (":authority", "example.com"),
            ("x-tenant", "acme"),
        ]);
        let applied = applicable(&rules, &mut req);
        assert_eq!(
            applied.to_vec(),
            vec![
                Applied {
                    rule: 0,
                    values: smallvec::smallvec![
                        "acme".into(),
                        "10.1.2.3".into(),
                        "api".into(),
                        "/api/items".into(),
                        "example.com".into(),
                        "GET".into()
                    ]
                },
                Applied {
                    rule: 1,
                    values: smallvec::smallvec!["acme".into()]
                }
            ]
        );
    }

    #[test]
    fn match_on_path_and_method_filters_rules() {
        let rules = rules(TWO_RULES);
        for (path, method) in [("/other", "GET"), ("/api/x", "POST"), ("/ap", "GET")] {
            let mut req =
                FakeRequest::new(&[(":path", path), (":method", method), ("x-tenant", "t")]);
            let applied: Vec<usize> = applicable(&rules, &mut req)
                .iter()
                .map(|a| a.rule)
                .collect();
            assert_eq!(applied, vec![1], "{method} {path}");
        }
    }

    #[test]
    fn a_missing_or_empty_header_means_the_rule_does_not_apply() {
        let rules = rules(TWO_RULES);
        let mut absent = FakeRequest::new(&[(":path", "/api/x"), (":method", "GET")]);
        assert!(applicable(&rules, &mut absent).is_empty());
        let mut empty =
            FakeRequest::new(&[(":path", "/api/x"), (":method", "GET"), ("x-tenant", "")]);
        assert!(applicable(&rules, &mut empty).is_empty());
    }

    #[test]
    fn path_and_method_are_fetched_once() {
        let rules = rules(TWO_RULES);
        let mut req = FakeRequest::new(&[
            (":path", "/api/x"),
            (":method", "GET"),
            (":authority", "h"),
            ("x-tenant", "t"),
        ]);
        applicable(&rules, &mut req);
        // path, method, x-tenant (twice: once per rule), peer, authority.
        assert_eq!(req.lookups, 6);
    }

    #[test]
    fn ports_are_stripped_from_ipv4_and_ipv6() {
        assert_eq!(strip_port("10.0.0.1:8080"), "10.0.0.1");
        assert_eq!(strip_port("[::1]:443"), "::1");
        assert_eq!(strip_port("[2001:db8::7]:1"), "2001:db8::7");
        assert_eq!(strip_port("2001:db8::7"), "2001:db8::7");
        assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
        assert_eq!(strip_port("/var/run/sock"), "/var/run/sock");
    }

    #[test]
    fn queries_and_fragments_are_stripped_from_paths() {
        assert_eq!(strip_query("/a/b?c=d"), "/a/b");
        assert_eq!(strip_query("/a#frag"), "/a");
        assert_eq!(strip_query("/"), "/");
        assert_eq!(strip_query(""), "");
    }

    #[test]
    fn fingerprints_separate_rules_values_and_limits() {
        let q = Quota::new(1, 1_000_000).unwrap();
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let base = fingerprint("all", q, &v(&["acme"]));
        assert_eq!(base, fingerprint("all", q, &v(&["acme"])));
        assert_ne!(base, fingerprint("all", q, &v(&["acme2"])));
        assert_ne!(base, fingerprint("api", q, &v(&["acme"])));
        assert_ne!(
            fingerprint("all", q, &v(&["ab", "c"])),
            fingerprint("all", q, &v(&["a", "bc"]))
        );
        let changed = Quota::new(2, 1_000_000).unwrap();
        assert_ne!(base, fingerprint("all", changed, &v(&["acme"])));
        assert_ne!(base, fallback_fingerprint("all", q, &v(&["acme"])));
    }

    /// Pins the fingerprint so that a change to it (which resets every bucket of a
    /// running Envoy on upgrade) is a deliberate one.
    #[test]
    fn fingerprint_is_stable() {
        let q = Quota::new(1, 1_000_000).unwrap();
        assert_eq!(
            fingerprint("all", q, &["acme".to_string()]),
            0x1e9e_7f9a_07de_714b_5193_2f28_bd77_680d
        );
    }
}
