//! From a request to the descriptors and costs of the rules that apply to it, refusing
//! input that would let a client dodge a limit.
//!
//! The request is read through [`RequestView`], so this module never calls the host:
//! the host layer implements the trait with host calls made only when a rule needs a
//! value (ordinary headers come all at once, pseudo-headers one by one), and tests
//! implement it with a list.

use crate::config::{Entry, Match, Rule, Source};
pub use crate::request::header_map::Lookup;
use smallvec::SmallVec;

/// What the rules may read from a request. Values are raw bytes: header values may hold
/// obs-text, and two distinct byte strings must never become one bucket. Every method
/// returns `None` (or [`Lookup::Absent`]) when the value is absent; implementations may
/// fetch lazily and cache.
pub trait RequestView {
    /// Every value of a request header, by lower-case name: a header sent twice is
    /// [`Lookup::Repeated`], never its first value.
    fn header(&mut self, name: &str) -> Lookup;
    /// The `content-type` (Envoy keeps one, joining repeats), only to frame a reply.
    fn content_type(&mut self) -> Option<Vec<u8>>;
    /// The `:path` pseudo-header, query string included.
    fn raw_path(&mut self) -> Option<Vec<u8>>;
    /// The `:method` pseudo-header.
    fn method(&mut self) -> Option<Vec<u8>>;
    /// The `:authority` pseudo-header.
    fn authority(&mut self) -> Option<Vec<u8>>;
    /// The downstream peer address as the proxy reports it, e.g. `10.0.0.1:5678` or
    /// `[::1]:5678`.
    fn peer_address(&mut self) -> Option<String>;
}

/// Descriptor values of one rule, in entry order, as raw bytes. Inline for up to four
/// entries: these small vectors are built on every request, and the heap costs more
/// than the work.
pub type Values = SmallVec<[Vec<u8>; 4]>;

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

/// Why a request is refused (400, gRPC INVALID_ARGUMENT) before any limit is checked:
/// each is a way a client could otherwise be charged less than it asks for, or land in
/// a bucket that is not its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A cost header that is not a whole number from 1 to `u32::MAX`.
    InvalidCost {
        /// The header's name.
        header: String,
    },
    /// A cost or descriptor header sent more than once: the filter would count one
    /// value while the upstream also receives the others.
    RepeatedHeader {
        /// The header's name.
        header: String,
    },
    /// A descriptor value longer than `max_descriptor_value_bytes`.
    ValueTooLong {
        /// The descriptor key.
        key: String,
        /// The configured maximum.
        max: usize,
    },
    /// A global rule's descriptor value that is not UTF-8: the rate limit service's
    /// descriptor values are protobuf strings, which cannot carry it.
    NotUtf8 {
        /// The descriptor key.
        key: String,
    },
}

/// The rules that apply to the request, in configuration order: those whose `match`
/// holds and whose every descriptor entry has a value. A value that cannot be used
/// (repeated, longer than `max_value_bytes`, or not UTF-8 for a global rule) refuses
/// the whole request: skipping the rule would let the client bypass it.
pub fn applicable(
    rules: &[Rule],
    max_value_bytes: usize,
    request: &mut impl RequestView,
) -> Result<AppliedRules, Refusal> {
    let mut cache = Pseudo::default();
    let mut applied = AppliedRules::new();
    'rules: for (i, rule) in rules.iter().enumerate() {
        if !matches(&rule.matcher, request, &mut cache) {
            continue;
        }
        let mut values = Values::new();
        for entry in &rule.entries {
            let Some(v) = value(entry, request, &mut cache)? else {
                continue 'rules;
            };
            if v.len() > max_value_bytes {
                return Err(Refusal::ValueTooLong {
                    key: entry.key.clone(),
                    max: max_value_bytes,
                });
            }
            if rule.limit.is_asked() && !is_utf8(&v) {
                return Err(Refusal::NotUtf8 {
                    key: entry.key.clone(),
                });
            }
            values.push(v);
        }
        applied.push(Applied { rule: i, values });
    }
    Ok(applied)
}

