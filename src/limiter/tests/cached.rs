//! The over-limit cache in the limiter: what a remembered denial rejects, what it does not,
//! and what the reply from the cache looks like.

use super::global::no_cache;
use super::*;

const S: u64 = 1_000_000_000;

/// Two global rules (one costed) and a local rule.
pub(super) const TWO_GLOBAL: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge"},
  "rules": [
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {}, "cost": {"header": "x-cost"}},
    {"name": "plan-global", "descriptors": [{"key": "plan", "header": "x-plan"}], "global": {}},
    {"name": "client-burst", "descriptors": [{"key": "client", "source": "remote_address"}],
     "local": {"capacity": 2, "refill_per_second": 0}}
  ]
}"#;

pub(super) fn req(tenant_id: &str, cost: u32) -> FakeRequest {
    tenant(tenant_id).with("x-cost", cost.to_string().as_bytes())
}

/// The service's denial: `codes` per descriptor, 30 s until reset, a body and a header.
pub(super) fn denial_message(codes: &[Code]) -> RateLimitResponse {
    let Answer::Response(bytes) = rls_answer(Code::OverLimit, codes) else {
        unreachable!()
    };
    let mut r = RateLimitResponse::decode(bytes.as_slice()).unwrap();
    r.raw_body = b"over quota\n".to_vec();
    for s in &mut r.statuses {
        s.current_limit = Some(
            crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::RateLimit {
                name: String::new(),
                requests_per_unit: 10,
                unit: 3,
                unit_multiplier: None,
            },
        );
    }
    r
}

/// [`denial_message`] as the service sends it.
pub(super) fn denial(codes: &[Code]) -> Answer {
    Answer::Response(denial_message(codes).encode_to_vec())
}

/// Asks and answers one request at `now`.
pub(super) fn through(
    l: &Limiter,
    store: &MemoryShared,
    tally: &mut Tally,
    request: &mut FakeRequest,
    answer: Answer,
    now: u64,
) -> Verdict {
    let call = ask(l.check(request, || Some(now), store, tally));
    l.answer(call.pending, answer, request, || Some(now), store, tally)
}

#[test]
fn a_remembered_denial_rejects_without_a_call_with_the_services_reply() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    let first = through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        denial(&[Code::OverLimit]),
        NOW,
    );
    let later = l.check(&mut req("a", 1), || Some(NOW + 12 * S), &store, &mut tally);
    let Verdict::Reject(Reply::Http {
        status,
        headers,
        body,
        ..
    }) = later
    else {
        panic!("rejected from the cache, got {later:?}");
    };
    let Verdict::Reject(Reply::Http {
        headers: first_headers,
        body: first_body,
        ..
    }) = first
    else {
        panic!("the service rejected it");
    };
    assert_eq!(status, 429);
    assert_eq!(body, first_body, "the service's raw_body");
    assert_eq!(first_headers.iter().next(), Some(("retry-after", "30")));
    assert_eq!(
        headers,
        h(&[
            ("retry-after", "18"),
            ("x-ratelimit-limit", "10"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "18"),
            ("x-from-rls", "yes")
        ]),
        "the same headers, counting down"
    );
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.denied", 2),
        ("floodgate.rls.over_limit", 1),
        ("floodgate.rls.calls", 1),
        ("floodgate.over_limit_cached", 1),
        ("floodgate.rule.tenant-global.denied", 2),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
    // The cached rejections took no local token: the burst of 2 is intact.
    for _ in 0..2 {
        let ok = through(
            &l,
            &store,
            &mut tally,
            &mut req("b", 1),
            rls_answer(Code::Ok, &[Code::Ok]),
            NOW,
        );
        assert!(matches!(ok, Verdict::Continue(_)), "{ok:?}");
    }
}

#[test]
fn grpc_clients_get_resource_exhausted_from_the_cache() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        denial(&[Code::OverLimit]),
        NOW,
    );
    let mut grpc = req("a", 1).with("content-type", b"application/grpc");
    match l.check(&mut grpc, || Some(NOW + S), &store, &mut tally) {
        Verdict::Reject(Reply::Grpc {
            status, message, ..
        }) => {
            assert_eq!((status, message.as_str()), (8, "over quota"));
        }
        other => panic!("expected RESOURCE_EXHAUSTED, got {other:?}"),
    }
}

