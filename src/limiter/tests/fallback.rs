//! Degraded mode: global rules with a fallback bucket while the service cannot answer.

use super::{ask, counts, limiter, rls_answer, tenant, NOW};
use crate::limiter::*;
use crate::reply::DETAILS;
use crate::testing::MemoryShared;
use crate::testing::{h, FakeRequest};
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use crate::wire::rls::Answer;
use proptest::prelude::*;
use prost::Message;

/// One global rule on `x-tenant` with a fallback of 5 tokens refilled at 1 per second
/// (a small table: the property test builds one per case).
const GUARDED: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge", "failure_mode": "deny"},
  "max_buckets": 64,
  "rules": [
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {"fallback": {"capacity": 5, "refill_per_second": 1}}, "cost": {"header": "x-cost"}}
  ]
}"#;

/// The service's answer when it cannot be reached.
fn unavailable() -> Answer {
    Answer::Status {
        code: 14,
        message: "no healthy upstream".into(),
    }
}

/// Checks `request`, then hands the call's pending state `answer` at the same instant.
fn through(
    l: &Limiter,
    store: &MemoryShared,
    tally: &mut Tally,
    request: &mut FakeRequest,
    answer: Answer,
) -> Verdict {
    let call = ask(l.check(request, || Some(NOW), store, tally));
    l.answer(call.pending, answer, request, || Some(NOW), store, tally)
}

fn rejected_by_fallback() -> Verdict {
    Verdict::Reject(Reply::Http {
        status: 429,
        headers: h(&[
            ("retry-after", "1"),
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "5"),
        ]),
        body: b"rate limited\n".to_vec().into(),
        details: format!("{DETAILS}{{tenant-global}}").into(),
    })
}

#[test]
fn a_fallback_needs_the_bucket_table_and_the_call_touches_nothing() {
    let (l, store, mut tally) = limiter(GUARDED);
    assert!(l.needs_table());
    let writes = store.writes();
    // Asking the service takes nothing from the fallback bucket.
    ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    assert_eq!(store.writes(), writes);
}

#[test]
fn a_failed_call_is_decided_by_the_fallback_bucket_and_counted() {
    let (l, store, mut tally) = limiter(GUARDED);
    let verdicts: Vec<Verdict> = (0..20)
        .map(|_| through(&l, &store, &mut tally, &mut tenant("a"), unavailable()))
        .collect();
    let admitted = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Continue(_)))
        .count();
    assert_eq!(admitted, 5);
    assert_eq!(verdicts[5], rejected_by_fallback());
    assert_eq!(verdicts[19], rejected_by_fallback());
    let mut grpc = tenant("a");
    grpc = grpc.with("content-type", b"application/grpc");
    match through(&l, &store, &mut tally, &mut grpc, unavailable()) {
        Verdict::Reject(Reply::Grpc { status, .. }) => assert_eq!(status, 8),
        other => panic!("expected RESOURCE_EXHAUSTED, got {other:?}"),
    }
    // Another tenant has its own fallback bucket.
    assert!(matches!(
        through(&l, &store, &mut tally, &mut tenant("b"), unavailable()),
        Verdict::Continue(_)
    ));
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.allowed".into(), 6),
            ("floodgate.denied".into(), 16),
            ("floodgate.rls.error.unavailable".into(), 22),
            ("floodgate.fallback.allowed".into(), 6),
            ("floodgate.fallback.denied".into(), 16),
            ("floodgate.buckets".into(), 2),
            ("floodgate.rls.calls".into(), 22),
            ("floodgate.rule.tenant-global.allowed".into(), 6),
            ("floodgate.rule.tenant-global.denied".into(), 16),
        ]
    );
}

#[test]
fn every_kind_of_failure_takes_the_fallback() {
    let unknown = Answer::Response(
        RateLimitResponse {
            overall_code: Code::Unknown as i32,
            ..RateLimitResponse::default()
        }
        .encode_to_vec(),
    );
    let timeout = Answer::Status {
        code: 14,
        message: "upstream request timeout".into(),
    };
    let failures = [
        (Answer::NotSent(1), "not_sent"),
        (timeout, "timeout"),
        (unavailable(), "unavailable"),
        (
            Answer::Status {
                code: 13,
                message: "internal".into(),
            },
            "status",
        ),
        (unknown, "unknown_code"),
        (Answer::Undecodable, "bad_response"),
    ];
    for (answer, cause) in failures {
        let (l, store, mut tally) = limiter(GUARDED);
        let mut costly = tenant("a");
        costly = costly.with("x-cost", b"5");
        let first = through(&l, &store, &mut tally, &mut costly, answer.clone());
        assert!(matches!(first, Verdict::Continue(_)), "{cause}: {first:?}");
        // The request's cost came out of the fallback: nothing is left.
        let second = through(&l, &store, &mut tally, &mut tenant("a"), answer);
        assert_eq!(second, rejected_by_fallback(), "{cause}");
        let counted = counts(&l, &mut tally);
        assert!(
            counted.contains(&(format!("floodgate.rls.error.{cause}"), 2)),
            "{cause}: {counted:?}"
        );
        assert!(counted.contains(&("floodgate.fallback.denied".into(), 1)));
        assert!(!counted.iter().any(|(n, _)| n.contains("failure_mode")));
    }
}

