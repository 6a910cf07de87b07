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
//!   each event's data is searched ([`json`]); any other response is kept (up to
//!   `max_scan_bytes`) and searched as one JSON document when it ends. For each path the
//!   last value seen counts (OpenAI's final chunk; Anthropic's `message_start`, then the
//!   cumulative `message_delta`); the cost is their sum, saturating at `u32::MAX`.
//!
//! A response that reports no usage is charged the rule's `fallback`, with the reason.

pub mod json;
pub mod sse;

use crate::config::{ResponseCost, Rule, UsageSource, MAX_JSON_PATHS};
use crate::descriptor::{Lookup, Values};
use crate::local::Held;
use smallvec::SmallVec;
use sse::{Event, SseSplitter};

/// What the meter may read from a response's headers or trailers.
pub trait ResponseView {
    /// Every value of a header (or trailer), by lower-case name.
    fn header(&mut self, name: &str) -> Lookup;
}

/// The meters of one request (inline for one rule: the usual case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMeter {
    rules: SmallVec<[RuleMeter; 1]>,
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
    reading: Reading,
    seen: [Option<u32>; MAX_JSON_PATHS],
    skipped: u32,
    unreadable: bool,
}

/// How a rule reads the response.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    /// The response headers have not come yet.
    Waiting,
    /// A header or trailer holds the cost (its value, once read, is in `seen[0]`).
    Header,
    /// A stream of events.
    Events(SseSplitter),
    /// A body searched once it ends: what is kept so far.
    Body(Vec<u8>),
    /// A body longer than `max_scan_bytes`: the rest is not kept.
    BodyTooLarge,
}

/// How the response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It came to its end.
    Complete,
    /// The request went away before (the client left, or the stream was reset).
    CutOff,
}

/// What one rule's request cost, once its response is done: the value
/// `Limiter::settle` charges (locally) or reports (global rules: the stream-end charge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The rule.
    pub rule: usize,
    /// Its descriptor values.
    pub values: Values,
    /// The local tokens the request holds (taken at admission: the estimate).
    pub held: Option<Held>,
    /// What the request cost.
    pub usage: Usage,
    /// SSE events (or a JSON body) skipped for being longer than `max_scan_bytes`.
    pub skipped: u32,
}

/// A request's cost as the response reported it, or the fallback and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// The response reported this cost.
    Reported(u32),
    /// It reported none: the rule's `fallback` is charged.
    Fallback {
        /// The tokens charged.
        cost: u32,
        /// Why.
        why: NoUsage,
    },
}

impl Usage {
    /// The tokens the request costs in total.
    pub fn cost(&self) -> u32 {
        match *self {
            Usage::Reported(cost) | Usage::Fallback { cost, .. } => cost,
        }
    }
}

/// Why a response's cost is not known, in the order they are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoUsage {
    /// The request went away before the response reported one.
    CutOff,
    /// What could have held it was longer than `max_scan_bytes`.
    TooLarge,
    /// The body is not JSON, or the header is not a whole number (or is repeated).
    Unreadable,
    /// The response is complete and readable, and reports none.
    Absent,
}

impl RuleMeter {
    /// A meter for `rule`, holding `held` since admission.
    pub fn new(rule: usize, values: Values, held: Option<Held>) -> RuleMeter {
        RuleMeter {
            rule,
            values,
            held,
            reading: Reading::Waiting,
            seen: [None; MAX_JSON_PATHS],
            skipped: 0,
            unreadable: false,
        }
    }
}

impl ResponseMeter {
    /// A meter for these rules (`None` when there are none: nothing to read).
    pub fn new(rules: SmallVec<[RuleMeter; 1]>) -> Option<ResponseMeter> {
        (!rules.is_empty()).then_some(ResponseMeter { rules })
    }

    /// The response headers came, with this `content-type`.
    pub fn on_headers(
        &mut self,
        rules: &[Rule],
        content_type: Option<&[u8]>,
        view: &mut impl ResponseView,
    ) {
        let events = content_type.is_some_and(is_event_stream);
        for m in &mut self.rules {
            let Some(cost) = response_cost(rules, m.rule) else {
                continue;
            };
            m.reading = match &cost.source {
                UsageSource::Header(name) => {
                    m.read_header(view, name);
                    Reading::Header
                }
                UsageSource::Json(_) if events => {
                    Reading::Events(SseSplitter::new(cost.max_scan_bytes as usize))
                }
                UsageSource::Json(_) => Reading::Body(Vec::new()),
            };
        }
    }

