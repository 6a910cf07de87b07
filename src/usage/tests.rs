//! The scanners and the meter: the two public stream formats, the bounds, and properties
//! (splitting a stream anywhere changes nothing; memory never exceeds the cap; the JSON
//! reader agrees with serde_json).

use super::json::{find_numbers, NotJson};
use super::sse::{Event, SseSplitter};
use super::*;
use crate::config::{Config, JsonPath};
use proptest::prelude::*;

fn path(p: &str) -> JsonPath {
    JsonPath {
        keys: p.split('.').map(str::to_string).collect(),
    }
}

fn numbers(doc: &str, paths: &[&str]) -> Result<Vec<Option<u32>>, NotJson> {
    let paths: Vec<JsonPath> = paths.iter().map(|p| path(p)).collect();
    let mut found = vec![None; paths.len()];
    find_numbers(doc.as_bytes(), &paths, &mut found).map(|()| found)
}

/// Events as owned values (`None`: skipped), feeding `chunks` one after another.
fn events(cap: usize, chunks: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
    let mut s = SseSplitter::new(cap);
    let mut out = Vec::new();
    for chunk in chunks {
        s.feed(chunk, &mut |e| {
            out.push(match e {
                Event::Data(d) => Some(d.to_vec()),
                Event::Skipped => None,
            })
        });
    }
    out
}

