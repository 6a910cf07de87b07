//! Reading what a response reports it cost (an LLM API's tokens), as it passes.
//!
//! A request whose rules have a response cost leaves the limiter with a
//! [`ResponseMeter`]: one [`RuleMeter`] per such rule, holding what it took at admission.
//! The host feeds it the response (headers, each body chunk, trailers) and never waits
//! for it: every chunk goes on as soon as it has been looked at. When the response is
//! done, or the request goes away first, [`ResponseMeter::finish`] turns what was seen
//! into one [`Charge`] per rule: the value the limiter settles (`Limiter::settle`).
//!
//! Where a cost is read, by the rule's [`UsageSource`]:
//! - a **header**: the response header, else the trailer of that name, a whole number
//!   from 0 to `u32::MAX`;
//! - **JSON paths**: a `text/event-stream` response is split into events ([`sse`]) and
//!   each event's data is scanned ([`json`]); any other response is scanned as one JSON
//!   document. For each path the last value seen counts (OpenAI's final chunk;
//!   Anthropic's `message_start`, then the cumulative `message_delta`); a rule's cost is
//!   the sum of its paths, saturating at `u32::MAX`.
//!
//! **One scan per response.** However many rules read the body, it is scanned once, for
//! the union of their paths (indexes in the configuration's one table of paths), and
//! each rule sums its own. Nothing of the body is kept: the scanners carry a few hundred
//! bytes of state from one chunk to the next, whatever the size, depth or number of
//! events, so a response's memory is fixed.
//!
//! A compressed body (`content-encoding` other than `identity`) cannot be scanned; the
//! host asks the upstream for `identity` on every request whose meter reads the body
//! ([`ResponseMeter::reads_json`]), so only an upstream that ignores that sends one.
//!
//! A response that reports no usage is charged the rule's `fallback`, with the reason;
//! one that reports more than the rule's `max` is charged `max`.

mod charge;
pub mod json;
pub mod sse;

pub use charge::{Charge, NoUsage, Usage};

use crate::config::{Config, ResponseCost, UsageSource};
use crate::request::descriptor::{Lookup, Values};
use crate::shared::local::Held;
use charge::usage;
use json::{Chosen, JsonScanner};
use smallvec::SmallVec;
use sse::{Piece, SseReader};

/// What the meter may read from a response's headers or trailers.
pub trait ResponseView {
    /// Every value of a header (or trailer), by lower-case name.
    fn header(&mut self, name: &str) -> Lookup;
}

/// The meters of one request (inline for one rule: the usual case), and the one scan of
/// its response's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMeter {
    rules: SmallVec<[RuleMeter; 1]>,
    /// The JSON paths any of the rules reads, as indexes in `Config::json_paths`.
    ids: SmallVec<[u8; 4]>,
    /// The last value seen at each of `ids`.
    last: SmallVec<[Option<u32>; 4]>,
    body: Body,
}

/// What one rule with a response cost holds and has seen so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMeter {
    /// The rule (index in the configuration).
    pub rule: usize,
    /// Its descriptor values (for a rule the rate limit service counts).
    pub values: Values,
    /// The tokens it holds in its local bucket (`None`: nothing was taken, e.g. a shadow
    /// rule that would have rejected the request).
    pub held: Option<Held>,
    /// Its JSON paths, as bits of the meter's `ids`.
    paths: u64,
    /// A header source's value, once read.
    header: Option<u32>,
    /// A header source's value is not a whole number, or is repeated.
    unreadable: bool,
}

/// How the body is read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// The response headers have not come yet.
    Waiting,
    /// No rule reads the body.
    Unread,
    /// The body is compressed: nothing in it can be read.
    Encoded,
    /// A stream of events, each scanned as a JSON document.
    Events {
        reader: SseReader,
        event: JsonScanner,
    },
    /// One JSON document.
    Document(JsonScanner),
}

/// How the response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It came to its end.
    Complete,
    /// The request went away before (the client left, or the stream was reset).
    CutOff,
}

