//! Requests refused before any limit is checked, and the service's unsafe headers.

use crate::limiter::*;
use crate::metrics::definitions;
use crate::testing::MemoryShared;
use crate::testing::{h, FakeRequest};
use crate::wire::proto::envoy::config::core::v3::HeaderValue;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use crate::wire::rls::Answer;
use prost::Message;

const NOW: u64 = 1_700_000_000_000_000_000;

const LOCAL: &str = r#"{"rules":[{"name":"r","descriptors":[{"key":"tenant","header":"x-tenant"}],
    "cost":{"header":"x-cost"},"local":{"capacity":1,"refill_per_second":0}}]}"#;

fn limiter(json: &str) -> (Limiter, MemoryShared, Tally) {
    let config = Config::parse(json.as_bytes()).unwrap();
    let tally = Tally::new(config.rules.len());
    let limiter = Limiter::new(config, crate::testing::PLACEMENT);
    let store = MemoryShared::default();
    if limiter.needs_table() {
        limiter.table().prepare(&store).unwrap();
    }
    (limiter, store, tally)
}

fn counts(limiter: &Limiter, tally: &mut Tally) -> Vec<(String, i64)> {
    let defs = definitions(&limiter.config().rules);
    tally.drain().map(|(i, d)| (defs[i].1.clone(), d)).collect()
}

fn status_of(verdict: &Verdict) -> Option<u16> {
    match verdict {
        Verdict::Reject(Reply::Http { status, .. }) => Some(*status),
        _ => None,
    }
}

#[test]
fn repeated_cost_and_descriptor_headers_are_refused_once_and_consume_nothing() {
    let (l, store, mut tally) = limiter(LOCAL);
    let prepared = store.writes();
    let two_costs = FakeRequest::new(&[("x-tenant", "a"), ("x-cost", "1")]).with("x-cost", b"1000");
    let two_tenants = FakeRequest::new(&[("x-tenant", "other")]).with("x-tenant", b"victim");
    for mut req in [two_costs, two_tenants] {
        let verdict = l.check(&mut req, || panic!("no clock needed"), &store, &mut tally);
        assert_eq!(status_of(&verdict), Some(400), "{verdict:?}");
    }
    assert_eq!(
        counts(&l, &mut tally),
        vec![("floodgate.duplicate_header".to_string(), 2)]
    );
    assert_eq!(store.writes(), prepared, "nothing written");
    let mut victim = FakeRequest::new(&[("x-tenant", "victim")]);
    assert_eq!(
        l.check(&mut victim, || Some(NOW), &store, &mut tally),
        Verdict::Continue(Pass::default())
    );
}

#[test]
fn an_over_long_value_is_refused_and_counted_as_an_invalid_descriptor() {
    let (l, store, mut tally) = limiter(
        r#"{"max_descriptor_value_bytes":3,"rules":[{"name":"r",
        "descriptors":[{"key":"tenant","header":"x-tenant"}],
        "local":{"capacity":1,"refill_per_second":0}}]}"#,
    );
    let mut long = FakeRequest::new(&[("x-tenant", "abcd")]);
    let verdict = l.check(&mut long, || Some(NOW), &store, &mut tally);
    assert_eq!(status_of(&verdict), Some(400));
    assert_eq!(
        counts(&l, &mut tally),
        vec![("floodgate.invalid_descriptor".to_string(), 1)]
    );
}

#[test]
fn grpc_web_requests_are_refused_in_grpc_web() {
    let (l, store, mut tally) = limiter(LOCAL);
    let mut req = FakeRequest::new(&[
        ("x-tenant", "a"),
        ("x-cost", "lots"),
        ("content-type", "application/grpc-web+proto"),
    ]);
    match l.check(&mut req, || Some(NOW), &store, &mut tally) {
        Verdict::Reject(Reply::Http {
            status, headers, ..
        }) => {
            assert_eq!(status, 200);
            assert!(headers.iter().any(|f| f == ("grpc-status", "3")));
            assert!(headers
                .iter()
                .any(|f| f == ("content-type", "application/grpc-web+proto")));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_services_unsafe_headers_are_counted_and_the_rest_applied() {
    let (l, store, mut tally) = limiter(
        r#"{"rls":{"cluster":"c","domain":"d"},"rules":[{"name":"g",
        "descriptors":[{"key":"tenant","header":"x-tenant"}],"global":{}}]}"#,
    );
    let mut req = FakeRequest::new(&[("x-tenant", "a")]);
    let Verdict::Ask(ask) = l.check(&mut req, || Some(NOW), &store, &mut tally) else {
        panic!("expected a call");
    };
    let hv = |key: &str, value: &str| HeaderValue {
        key: key.into(),
        value: value.into(),
        raw_value: vec![],
    };
    let answer = Answer::Response(
        RateLimitResponse {
            overall_code: Code::Ok as i32,
            response_headers_to_add: vec![hv("x-a", "v\r\nx-b: c"), hv("x-ok", "1")],
            request_headers_to_add: vec![hv("content-length", "5"), hv(":path", "/admin")],
            ..RateLimitResponse::default()
        }
        .encode_to_vec(),
    );
    let verdict = l.answer(
        ask.pending,
        answer,
        &mut req,
        || Some(NOW),
        &store,
        &mut tally,
    );
    let Verdict::Continue(pass) = verdict else {
        panic!("a bad header does not fail the answer: {verdict:?}");
    };
    assert!(pass.request_headers.is_empty());
    assert_eq!(pass.response_headers, h(&[("x-ok", "1")]));
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.dropped_headers".to_string(), 3)),
        "{counted:?}"
    );
}
