//! The draft-10 fields and the rejecting rule's name as the limiter builds them: items
//! in configuration order whichever step decided each rule, and the service's statuses
//! tied to the right rule.

use super::*;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;

/// A local rule, then a shadow one, then a global one: the service's status, which comes
/// by descriptor position, must be tied to rule 2.
const MIXED: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge", "cache_over_limit": false},
  "rules": [
    {"name": "client-burst", "descriptors": [{"key": "client", "source": "remote_address"}],
     "local": {"capacity": 5, "refill_per_second": 1}},
    {"name": "trial", "shadow": true, "descriptors": [{"key": "plan", "value": "trial"}],
     "local": {"capacity": 1, "refill_per_second": 1}},
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}], "global": {}}
  ],
  "response": {"headers": "draft10", "headers_on_allowed": true, "body_format": "problem+json"}
}"#;

/// The service's answer for the one global descriptor: 10 per minute, `remaining` left.
fn answer(code: Code, remaining: u32) -> Answer {
    Answer::Response(
        RateLimitResponse {
            overall_code: code as i32,
            statuses: vec![DescriptorStatus {
                code: code as i32,
                current_limit: Some(RateLimit {
                    name: String::new(),
                    requests_per_unit: 10,
                    unit: 2, // minute
                    unit_multiplier: None,
                }),
                limit_remaining: remaining,
                duration_until_reset: Some(prost_types::Duration {
                    seconds: 41,
                    nanos: 500_000_000,
                }),
                quota: None,
            }],
            ..RateLimitResponse::default()
        }
        .encode_to_vec(),
    )
}

#[test]
fn allowed_responses_list_every_rule_in_configuration_order() {
    let (l, store, mut tally) = limiter(MIXED);
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let verdict = l.answer(
        call.pending,
        answer(Code::Ok, 7),
        &mut tenant("a"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert_eq!(
        verdict,
        Verdict::Continue(Pass {
            request_headers: Vec::new(),
            response_headers: h(&[
                (
                    "ratelimit-policy",
                    r#""client-burst";q=5;w=5, "tenant-global";q=10;w=60"#
                ),
                (
                    "ratelimit",
                    r#""client-burst";r=4;t=1, "tenant-global";r=7;t=42"#
                ),
            ]),
            ..Pass::default()
        })
    );
}

#[test]
fn a_service_rejection_names_its_rule_in_the_details_and_the_problem() {
    let (l, store, mut tally) = limiter(MIXED);
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let verdict = l.answer(
        call.pending,
        answer(Code::OverLimit, 0),
        &mut tenant("a"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    let Verdict::Reject(Reply::Http {
        headers,
        body,
        details,
        ..
    }) = verdict
    else {
        panic!("expected an HTTP rejection, got {verdict:?}");
    };
    assert_eq!(details, "floodgate_rate_limited{tenant-global}");
    assert_eq!(
        headers,
        h(&[
            ("content-type", "application/problem+json"),
            ("retry-after", "42"),
            ("ratelimit-policy", r#""tenant-global";q=10;w=60"#),
            ("ratelimit", r#""tenant-global";r=0;t=42"#),
        ])
    );
    let problem: serde_json::Value = serde_json::from_slice(body.as_bytes()).unwrap();
    assert_eq!(
        problem["violated-policies"],
        serde_json::json!(["tenant-global"])
    );
}