impl RuleMeter {
    /// A meter for `rule`, holding `held` since admission.
    pub fn new(rule: usize, values: Values, held: Option<Held>) -> RuleMeter {
        RuleMeter {
            rule,
            values,
            held,
            paths: 0,
            header: None,
            unreadable: false,
        }
    }
}

impl ResponseMeter {
    /// A meter for these rules of `config` (`None` when there are none: nothing to
    /// read). Gathers the JSON paths they read, each once.
    pub fn new(config: &Config, mut rules: SmallVec<[RuleMeter; 1]>) -> Option<ResponseMeter> {
        if rules.is_empty() {
            return None;
        }
        let mut ids: SmallVec<[u8; 4]> = SmallVec::new();
        for m in &mut rules {
            if let Some(UsageSource::Json(paths)) = response_cost(config, m.rule).map(|c| &c.source)
            {
                for id in paths {
                    let at = match ids.iter().position(|i| i == id) {
                        Some(at) => at,
                        None => {
                            ids.push(*id);
                            ids.len() - 1
                        }
                    };
                    // Distinct paths are at most 64 (`MAX_DISTINCT_JSON_PATHS`).
                    m.paths |= 1u64 << at;
                }
            }
        }
        Some(ResponseMeter {
            rules,
            last: SmallVec::from_elem(None, ids.len()),
            ids,
            body: Body::Waiting,
        })
    }

    /// Whether some rule reads the body: the request then asks the upstream for an
    /// uncompressed one (`accept-encoding: identity`).
    pub fn reads_json(&self) -> bool {
        !self.ids.is_empty()
    }

    /// The response headers came: header sources are read, and how the body is framed
    /// (`content-encoding`, `content-type`) is learnt when a rule reads it.
    pub fn on_headers(&mut self, config: &Config, view: &mut impl ResponseView) {
        for m in &mut self.rules {
            if let Some(UsageSource::Header(name)) =
                response_cost(config, m.rule).map(|c| &c.source)
            {
                m.read_header(view, name);
            }
        }
        self.body = if self.ids.is_empty() {
            Body::Unread
        } else if !matches!(view.header("content-encoding"), Lookup::Absent)
            && !is_identity(view.header("content-encoding"))
        {
            Body::Encoded
        } else if matches!(view.header("content-type"), Lookup::One(t) if is_event_stream(&t)) {
            Body::Events {
                reader: SseReader::new(),
                event: JsonScanner::new(self.ids.len()),
            }
        } else {
            Body::Document(JsonScanner::new(self.ids.len()))
        };
    }

    /// Whether the body is read (only for a rule with JSON paths, and not compressed):
    /// the host copies no chunk otherwise.
    pub fn reads_body(&self) -> bool {
        matches!(
            self.body,
            Body::Waiting | Body::Events { .. } | Body::Document(_)
        )
    }

    /// A chunk of the response body (any piece of it: nothing is kept between calls but
    /// the scanners' state).
    pub fn on_body(&mut self, config: &Config, chunk: &[u8]) {
        let targets = Chosen {
            table: &config.json_paths,
            ids: &self.ids,
        };
        match &mut self.body {
            Body::Events { reader, event } => {
                let last = &mut self.last;
                let count = targets.ids.len();
                reader.feed(chunk, &mut |piece| match piece {
                    Piece::Data(data) => event.feed(&targets, data),
                    Piece::End => {
                        // An event that is not JSON (OpenAI's `[DONE]`) holds no usage.
                        if let Ok(found) = event.finish(&targets) {
                            merge(last, found);
                        }
                        event.reset(count);
                    }
                });
            }
            Body::Document(scanner) => scanner.feed(&targets, chunk),
            Body::Waiting | Body::Unread | Body::Encoded => {}
        }
    }