#[test]
fn json_numbers_are_found_at_their_paths_only() {
    let doc = r#"{"id":"x","choices":[{"usage":{"total_tokens":7}}],
        "usage":{"prompt_tokens":10,"completion_tokens":32,"total_tokens":42}}"#;
    assert_eq!(
        numbers(
            doc,
            &["usage.total_tokens", "usage.prompt_tokens", "total_tokens"]
        ),
        Ok(vec![Some(42), Some(10), None])
    );
    // The last of two equal keys counts.
    assert_eq!(numbers(r#"{"a":1,"a":2}"#, &["a"]), Ok(vec![Some(2)]));
}

#[test]
fn only_whole_numbers_in_u32_are_a_usage() {
    for (value, expected) in [
        ("0", Some(0)),
        ("4294967295", Some(u32::MAX)),
        ("4294967296", None),
        ("99999999999999999999999", None),
        ("-1", None),
        ("1.5", None),
        ("1e3", None),
        ("10.0", None),
        ("null", None),
        (r#""12""#, None),
        ("{}", None),
    ] {
        let doc = format!(r#"{{"usage":{value}}}"#);
        assert_eq!(numbers(&doc, &["usage"]), Ok(vec![expected]), "{doc}");
    }
}

#[test]
fn what_is_not_json_is_told() {
    for doc in [
        "[DONE]",
        "",
        "{",
        r#"{"a":1}x"#,
        r#"{"a":01}"#,
        r#"{"a" 1}"#,
        "{\"a\":\"\u{1}\"}",
    ] {
        assert_eq!(numbers(doc, &["a"]), Err(NotJson), "{doc:?}");
    }
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    assert_eq!(numbers(&deep, &["a"]), Err(NotJson));
}

#[test]
fn sse_events_are_split_on_blank_lines_whatever_the_line_ends() {
    let stream = b"event: message_start\ndata: {\"a\":1}\n\n: comment\r\ndata:x\r\ndata: y\r\n\r\ndata: last\r\r";
    assert_eq!(
        events(1024, &[stream]),
        vec![
            Some(b"{\"a\":1}".to_vec()),
            Some(b"x\ny".to_vec()),
            Some(b"last".to_vec())
        ]
    );
    // An event with no data line is no event; an empty data line is one.
    assert_eq!(
        events(1024, &[b"id: 1\n\ndata\n\n"]),
        vec![Some(Vec::new())]
    );
    // A CRLF split across chunks is one line end, not two (which would end the event).
    assert_eq!(
        events(1024, &[b"data: a\r", b"\ndata: b\n\n"]),
        vec![Some(b"a\nb".to_vec())]
    );
}

#[test]
fn an_event_longer_than_the_cap_is_skipped_and_the_next_one_read() {
    let long = format!("data: {}\n\n", "x".repeat(100));
    let stream = format!("data: short\n\n{long}data: after\n\n");
    assert_eq!(
        events(50, &[stream.as_bytes()]),
        vec![Some(b"short".to_vec()), None, Some(b"after".to_vec())]
    );
}

/// A stream of events, some with usage, some not JSON, with every kind of line end.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let line_end = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
    let line = prop_oneof![
        "[a-z :{}\"0-9,.]{0,30}".prop_map(|s| format!("data: {s}")),
        (0u32..5000).prop_map(|n| format!("data: {{\"usage\":{{\"total_tokens\":{n}}}}}")),
        Just("event: x".to_string()),
        Just(": keep-alive".to_string()),
        Just(String::new()),
    ];
    proptest::collection::vec((line, line_end), 0..40).prop_map(|lines| {
        lines
            .into_iter()
            .flat_map(|(l, e)| format!("{l}{e}").into_bytes())
            .collect()
    })
}

proptest! {
    /// Where the stream is cut into chunks changes nothing.
    #[test]
    fn chunking_never_changes_the_events(
        stream in stream(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
        cap in prop_oneof![Just(16usize), Just(64), Just(4096)],
    ) {
        let whole = events(cap, &[&stream]);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for a in at {
            chunks.push(&stream[last..a]);
            last = a;
        }
        chunks.push(&stream[last..]);
        prop_assert_eq!(events(cap, &chunks), whole);
    }

    /// No event longer than the cap is ever handed out, and none kept grows past it.
    #[test]
    fn events_never_exceed_the_cap(bytes in proptest::collection::vec(any::<u8>(), 0..600), cap in 1usize..64) {
        for e in events(cap, &[&bytes]).into_iter().flatten() {
            prop_assert!(e.len() <= cap);
        }
    }

    /// The reader agrees with serde_json on what is JSON, and finds the same usage.
    #[test]
    fn the_reader_agrees_with_serde_json(
        value in proptest::collection::vec((0u64..6_000_000_000, any::<bool>()), 0..4),
        noise in "[ \\[\\]{}\":,a-z0-9.-]{0,20}",
    ) {
        let fields: Vec<String> = value
            .iter()
            .enumerate()
            .map(|(i, (n, nested))| if *nested {
                format!(r#""k{i}":{{"n":{n}}}"#)
            } else {
                format!(r#""k{i}":{n}"#)
            })
            .collect();
        for doc in [format!("{{{}}}", fields.join(",")), noise.clone()] {
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(&doc);
            let paths: Vec<JsonPath> = (0..value.len()).map(|i| path(&format!("k{i}.n"))).collect();
            let mut found = vec![None; paths.len()];
            let ours = find_numbers(doc.as_bytes(), &paths, &mut found);
            prop_assert_eq!(ours.is_ok(), parsed.is_ok(), "{}", doc);
            if let Ok(v) = parsed {
                for (i, f) in found.iter().enumerate() {
                    let theirs = v.pointer(&format!("/k{i}/n")).and_then(serde_json::Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok());
                    prop_assert_eq!(*f, theirs);
                }
            }
        }
    }
}

/// A meter over one rule of `config`, fed `content_type` and `chunks`.
fn meter(
    config: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    chunks: &[&[u8]],
    ended: Ended,
) -> Charge {
    let config = Config::parse(config.as_bytes()).unwrap();
    let mut m = ResponseMeter::new(
        [RuleMeter::new(0, Values::new(), None)]
            .into_iter()
            .collect(),
    )
    .unwrap();
    let mut view = crate::testing::FakeRequest::new(headers);
    m.on_headers(&config.rules, Some(content_type.as_bytes()), &mut view);
    for c in chunks {
        m.on_body(&config.rules, c);
    }
    m.on_trailers(&config.rules, &mut view);
    let mut charges = m.finish(&config.rules, ended);
    assert_eq!(charges.len(), 1);
    charges.remove(0)
}

fn rule(response: &str) -> String {
    format!(
        r#"{{"rules":[{{"name":"llm","descriptors":[{{"key":"t","header":"x-tenant-id"}}],
        "local":{{"capacity":1000,"refill_per_second":1}},"cost":{{"response":{response}}}}}]}}"#
    )
}