#[test]
fn an_answer_takes_the_rule_back_and_nothing_sticks() {
    let (l, store, mut tally) = limiter(GUARDED);
    for _ in 0..5 {
        through(&l, &store, &mut tally, &mut tenant("a"), unavailable());
    }
    assert_eq!(
        through(&l, &store, &mut tally, &mut tenant("a"), unavailable()),
        rejected_by_fallback()
    );
    // The service answers again: its answer decides, the empty fallback does not matter,
    // and an answer takes nothing from the fallback bucket.
    let writes = store.writes();
    for _ in 0..3 {
        let ok = through(
            &l,
            &store,
            &mut tally,
            &mut tenant("a"),
            rls_answer(Code::Ok, &[Code::Ok]),
        );
        assert!(matches!(ok, Verdict::Continue(_)), "{ok:?}");
    }
    let cache_writes = store.writes();
    let over = through(
        &l,
        &store,
        &mut tally,
        &mut tenant("b"),
        rls_answer(Code::OverLimit, &[Code::OverLimit]),
    );
    // The denial is remembered in the over-limit cache (one write of its set), nothing else.
    assert_eq!(store.writes(), cache_writes + 1);
    match over {
        Verdict::Reject(Reply::Http { headers, .. }) => {
            assert_eq!(
                headers.get("retry-after"),
                Some("30"),
                "the service's retry-after, not the fallback's"
            );
        }
        other => panic!("the service's rejection holds, got {other:?}"),
    }
    assert_eq!(store.writes(), writes + 1);
}

#[test]
fn a_shadow_fallback_counts_but_never_rejects() {
    let shadow = GUARDED.replace(
        r#""name": "tenant-global","#,
        r#""name": "tenant-global", "shadow": true,"#,
    );
    let (l, store, mut tally) = limiter(&shadow);
    for _ in 0..8 {
        let verdict = through(&l, &store, &mut tally, &mut tenant("a"), unavailable());
        assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    }
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.allowed", 8),
        ("floodgate.shadow_denied", 3),
        ("floodgate.fallback.allowed", 8),
        ("floodgate.rule.tenant-global.allowed", 5),
        ("floodgate.rule.tenant-global.shadow_denied", 3),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}

#[test]
fn a_fallback_that_cannot_be_used_takes_the_local_failure_mode() {
    let closed = GUARDED.replace("}\n  ]\n}", "}\n  ],\n  \"failure_mode\": \"deny\"\n}");
    let (l, store, mut tally) = limiter(&closed);
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let verdict = l.answer(
        call.pending,
        unavailable(),
        &mut tenant("a"),
        || None,
        &store,
        &mut tally,
    );
    assert_eq!(
        verdict,
        Verdict::Reject(reply::failure(500, crate::reply::protocol::Protocol::Http))
    );
    assert_eq!(
        counts(&l, &mut tally),
        vec![
            ("floodgate.failure_mode_denied".into(), 1),
            ("floodgate.error.clock".into(), 1),
            ("floodgate.rls.error.unavailable".into(), 1),
            ("floodgate.rls.calls".into(), 1),
        ]
    );
}

#[test]
fn allowed_responses_show_the_fallback_when_asked() {
    let with_headers = GUARDED.replace(
        "\n  ]\n}",
        "\n  ],\n  \"response\": {\"headers_on_allowed\": true}\n}",
    );
    let (l, store, mut tally) = limiter(&with_headers);
    let verdict = through(&l, &store, &mut tally, &mut tenant("a"), unavailable());
    let Verdict::Continue(pass) = verdict else {
        panic!("expected a pass, got {verdict:?}");
    };
    assert_eq!(
        pass.response_headers,
        h(&[
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "4"),
            ("x-ratelimit-reset", "1"),
        ])
    );
}

proptest! {
    /// Whatever mix of failed calls and answers arrives at one instant, the fallback
    /// admits exactly its capacity of the failed ones (answers never take from it, and
    /// nothing from one call carries over to the next), while every OK answer admits.
    #[test]
    fn answers_never_touch_the_fallback(calls in prop::collection::vec(any::<bool>(), 0..40)) {
        let (l, store, mut tally) = limiter(GUARDED);
        let mut admitted_failed = 0;
        for &failed in &calls {
            let answer = if failed { unavailable() } else { rls_answer(Code::Ok, &[Code::Ok]) };
            let verdict = through(&l, &store, &mut tally, &mut tenant("a"), answer);
            match (failed, verdict) {
                (true, Verdict::Continue(_)) => admitted_failed += 1,
                (true, v) => prop_assert_eq!(v, rejected_by_fallback()),
                (false, v) => prop_assert!(matches!(v, Verdict::Continue(_)), "{:?}", v),
            }
        }
        let failed = calls.iter().filter(|&&f| f).count();
        prop_assert_eq!(admitted_failed, failed.min(5));
    }
}

mod mixed;
