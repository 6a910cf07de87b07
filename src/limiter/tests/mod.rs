//! The limiter end to end over test doubles: helpers shared by its test files, and the
//! local rules' tests.

use super::*;
use crate::metrics::definitions;
use crate::reply::{DETAILS, FAILURE_DETAILS};
use crate::request::descriptor::parse_cost;
use crate::testing::{h, FakeRequest};
use crate::testing::{Broken, MemoryShared};
use crate::wire::proto::envoy::config::core::v3::HeaderValue;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use crate::wire::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use crate::wire::rls::Answer;
use prost::Message;

pub(super) const NOW: u64 = 1_700_000_000_000_000_000;

pub(super) fn limiter(json: &str) -> (Limiter, MemoryShared, Tally) {
    let config = Config::parse(json.as_bytes()).unwrap();
    let tally = Tally::for_rules(&config.rules);
    let limiter = Limiter::new(config, crate::testing::PLACEMENT);
    let store = MemoryShared::default();
    // As the host does: a global-only configuration gets no bucket table, and the
    // over-limit cache its own keys when it is on.
    if limiter.needs_table() {
        limiter.table().prepare(&store).unwrap();
    }
    if let Some(leases) = limiter.lease_table() {
        leases.prepare(&store).unwrap();
    }
    if let Some(cache) = limiter.over_limit_cache() {
        cache.prepare(&store).unwrap();
    }
    if let Some(slots) = limiter.slot_table() {
        slots.prepare(&store).unwrap();
    }
    (limiter, store, tally)
}

/// The tally as metric name → value, for readable assertions.
pub(super) fn counts(limiter: &Limiter, tally: &mut Tally) -> Vec<(String, i64)> {
    let defs = definitions(&limiter.config().rules);
    tally.drain().map(|(i, d)| (defs[i].1.clone(), d)).collect()
}

pub(super) fn tenant(t: &str) -> FakeRequest {
    FakeRequest::new(&[(":path", "/api/x"), (":method", "GET"), ("x-tenant", t)])
}

fn pass() -> Verdict {
    Verdict::Continue(Pass::default())
}

const ONE_RULE: &str = r#"{"rules":[{"name":"per-tenant",
    "descriptors":[{"key":"tenant","header":"x-tenant"}],
    "local":{"capacity":2,"refill_per_second":1}}]}"#;

#[test]
fn requests_no_rule_applies_to_pass_untouched() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    let mut req = FakeRequest::new(&[(":path", "/")]);
    let verdict = l.check(&mut req, || panic!("no clock needed"), &store, &mut tally);
    assert_eq!(verdict, pass());
    assert!(counts(&l, &mut tally).is_empty());
}

#[test]
fn over_the_limit_is_rejected_with_headers_and_counted() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    for _ in 0..2 {
        assert_eq!(
            l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
            pass()
        );
    }
    let verdict = l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally);
    assert_eq!(
        verdict,
        Verdict::Reject(Reply::Http {
            status: 429,
            headers: h(&[
                ("retry-after", "1"),
                ("x-ratelimit-limit", "2"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "2"),
            ]),
            body: b"rate limited\n".to_vec().into(),
            details: format!("{DETAILS}{{per-tenant}}").into(),
        })
    );
    assert_eq!(
        l.check(&mut tenant("b"), || Some(NOW), &store, &mut tally),
        pass()
    );
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.allowed".into(), 3),
            ("floodgate.denied".into(), 1),
            ("floodgate.buckets".into(), 2),
            ("floodgate.rule.per-tenant.allowed".into(), 3),
            ("floodgate.rule.per-tenant.denied".into(), 1),
        ]
    );
}

#[test]
fn grpc_requests_get_resource_exhausted() {
    let (l, store, mut tally) = limiter(ONE_RULE);
    let mut req = tenant("a");
    req = req.with("content-type", b"application/grpc");
    for _ in 0..2 {
        l.check(&mut req, || Some(NOW), &store, &mut tally);
    }
    match l.check(&mut req, || Some(NOW), &store, &mut tally) {
        Verdict::Reject(Reply::Grpc { status, .. }) => assert_eq!(status, 8),
        other => panic!("expected a gRPC rejection, got {other:?}"),
    }
}

#[test]
fn shadow_rules_count_but_never_reject() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"trial","shadow":true,
            "descriptors":[{"key":"tenant","header":"x-tenant"}],
            "local":{"capacity":1,"refill_per_second":0}}]}"#,
    );
    for _ in 0..3 {
        assert_eq!(
            l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
            pass()
        );
    }
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.allowed".into(), 3),
            ("floodgate.shadow_denied".into(), 2),
            ("floodgate.buckets".into(), 1),
            ("floodgate.rule.trial.allowed".into(), 1),
            ("floodgate.rule.trial.shadow_denied".into(), 2),
        ]
    );
}

