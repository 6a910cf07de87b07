//! A response body as an LLM API's upstream may send it, through the usage scanners
//! ([`floodgate::usage`]): the SSE reader, the streaming JSON scanner and the meter that
//! ties them, fed in chunks of every size.
//!
//! Input: bytes 0 and 1 pick two chunk lengths (1 to 256); the rest is the body. It is
//! read as `text/event-stream` and as a JSON body by a meter of two rules (three paths,
//! one shared), once per chunk length: where the body is cut must never change what is
//! charged. The bare scanner and the bare SSE reader are checked the same way.

use floodgate::config::{Config, JsonPath};
use floodgate::request::descriptor::{Lookup, Values};
use floodgate::usage::json::JsonScanner;
use floodgate::usage::sse::{Piece, SseReader};
use floodgate::usage::{Ended, ResponseMeter, ResponseView, RuleMeter, Usage};
use std::sync::OnceLock;

/// The response headers: only a content type.
struct Headers(&'static str);

impl ResponseView for Headers {
    fn header(&mut self, name: &str) -> Lookup {
        if name == "content-type" {
            Lookup::One(self.0.as_bytes().to_vec())
        } else {
            Lookup::Absent
        }
    }
}

/// Two rules reading three distinct paths, `usage.output_tokens` read by both.
fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let json = r#"{"rules":[
            {"name":"anthropic","descriptors":[{"key":"t","value":"x"}],
             "local":{"capacity":1000,"refill_per_second":1},
             "cost":{"response":{"json":["message.usage.input_tokens","usage.output_tokens"],
                                 "fallback":3,"max":500000}}},
            {"name":"openai","descriptors":[{"key":"t","value":"x"}],
             "local":{"capacity":1000,"refill_per_second":1},
             "cost":{"response":{"json":["usage.total_tokens","usage.output_tokens"]}}}]}"#;
        Config::parse(json.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"))
    })
}

/// What the meter charges each rule for `body` read in chunks of `chunk` bytes.
fn charged(content_type: &'static str, body: &[u8], chunk: usize) -> Vec<Usage> {
    let config = config();
    let meters = (0..2)
        .map(|r| RuleMeter::new(r, Values::new(), None))
        .collect();
    let Some(mut meter) = ResponseMeter::new(config, meters) else {
        unreachable!("two rules");
    };
    meter.on_headers(config, &mut Headers(content_type));
    for part in body.chunks(chunk) {
        meter.on_body(config, part);
    }
    meter
        .finish(config, Ended::Complete)
        .into_iter()
        .map(|c| c.usage)
        .collect()
}

/// The scanner's result for `body` in chunks of `chunk` bytes.
fn scanned(paths: &[JsonPath], body: &[u8], chunk: usize) -> Option<Vec<Option<u32>>> {
    let mut scanner = JsonScanner::new(paths.len());
    for part in body.chunks(chunk) {
        scanner.feed(paths, part);
    }
    scanner.finish(paths).ok().map(<[_]>::to_vec)
}

/// The data of each event the reader ends, for `body` in chunks of `chunk` bytes.
fn events(body: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let mut reader = SseReader::new();
    let (mut current, mut out) = (Vec::new(), Vec::new());
    for part in body.chunks(chunk) {
        reader.feed(part, &mut |piece| match piece {
            Piece::Data(d) => current.extend_from_slice(d),
            Piece::End => out.push(std::mem::take(&mut current)),
        });
    }
    out
}

/// Scans the body `data` describes.
pub fn run(data: &[u8]) {
    let (Some(&a), Some(&b)) = (data.first(), data.get(1)) else {
        return;
    };
    let (a, b) = (usize::from(a) + 1, usize::from(b) + 1);
    let body = &data[2..];
    for content_type in ["text/event-stream", "application/json"] {
        let first = charged(content_type, body, a);
        assert_eq!(
            first,
            charged(content_type, body, b),
            "chunking changed a charge"
        );
        assert_eq!(first.len(), 2, "one charge per rule");
        for (rule, usage) in first.iter().enumerate() {
            match (rule, *usage) {
                (0, Usage::Fallback { cost, .. }) => assert_eq!(cost, 3, "the fallback"),
                // The default fallback is the estimate (1).
                (1, Usage::Fallback { cost, .. }) => assert_eq!(cost, 1, "the fallback"),
                (0, Usage::Clamped { cost, .. }) => assert_eq!(cost, 500_000, "the max"),
                (_, u) => assert!(u.cost() <= 1_000_000, "at most the max"),
            }
        }
    }
    let paths = &config().json_paths;
    assert_eq!(
        scanned(paths, body, a),
        scanned(paths, body, b),
        "chunking changed what the scanner found"
    );
    assert_eq!(
        events(body, a),
        events(body, b),
        "chunking changed the events"
    );
}
