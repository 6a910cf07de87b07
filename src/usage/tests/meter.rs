//! The meter: both public APIs' answers and streams, what is charged when no usage can be
//! read and why, the `max` clamp, and one scan for every rule of a response.

use crate::config::Config;
use crate::request::descriptor::Values;
use crate::testing::FakeRequest;
use crate::usage::*;

/// The charges for the rules of `config` (all of them), given these response headers
/// (`content-type` among them) and body `chunks`, ending as `ended`.
fn charges(config: &str, headers: &[(&str, &str)], chunks: &[&[u8]], ended: Ended) -> Vec<Usage> {
    let config = Config::parse(config.as_bytes()).unwrap();
    let rules = (0..config.rules.len())
        .map(|r| RuleMeter::new(r, Values::new(), None))
        .collect();
    let mut m = ResponseMeter::new(&config, rules).unwrap();
    let mut view = FakeRequest::new(headers);
    m.on_headers(&config, &mut view);
    for c in chunks {
        m.on_body(&config, c);
    }
    m.on_trailers(&config, &mut view);
    m.finish(&config, ended)
        .into_iter()
        .map(|c| c.usage)
        .collect()
}

/// The charge for one rule's `response` cost.
fn meter(response: &str, content_type: &str, chunks: &[&[u8]], ended: Ended) -> Usage {
    let headers = [("content-type", content_type)];
    charges(&rule(response), &headers, chunks, ended)[0]
}

fn rule(response: &str) -> String {
    rules(&[response])
}

/// One rule per response cost, each its own bucket.
fn rules(responses: &[&str]) -> String {
    let rules: Vec<String> = responses
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                r#"{{"name":"llm{i}","descriptors":[{{"key":"t","header":"x-tenant-id"}}],
                "local":{{"capacity":1000,"refill_per_second":1}},"cost":{{"response":{r}}}}}"#
            )
        })
        .collect();
    format!(r#"{{"rules":[{}]}}"#, rules.join(","))
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

const OPENAI: &str = r#"{"json":"usage.total_tokens"}"#;
const ANTHROPIC: &str = r#"{"json":["message.usage.input_tokens","usage.output_tokens"]}"#;

#[test]
fn an_openai_stream_is_charged_its_final_usage() {
    let usage = meter(
        OPENAI,
        "text/event-stream; charset=utf-8",
        OPENAI_SSE,
        Ended::Complete,
    );
    assert_eq!(usage, Usage::Reported(42));
}

#[test]
fn an_anthropic_stream_is_charged_input_plus_the_last_cumulative_output() {
    let usage = meter(
        ANTHROPIC,
        "text/event-stream",
        ANTHROPIC_SSE,
        Ended::Complete,
    );
    assert_eq!(usage, Usage::Reported(25 + 40));
    // Cut off after the first delta: what it reported so far.
    let usage = meter(
        ANTHROPIC,
        "text/event-stream",
        &ANTHROPIC_SSE[..3],
        Ended::CutOff,
    );
    assert_eq!(usage, Usage::Reported(25 + 15));
}

#[test]
fn a_json_body_is_scanned_across_its_chunks() {
    let body: &[&[u8]] = &[
        b"{\"id\":\"r\",\"usage\":{\"prompt_tokens\":3,",
        b"\"total_",
        b"tokens\":9}}",
    ];
    let usage = meter(OPENAI, "application/json", body, Ended::Complete);
    assert_eq!(usage, Usage::Reported(9));
}

/// Response headers, body chunks, how it ended, and why it cannot be charged.
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a [u8]], Ended, NoUsage);