/// Each applied rule's cost: 1, its cost header's value, or the estimate of a cost the
/// response will report. Refused when a cost header
/// is not a whole number from 1 to `u32::MAX`, or is sent more than once. Inline for up
/// to two rules, as the limiter's per-bucket results are: no heap on the common path.
pub fn costs(
    rules: &[Rule],
    applied: &[Applied],
    request: &mut impl RequestView,
) -> Result<SmallVec<[u32; 2]>, Refusal> {
    // A plain loop, not a `collect` into `Result`: the adapter that stops at the first
    // error cost ~50 instructions a request.
    let mut costs = SmallVec::new();
    for a in applied {
        costs.push(cost(&rules[a.rule], request)?);
    }
    Ok(costs)
}

/// One applied rule's cost (see [`costs`]).
fn cost(rule: &Rule, request: &mut impl RequestView) -> Result<u32, Refusal> {
    if let Some(response) = &rule.response_cost {
        // Known only once the response is done: admitted on the estimate.
        return Ok(response.estimate);
    }
    let Some(header) = &rule.cost_header else {
        return Ok(1);
    };
    match request.header(header) {
        Lookup::Absent => Ok(1),
        Lookup::One(value) => std::str::from_utf8(&value)
            .ok()
            .and_then(parse_cost)
            .ok_or_else(|| Refusal::InvalidCost {
                header: header.clone(),
            }),
        Lookup::Repeated => Err(Refusal::RepeatedHeader {
            header: header.clone(),
        }),
    }
}

/// Whether `value` is UTF-8: `is_ascii` first, the full check only for a value with a
/// byte above 0x7f. Descriptor values are nearly always ASCII, and `str::from_utf8`
/// sets up ~125 instructions of work even for five ASCII bytes.
fn is_utf8(value: &[u8]) -> bool {
    value.is_ascii() || std::str::from_utf8(value).is_ok()
}

/// A cost header's value: a whole number from 1 to `u32::MAX`, digits only.
pub fn parse_cost(value: &str) -> Option<u32> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().filter(|&n| n >= 1)
}

/// The path and method, fetched at most once per request: most rules match on them.
#[derive(Default)]
struct Pseudo {
    path: Option<Option<Vec<u8>>>,
    method: Option<Option<Vec<u8>>>,
}

impl Pseudo {
    fn path(&mut self, request: &mut impl RequestView) -> Option<&[u8]> {
        self.path
            .get_or_insert_with(|| request.raw_path().map(|p| strip_query(&p).to_vec()))
            .as_deref()
    }

    fn method(&mut self, request: &mut impl RequestView) -> Option<&[u8]> {
        self.method
            .get_or_insert_with(|| request.method())
            .as_deref()
    }
}

fn matches(m: &Match, request: &mut impl RequestView, cache: &mut Pseudo) -> bool {
    if let Some(prefix) = &m.path_prefix {
        match cache.path(request) {
            Some(path) if path.starts_with(prefix.as_bytes()) => {}
            _ => return false,
        }
    }
    if !m.methods.is_empty() {
        match cache.method(request) {
            Some(method) if m.methods.iter().any(|allowed| allowed.as_bytes() == method) => {}
            _ => return false,
        }
    }
    true
}

/// The value of one entry; `Ok(None)` (and so "rule does not apply") when absent or
/// empty, `Err` when the header is repeated.
fn value(
    entry: &Entry,
    request: &mut impl RequestView,
    cache: &mut Pseudo,
) -> Result<Option<Vec<u8>>, Refusal> {
    let v = match &entry.source {
        Source::Header(name) => match request.header(name) {
            Lookup::Absent => None,
            Lookup::One(v) => Some(v),
            Lookup::Repeated => {
                return Err(Refusal::RepeatedHeader {
                    header: name.clone(),
                })
            }
        },
        Source::Value(v) => Some(v.as_bytes().to_vec()),
        Source::Path => cache.path(request).map(<[u8]>::to_vec),
        Source::Method => cache.method(request).map(<[u8]>::to_vec),
        Source::Authority => request.authority(),
        Source::RemoteAddress => request
            .peer_address()
            .map(|a| strip_port(&a).as_bytes().to_vec()),
    };
    Ok(v.filter(|v| !v.is_empty()))
}

/// The path without its query string or fragment.
pub fn strip_query(path: &[u8]) -> &[u8] {
    match path.iter().position(|&b| b == b'?' || b == b'#') {
        Some(end) => &path[..end],
        None => path,
    }
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

#[cfg(test)]
mod tests;