    /// Whether any rule reads the body (a header source does not): the host reads no
    /// chunk otherwise.
    pub fn reads_body(&self) -> bool {
        self.rules.iter().any(|m| {
            matches!(
                m.reading,
                Reading::Events(_) | Reading::Body(_) | Reading::Waiting
            )
        })
    }

    /// A chunk of the response body.
    pub fn on_body(&mut self, rules: &[Rule], chunk: &[u8]) {
        for m in &mut self.rules {
            let Some(cost) = response_cost(rules, m.rule) else {
                continue;
            };
            m.on_body(cost, chunk);
        }
    }

    /// The response trailers: a header source not found in the headers is looked for
    /// here.
    pub fn on_trailers(&mut self, rules: &[Rule], view: &mut impl ResponseView) {
        for m in &mut self.rules {
            if let (Reading::Header, None, false) = (&m.reading, m.seen[0], m.unreadable) {
                if let Some(UsageSource::Header(name)) =
                    response_cost(rules, m.rule).map(|c| &c.source)
                {
                    m.read_header(view, name);
                }
            }
        }
    }

    /// What each rule's request cost, now that its response is over.
    pub fn finish(self, rules: &[Rule], ended: Ended) -> SmallVec<[Charge; 1]> {
        self.rules
            .into_iter()
            .filter_map(|m| {
                let cost = response_cost(rules, m.rule)?;
                Some(m.finish(cost, ended))
            })
            .collect()
    }
}

impl RuleMeter {
    fn read_header(&mut self, view: &mut impl ResponseView, name: &str) {
        match view.header(name) {
            Lookup::Absent => {}
            Lookup::One(value) => match parse_usage(&value) {
                Some(n) => self.seen[0] = Some(n),
                None => self.unreadable = true,
            },
            Lookup::Repeated => self.unreadable = true,
        }
    }

    fn on_body(&mut self, cost: &ResponseCost, chunk: &[u8]) {
        let UsageSource::Json(paths) = &cost.source else {
            return;
        };
        match &mut self.reading {
            Reading::Events(splitter) => {
                let (seen, skipped) = (&mut self.seen, &mut self.skipped);
                splitter.feed(chunk, &mut |event| match event {
                    Event::Data(data) => {
                        let mut found = [None; MAX_JSON_PATHS];
                        // An event that is not JSON (OpenAI's `[DONE]`) holds no usage.
                        if json::find_numbers(data, paths, &mut found).is_ok() {
                            merge(seen, &found);
                        }
                    }
                    Event::Skipped => *skipped += 1,
                });
            }
            Reading::Body(kept) => {
                if kept.len() + chunk.len() > cost.max_scan_bytes as usize {
                    self.reading = Reading::BodyTooLarge;
                    self.skipped += 1;
                } else {
                    kept.extend_from_slice(chunk);
                }
            }
            Reading::Waiting | Reading::Header | Reading::BodyTooLarge => {}
        }
    }

    fn finish(mut self, cost: &ResponseCost, ended: Ended) -> Charge {
        if let (Reading::Body(kept), UsageSource::Json(paths), Ended::Complete) =
            (&self.reading, &cost.source, ended)
        {
            let mut found = [None; MAX_JSON_PATHS];
            match json::find_numbers(kept, paths, &mut found) {
                Ok(()) => merge(&mut self.seen, &found),
                Err(_) => self.unreadable = true,
            }
        }
        let reported = self
            .seen
            .iter()
            .flatten()
            .fold(None, |sum: Option<u32>, &n| {
                Some(sum.unwrap_or(0).saturating_add(n))
            });
        let usage = match reported {
            Some(n) => Usage::Reported(n),
            None => Usage::Fallback {
                cost: cost.fallback,
                why: if ended == Ended::CutOff {
                    NoUsage::CutOff
                } else if self.skipped > 0 {
                    NoUsage::TooLarge
                } else if self.unreadable {
                    NoUsage::Unreadable
                } else {
                    NoUsage::Absent
                },
            },
        };
        Charge {
            rule: self.rule,
            values: self.values,
            held: self.held,
            usage,
            skipped: self.skipped,
        }
    }
}

/// The last value seen for each path wins.
fn merge(seen: &mut [Option<u32>; MAX_JSON_PATHS], found: &[Option<u32>; MAX_JSON_PATHS]) {
    for (s, f) in seen.iter_mut().zip(found) {
        if f.is_some() {
            *s = *f;
        }
    }
}

fn response_cost(rules: &[Rule], rule: usize) -> Option<&ResponseCost> {
    rules.get(rule)?.response_cost.as_ref()
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
