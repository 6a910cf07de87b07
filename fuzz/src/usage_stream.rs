//! A response body as an LLM API's upstream may send it, through the usage scanners
//! ([`floodgate::usage`]): the SSE splitter, the JSON number reader and the meter that
//! ties them, fed in chunks of every size.
//!
//! Input: byte 0 picks the per-event cap (1 to 256 bytes, so that events overflow often),
//! byte 1 the chunk length (1 to 256); the rest is the body. It is read three ways: as
//! `text/event-stream` and as a JSON body by a meter summing two paths, and by a bare
//! splitter, whose events must never exceed the cap.

use floodgate::config::Config;
use floodgate::descriptor::{Lookup, Values};
use floodgate::usage::sse::{Event, SseSplitter};
use floodgate::usage::{Ended, ResponseMeter, ResponseView, RuleMeter, Usage};
use std::sync::OnceLock;

/// No headers: the cost is in the body.
struct NoHeaders;

impl ResponseView for NoHeaders {
    fn header(&mut self, _name: &str) -> Lookup {
        Lookup::Absent
    }
}

fn config(cap: u32) -> Config {
    let json = format!(
        r#"{{"rules":[{{"name":"llm","descriptors":[{{"key":"t","value":"x"}}],
        "local":{{"capacity":1000,"refill_per_second":1}},
        "cost":{{"response":{{"json":["message.usage.input_tokens","usage.output_tokens"],
        "fallback":3,"max_scan_bytes":{cap}}}}}}}]}}"#
    );
    Config::parse(json.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"))
}

/// One configuration per cap, parsed once.
fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| (1..=256).map(config).collect())
}

/// Scans the body `data` describes.
pub fn run(data: &[u8]) {
    let (Some(&cap), Some(&chunk)) = (data.first(), data.get(1)) else {
        return;
    };
    let cap = usize::from(cap) + 1;
    let chunk = usize::from(chunk) + 1;
    let body = &data[2..];
    let rules = &configs()[cap - 1].rules;

    for content_type in [&b"text/event-stream"[..], b"application/json"] {
        let meters = [RuleMeter::new(0, Values::new(), None)]
            .into_iter()
            .collect();
        let Some(mut meter) = ResponseMeter::new(meters) else {
            unreachable!("one rule");
        };
        meter.on_headers(rules, Some(content_type), &mut NoHeaders);
        for part in body.chunks(chunk) {
            meter.on_body(rules, part);
        }
        let charges = meter.finish(rules, Ended::Complete);
        assert_eq!(charges.len(), 1, "one charge per rule");
        if let Usage::Fallback { cost, .. } = charges[0].usage {
            assert_eq!(cost, 3, "the configured fallback");
        }
    }

    let mut splitter = SseSplitter::new(cap);
    for part in body.chunks(chunk) {
        splitter.feed(part, &mut |event| {
            if let Event::Data(d) = event {
                assert!(d.len() <= cap, "an event longer than the cap");
            }
        });
    }
}