const OPENAI_SSE: &[&[u8]] = &[
    b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}],\"usage\":null}\n\n",
    b"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":",
    b"12,\"completion_tokens\":30,\"total_tokens\":42}}\n\n",
    b"data: [DONE]\n\n",
];

const ANTHROPIC_SSE: &[&[u8]] = &[
    b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
    b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"}}\n\n",
    b"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n",
    b"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n",
    b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];

const ANTHROPIC: &str = r#"{"json":["message.usage.input_tokens","usage.output_tokens"]}"#;

#[test]
fn an_openai_stream_is_charged_its_final_usage() {
    let c = meter(
        &rule(r#"{"json":"usage.total_tokens"}"#),
        "text/event-stream; charset=utf-8",
        &[],
        OPENAI_SSE,
        Ended::Complete,
    );
    assert_eq!(c.usage, Usage::Reported(42));
}

#[test]
fn an_anthropic_stream_is_charged_input_plus_the_last_cumulative_output() {
    let c = meter(
        &rule(ANTHROPIC),
        "text/event-stream",
        &[],
        ANTHROPIC_SSE,
        Ended::Complete,
    );
    assert_eq!(c.usage, Usage::Reported(25 + 40));
    // Cut off after the first delta: what it reported so far.
    let c = meter(
        &rule(ANTHROPIC),
        "text/event-stream",
        &[],
        &ANTHROPIC_SSE[..3],
        Ended::CutOff,
    );
    assert_eq!(c.usage, Usage::Reported(25 + 15));
}

#[test]
fn a_json_body_is_read_when_it_ends() {
    let body: &[&[u8]] = &[
        b"{\"id\":\"r\",\"usage\":{\"prompt_tokens\":3,",
        b"\"total_tokens\":9}}",
    ];
    let c = meter(
        &rule(r#"{"json":"usage.total_tokens"}"#),
        "application/json",
        &[],
        body,
        Ended::Complete,
    );
    assert_eq!(c.usage, Usage::Reported(9));
}

#[test]
fn what_cannot_be_charged_gets_the_fallback_and_says_why() {
    let json = r#"{"json":"usage.total_tokens","fallback":7,"max_scan_bytes":64}"#;
    let fallback = |why| Usage::Fallback { cost: 7, why };
    let cases: [(&str, &[&[u8]], Ended, NoUsage); 5] = [
        (
            "application/json",
            &[b"{\"usage\":null}"],
            Ended::Complete,
            NoUsage::Absent,
        ),
        (
            "text/html",
            &[b"<html>"],
            Ended::Complete,
            NoUsage::Unreadable,
        ),
        (
            "application/json",
            &[&[b' '; 65]],
            Ended::Complete,
            NoUsage::TooLarge,
        ),
        (
            "application/json",
            &[b"{\"usage\":{\"total_tokens\":5}}"],
            Ended::CutOff,
            NoUsage::CutOff,
        ),
        (
            "text/event-stream",
            &[b"data: {\"a\":1}\n\n"],
            Ended::Complete,
            NoUsage::Absent,
        ),
    ];
    for (content_type, chunks, ended, why) in cases {
        let c = meter(&rule(json), content_type, &[], chunks, ended);
        assert_eq!(c.usage, fallback(why), "{content_type} {chunks:?}");
    }
}

#[test]
fn a_header_source_reads_the_header_then_the_trailer() {
    let header = rule(r#"{"header":"x-usage-tokens"}"#);
    let c = meter(
        &header,
        "text/plain",
        &[("x-usage-tokens", " 120 ")],
        &[b"ok"],
        Ended::Complete,
    );
    assert_eq!(c.usage, Usage::Reported(120));
    let c = meter(
        &header,
        "text/plain",
        &[("x-usage-tokens", "12x")],
        &[],
        Ended::Complete,
    );
    assert_eq!(
        c.usage,
        Usage::Fallback {
            cost: 1,
            why: NoUsage::Unreadable
        }
    );
    let c = meter(&header, "text/plain", &[], &[], Ended::Complete);
    assert_eq!(
        c.usage,
        Usage::Fallback {
            cost: 1,
            why: NoUsage::Absent
        }
    );
}