#[test]
fn allowed_responses_carry_headers_when_asked() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"r","descriptors":[{"key":"tenant","header":"x-tenant"}],
            "local":{"capacity":5,"refill_per_second":1}}],
            "response":{"headers_on_allowed":true}}"#,
    );
    assert_eq!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Continue(Pass {
            request_headers: vec![],
            response_headers: h(&[
                ("x-ratelimit-limit", "5"),
                ("x-ratelimit-remaining", "4"),
                ("x-ratelimit-reset", "1"),
            ]),
            ..Pass::default()
        })
    );
}

#[test]
fn local_failures_take_the_configured_mode_and_are_counted() {
    let (open, _, mut tally) = limiter(ONE_RULE);
    assert_eq!(
        open.check(&mut tenant("a"), || Some(NOW), &Broken(10), &mut tally),
        pass()
    );
    assert_eq!(
        counts(&open, &mut tally),
        vec![
            ("floodgate.allowed".into(), 1),
            ("floodgate.failure_mode_allowed".into(), 1),
            ("floodgate.error.shared_data".into(), 1),
        ]
    );

    let closed_json = ONE_RULE.replace("}]}", r#"}],"failure_mode":"deny","failure_status":503}"#);
    let (closed, store, mut tally) = limiter(&closed_json);
    let verdict = closed.check(&mut tenant("a"), || None, &store, &mut tally);
    assert_eq!(
        verdict,
        Verdict::Reject(Reply::Http {
            status: 503,
            headers: Headers::new(),
            body: b"rate limiter unavailable\n".to_vec().into(),
            details: FAILURE_DETAILS.into(),
        })
    );
    assert_eq!(
        counts(&closed, &mut tally),
        vec![
            ("floodgate.failure_mode_denied".into(), 1),
            ("floodgate.error.clock".into(), 1),
        ]
    );
}

#[test]
fn cost_headers_take_several_tokens_and_malformed_ones_are_refused() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"r","descriptors":[{"key":"tenant","header":"x-tenant"}],
            "cost":{"header":"x-cost"},"local":{"capacity":10,"refill_per_second":0}}]}"#,
    );
    let mut costly = tenant("a");
    costly = costly.with("x-cost", b"10");
    assert_eq!(
        l.check(&mut costly, || Some(NOW), &store, &mut tally),
        pass()
    );
    assert!(matches!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Reject(_)
    ));
    for bad in ["0", "-1", "1.5", "ten", "", "4294967296"] {
        let mut req = tenant("b");
        req = req.with("x-cost", bad.as_bytes());
        match l.check(&mut req, || Some(NOW), &store, &mut tally) {
            Verdict::Reject(Reply::Http { status, .. }) => assert_eq!(status, 400, "{bad:?}"),
            other => panic!("{bad:?} must be refused, got {other:?}"),
        }
    }
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.invalid_cost".into(), 6)),
        "{counted:?}"
    );
    assert_eq!(parse_cost(" 42 "), Some(42));
    assert_eq!(parse_cost("007"), Some(7));
    assert_eq!(parse_cost("4294967295"), Some(u32::MAX));
}

pub(super) fn ask(verdict: Verdict) -> Ask {
    match verdict {
        Verdict::Ask(ask) => *ask,
        other => panic!("expected a call to the rate limit service, got {other:?}"),
    }
}

pub(super) fn rls_answer(overall: Code, codes: &[Code]) -> Answer {
    let statuses = codes
        .iter()
        .map(|&code| DescriptorStatus {
            code: code as i32,
            current_limit: None,
            limit_remaining: 0,
            duration_until_reset: Some(prost_types::Duration {
                seconds: 30,
                nanos: 0,
            }),
            quota: None,
        })
        .collect();
    Answer::Response(
        RateLimitResponse {
            overall_code: overall as i32,
            statuses,
            response_headers_to_add: vec![HeaderValue {
                key: "x-from-rls".into(),
                value: "yes".into(),
                raw_value: vec![],
            }],
            request_headers_to_add: vec![HeaderValue {
                key: "x-upstream-note".into(),
                value: "checked".into(),
                raw_value: vec![],
            }],
            ..RateLimitResponse::default()
        }
        .encode_to_vec(),
    )
}

mod cached;
mod charge;
mod concurrency;
mod denial_sets;
mod fallback;
mod fields;
mod fleet;
mod global;
mod lease_order;
mod leased;
mod refusal;
mod trust;
mod usage;