    /// The response trailers: a header source not found in the headers is looked for
    /// here.
    pub fn on_trailers(&mut self, config: &Config, view: &mut impl ResponseView) {
        for m in &mut self.rules {
            if let (None, false, Some(UsageSource::Header(name))) = (
                m.header,
                m.unreadable,
                response_cost(config, m.rule).map(|c| &c.source),
            ) {
                m.read_header(view, name);
            }
        }
    }

    /// What each rule's request cost, now that its response is over.
    pub fn finish(mut self, config: &Config, ended: Ended) -> SmallVec<[Charge; 1]> {
        let mut not_json = false;
        if let Body::Document(scanner) = &mut self.body {
            let targets = Chosen {
                table: &config.json_paths,
                ids: &self.ids,
            };
            let found = match ended {
                Ended::Complete => scanner.finish(&targets).ok(),
                // What a document cut off reported so far, as for a stream.
                Ended::CutOff => scanner.found_so_far(),
            };
            match found {
                Some(found) => merge(&mut self.last, found),
                None => not_json = true,
            }
        }
        let why_json = if ended == Ended::CutOff {
            NoUsage::CutOff
        } else {
            match self.body {
                Body::Encoded => NoUsage::Encoded,
                _ if not_json => NoUsage::Unreadable,
                Body::Events { .. } => NoUsage::StreamAbsent,
                _ => NoUsage::Absent,
            }
        };
        let last = &self.last;
        self.rules
            .into_iter()
            .filter_map(|m| {
                let cost = response_cost(config, m.rule)?;
                let (reported, why) = match cost.source {
                    UsageSource::Header(_) => (
                        m.header,
                        match (ended, m.unreadable) {
                            (Ended::CutOff, _) => NoUsage::CutOff,
                            (_, true) => NoUsage::Unreadable,
                            _ => NoUsage::Absent,
                        },
                    ),
                    UsageSource::Json(_) => (sum(last, m.paths), why_json),
                };
                Some(Charge {
                    usage: usage(cost, reported, why),
                    rule: m.rule,
                    values: m.values,
                    held: m.held,
                })
            })
            .collect()
    }
}

/// The sum of the values seen at the paths in `paths` (bits of `last`), saturating;
/// `None` when none was seen.
fn sum(last: &[Option<u32>], paths: u64) -> Option<u32> {
    last.iter()
        .enumerate()
        .filter(|(i, _)| paths & (1u64 << i) != 0)
        .filter_map(|(_, v)| *v)
        .fold(None, |sum: Option<u32>, n| {
            Some(sum.unwrap_or(0).saturating_add(n))
        })
}

impl RuleMeter {
    fn read_header(&mut self, view: &mut impl ResponseView, name: &str) {
        match view.header(name) {
            Lookup::Absent => {}
            Lookup::One(value) => match parse_usage(&value) {
                Some(n) => self.header = Some(n),
                None => self.unreadable = true,
            },
            Lookup::Repeated => self.unreadable = true,
        }
    }
}

/// The last value seen for each path wins.
fn merge(last: &mut [Option<u32>], found: &[Option<u32>]) {
    for (l, f) in last.iter_mut().zip(found) {
        if f.is_some() {
            *l = *f;
        }
    }
}

fn response_cost(config: &Config, rule: usize) -> Option<&ResponseCost> {
    config.rules.get(rule)?.response_cost.as_ref()
}

/// `content-encoding: identity` (whatever the case and spaces): the body is as sent.
fn is_identity(encoding: Lookup) -> bool {
    matches!(encoding, Lookup::One(v) if v.trim_ascii().eq_ignore_ascii_case(b"identity"))
}

/// `text/event-stream`, whatever the case and parameters.
fn is_event_stream(content_type: &[u8]) -> bool {
    let media = content_type.split(|&b| b == b';').next().unwrap_or(b"");
    media
        .trim_ascii()
        .eq_ignore_ascii_case(b"text/event-stream")
}

/// A usage header's value: digits only (surrounding spaces allowed), at most `u32::MAX`.
pub fn parse_usage(value: &[u8]) -> Option<u32> {
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