#[test]
fn what_cannot_be_charged_gets_the_fallback_and_says_why() {
    let json = r#"{"json":"usage.total_tokens","fallback":7}"#;
    let fallback = |why| Usage::Fallback { cost: 7, why };
    let cases: [Case; 6] = [
        (
            &[("content-type", "application/json")],
            &[b"{\"usage\":null}"],
            Ended::Complete,
            NoUsage::Absent,
        ),
        (
            &[("content-type", "text/html")],
            &[b"<html>"],
            Ended::Complete,
            NoUsage::Unreadable,
        ),
        (
            &[
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            &[b"\x1f\x8b\x08\x00"],
            Ended::Complete,
            NoUsage::Encoded,
        ),
        (
            &[("content-type", "application/json")],
            &[b"{\"choices\":[{\"message\":"],
            Ended::CutOff,
            NoUsage::CutOff,
        ),
        (
            &[("content-type", "text/event-stream")],
            &[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"],
            Ended::Complete,
            NoUsage::StreamAbsent,
        ),
        (
            &[("content-type", "text/event-stream")],
            &[b"data: {\"usage\":{\"total_tokens\":5}}"],
            Ended::CutOff,
            NoUsage::CutOff,
        ),
    ];
    for (headers, chunks, ended, why) in cases {
        let usage = charges(&rule(json), headers, chunks, ended)[0];
        assert_eq!(usage, fallback(why), "{headers:?} {chunks:?}");
    }
    // `content-encoding: identity` is a plain body.
    let usage = charges(
        &rule(json),
        &[("content-encoding", "Identity ")],
        &[b"{\"usage\":{\"total_tokens\":5}}"],
        Ended::Complete,
    )[0];
    assert_eq!(usage, Usage::Reported(5));
}

/// A JSON body cut off after its usage was charged what it reported, as a stream is.
#[test]
fn a_json_body_cut_off_after_its_usage_is_charged_it() {
    let usage = meter(
        OPENAI,
        "application/json",
        &[b"{\"usage\":{\"total_tokens\":5},\"choices\":["],
        Ended::CutOff,
    );
    assert_eq!(usage, Usage::Reported(5));
}

#[test]
fn the_fallback_defaults_to_the_estimate() {
    let usage = meter(
        r#"{"json":"usage.total_tokens","estimate":40}"#,
        "application/json",
        &[b"{}"],
        Ended::Complete,
    );
    assert_eq!(
        usage,
        Usage::Fallback {
            cost: 40,
            why: NoUsage::Absent
        }
    );
}

/// A response reporting more than the rule's `max` is charged `max`, and says so; the
/// default `max` is a million.
#[test]
fn a_cost_above_max_is_clamped() {
    let body: &[&[u8]] = &[b"{\"usage\":{\"total_tokens\":4294967295}}"];
    let usage = meter(OPENAI, "application/json", body, Ended::Complete);
    assert_eq!(
        usage,
        Usage::Clamped {
            reported: u32::MAX,
            cost: 1_000_000
        }
    );
    let capped = r#"{"json":"usage.total_tokens","max":5000}"#;
    let usage = meter(capped, "application/json", body, Ended::Complete);
    assert_eq!(usage.cost(), 5000);
    let exact = meter(
        capped,
        "application/json",
        &[b"{\"usage\":{\"total_tokens\":5000}}"],
        Ended::Complete,
    );
    assert_eq!(exact, Usage::Reported(5000));
}

/// Rules reading the same body share one scan: each sums its own paths, and a path two
/// rules read is found once for both.
#[test]
fn several_rules_share_one_scan_and_each_sums_its_own_paths() {
    let config = rules(&[
        OPENAI,
        r#"{"json":["usage.total_tokens","usage.extra"]}"#,
        r#"{"json":"usage.extra"}"#,
        r#"{"header":"x-usage"}"#,
    ]);
    let body: &[&[u8]] = &[b"{\"usage\":{\"total_tokens\":30,\"extra\":4}}"];
    let headers = [("content-type", "application/json"), ("x-usage", "9")];
    assert_eq!(
        charges(&config, &headers, body, Ended::Complete),
        vec![
            Usage::Reported(30),
            Usage::Reported(34),
            Usage::Reported(4),
            Usage::Reported(9)
        ]
    );
    let parsed = Config::parse(config.as_bytes()).unwrap();
    assert_eq!(
        parsed.json_paths.len(),
        2,
        "one table entry per distinct path"
    );
}

/// Rules that read no body leave it unread: the host copies no chunk.
#[test]
fn a_header_source_reads_no_body() {
    let config = Config::parse(rule(r#"{"header":"x-usage-tokens"}"#).as_bytes()).unwrap();
    let mut m = ResponseMeter::new(
        &config,
        [RuleMeter::new(0, Values::new(), None)]
            .into_iter()
            .collect(),
    )
    .unwrap();
    assert!(!m.reads_json());
    m.on_headers(&config, &mut FakeRequest::new(&[]));
    assert!(!m.reads_body());
}

#[test]
fn a_header_source_reads_the_header_then_the_trailer() {
    let header = rule(r#"{"header":"x-usage-tokens"}"#);
    let one = |headers: &[(&str, &str)]| charges(&header, headers, &[b"ok"], Ended::Complete)[0];
    assert_eq!(one(&[("x-usage-tokens", " 120 ")]), Usage::Reported(120));
    assert_eq!(
        one(&[("x-usage-tokens", "12x")]),
        Usage::Fallback {
            cost: 1,
            why: NoUsage::Unreadable
        }
    );
    assert_eq!(
        one(&[]),
        Usage::Fallback {
            cost: 1,
            why: NoUsage::Absent
        }
    );
}