#[test]
fn a_costly_denial_rejects_costlier_requests_and_cheaper_ones_ask() {
    // A larger local burst: unanswered asks hold its tokens.
    let (l, store, mut tally) = limiter(&TWO_GLOBAL.replace("\"capacity\": 2", "\"capacity\": 50"));
    limiter(&TWO_GLOBAL.replace("\"refill_per_second\": 0", "\"refill_per_second\": 1000"));
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 10),
        denial(&[Code::OverLimit]),
        NOW,
    );
    for cost in [10, 11, 1000] {
        let v = l.check(&mut req("a", cost), || Some(NOW + S), &store, &mut tally);
        assert!(matches!(v, Verdict::Reject(_)), "cost {cost}: {v:?}");
    }
    for cost in [1, 9] {
        ask(l.check(&mut req("a", cost), || Some(NOW + S), &store, &mut tally));
    }
    // The service denies cost 3 too: now cost 3 and up are remembered.
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 3),
        denial(&[Code::OverLimit]),
        NOW + S,
    );
    assert!(matches!(
        l.check(&mut req("a", 3), || Some(NOW + 2 * S), &store, &mut tally),
        Verdict::Reject(_)
    ));
    ask(l.check(&mut req("a", 2), || Some(NOW + 2 * S), &store, &mut tally));
}

#[test]
fn a_denial_expires_at_its_instant() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        denial(&[Code::OverLimit]),
        NOW,
    );
    assert!(matches!(
        l.check(
            &mut req("a", 1),
            || Some(NOW + 30 * S - 1),
            &store,
            &mut tally
        ),
        Verdict::Reject(_)
    ));
    ask(l.check(&mut req("a", 1), || Some(NOW + 30 * S), &store, &mut tally));
    ask(l.check(&mut req("b", 1), || Some(NOW + S), &store, &mut tally));
}

#[test]
fn denials_without_an_instant_or_for_shadow_rules_are_not_remembered() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    let mut r = denial_message(&[Code::OverLimit]);
    r.statuses[0].duration_until_reset = None;
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        Answer::Response(r.encode_to_vec()),
        NOW,
    );
    ask(l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally));
    // No statuses at all: nothing says which descriptor, nor until when.
    let bare = RateLimitResponse {
        overall_code: Code::OverLimit as i32,
        ..RateLimitResponse::default()
    };
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        Answer::Response(bare.encode_to_vec()),
        NOW,
    );
    ask(l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally));

    let shadow = TWO_GLOBAL.replace(
        r#""global": {}, "cost""#,
        r#""global": {}, "shadow": true, "cost""#,
    );
    let (l, store, mut tally) = limiter(&shadow);
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        denial(&[Code::OverLimit]),
        NOW,
    );
    ask(l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally));
}

#[test]
fn a_denial_too_large_to_keep_is_not_remembered_and_counted() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    let mut r = denial_message(&[Code::OverLimit]);
    r.raw_body = vec![b'x'; crate::shared::over_limit::ENTRY_MAX];
    through(
        &l,
        &store,
        &mut tally,
        &mut req("a", 1),
        Answer::Response(r.encode_to_vec()),
        NOW,
    );
    ask(l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally));
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.over_limit_cache.too_large".into(), 1)),
        "{counted:?}"
    );
}

#[test]
fn with_the_cache_off_every_request_asks() {
    let (l, store, mut tally) = limiter(&no_cache(TWO_GLOBAL));
    for _ in 0..3 {
        through(
            &l,
            &store,
            &mut tally,
            &mut req("a", 1),
            denial(&[Code::OverLimit]),
            NOW,
        );
    }
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.calls".into(), 3)),
        "{counted:?}"
    );
    assert!(
        !counted.iter().any(|(n, _)| n.contains("cache")),
        "{counted:?}"
    );
}

#[test]
fn a_broken_shared_data_lets_the_service_decide() {
    let (l, _, mut tally) = limiter(
        r#"{"rls": {"cluster": "c", "domain": "d"},
        "rules": [{"name": "g", "descriptors": [{"key": "k", "value": "v"}], "global": {}}]}"#,
    );
    ask(l.check(&mut tenant("a"), || Some(NOW), &Broken(7), &mut tally));
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.error.shared_data".into(), 2)),
        "the over-limit cache's read and the lease table's: {counted:?}"
    );
}

#[test]
fn only_a_request_the_cache_holds_a_denial_for_reads_the_clock() {
    // One global rule and no lease: the look-up alone could read the clock.
    let config = r#"{"rls": {"cluster": "ratelimit", "domain": "edge"},
      "rules": [{"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
       "global": {"quota": false}}]}"#;
    let (l, store, mut tally) = limiter(config);
    let no_clock = || panic!("no clock needed");
    let call = ask(l.check(&mut tenant("a"), no_clock, &store, &mut tally));
    let admitted = rls_answer(Code::Ok, &[Code::Ok]);
    let verdict = l.answer(
        call.pending,
        admitted,
        &mut tenant("a"),
        no_clock,
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    let denied = denial(&[Code::OverLimit]);
    through(&l, &store, &mut tally, &mut tenant("a"), denied, NOW);
    let cached = l.check(&mut tenant("a"), || Some(NOW + S), &store, &mut tally);
    assert!(matches!(cached, Verdict::Reject(_)), "{cached:?}");
    ask(l.check(&mut tenant("b"), no_clock, &store, &mut tally));
}
