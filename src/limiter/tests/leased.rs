//! Quota leases in the limiter: asking for them, spending them with no call, all or
//! nothing across a request's global rules, refilling in the background, expiry.

use super::*;
use crate::wire::call::Call;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Quota;
use crate::wire::rls;

pub(super) const S: u64 = 1_000_000_000;

const LEASED: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge"},
  "rules": [
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {}, "cost": {"header": "x-cost"}},
    {"name": "plan-global", "match": {"path_prefix": "/plan"},
     "descriptors": [{"key": "plan", "value": "gold"}], "global": {}},
    {"name": "audit", "match": {"path_prefix": "/audit"},
     "descriptors": [{"key": "audit", "value": "yes"}], "global": {"quota": false}}
  ]
}"#;

pub(super) fn on(path: &str) -> FakeRequest {
    FakeRequest::new(&[(":path", path), (":method", "GET"), ("x-tenant", "acme")])
}

/// The service's OK with, per descriptor, a grant of that many requests (0: none)
/// valid until `until_ns`.
pub(super) fn granting(grants: &[u32], until_ns: u64) -> Answer {
    let Answer::Response(bytes) = rls_answer(Code::Ok, &vec![Code::Ok; grants.len()]) else {
        unreachable!()
    };
    let mut r = RateLimitResponse::decode(bytes.as_slice()).unwrap();
    for (status, &n) in r.statuses.iter_mut().zip(grants) {
        status.quota = (n > 0).then(|| Quota {
            requests: n,
            expiration_specifier: Some(ExpirationSpecifier::ValidUntil(prost_types::Timestamp {
                seconds: (until_ns / S) as i64,
                nanos: (until_ns % S) as i32,
            })),
            id: String::new(),
        });
    }
    Answer::Response(r.encode_to_vec())
}

fn through(l: &Limiter, store: &MemoryShared, tally: &mut Tally, path: &str, a: Answer) -> Ask {
    let call = ask(l.check(&mut on(path), || Some(NOW), store, tally));
    let verdict = l.answer(
        call.pending.clone(),
        a,
        &mut on(path),
        || Some(NOW),
        store,
        tally,
    );
    assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    call
}

/// The quota header a call carries (empty: none, no lease asked for).
pub(super) fn quota(call: &Call) -> String {
    call.header(rls::QUOTA_HEADER)
        .map(|v| String::from_utf8(v).unwrap())
        .unwrap_or_default()
}

fn decided(verdict: Verdict) -> Pass {
    match verdict {
        Verdict::Continue(pass) => pass,
        other => panic!("expected a request decided from its grant, got {other:?}"),
    }
}

#[test]
fn a_grant_decides_later_requests_with_no_call_and_refills_below_half() {
    let (l, store, mut tally) = limiter(LEASED);
    let first = through(&l, &store, &mut tally, "/", granting(&[4], NOW + 60 * S));
    assert_eq!(
        quota(&first.call),
        "0",
        "quota asked for the one global descriptor"
    );
    let refills: Vec<bool> = (0..4)
        .map(|_| {
            let pass = decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
            pass.refill.is_some()
        })
        .collect();
    assert_eq!(
        refills,
        [false, false, true, false],
        "1 left of 4: one refill"
    );
    // Spent: the next request calls again ("ask again", not over limit).
    let again = ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    assert_eq!(quota(&again.call), "0");
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.lease.allowed", 4),
        ("floodgate.lease.grants", 1),
        ("floodgate.lease.refills", 1),
        ("floodgate.rls.calls", 3),
        ("floodgate.allowed", 5),
        ("floodgate.rule.tenant-global.allowed", 5),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}

#[test]
fn a_refill_is_check_only_and_its_grant_is_stored_in_the_background() {
    let (l, store, mut tally) = limiter(LEASED);
    through(&l, &store, &mut tally, "/", granting(&[3], NOW + 60 * S));
    let pass = decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    assert!(pass.refill.is_none(), "2 left of 3: not below half");
    let pass = decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    let refill = pass.refill.expect("1 left of 3: refill");
    let request = RateLimitRequest::decode(refill.call.message()).unwrap();
    assert_eq!(request.descriptors.len(), 1);
    assert_eq!(request.descriptors[0].entries[0].value, "acme");
    assert_eq!(request.descriptors[0].hits_addend, Some(0), "check only");
    assert_eq!(quota(&refill.call), "0");
    l.refilled(
        &refill.keys,
        granting(&[5], NOW + 60 * S),
        || Some(NOW),
        &store,
        &mut tally,
    );
    for _ in 0..6 {
        decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    }
    ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    // A refill that fails is counted as a call's failure; nothing is stored.
    l.refilled(
        &refill.keys,
        Answer::NotSent(1),
        || Some(NOW),
        &store,
        &mut tally,
    );
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.error.not_sent".into(), 1)),
        "{counted:?}"
    );
    assert!(
        counted.contains(&("floodgate.lease.grants".into(), 2)),
        "{counted:?}"
    );
}

#[test]
fn no_grant_is_spent_from_valid_until_on() {
    let (l, store, mut tally) = limiter(LEASED);
    through(&l, &store, &mut tally, "/", granting(&[50], NOW + 10 * S));
    decided(l.check(&mut on("/"), || Some(NOW + 10 * S - 1), &store, &mut tally));
    ask(l.check(&mut on("/"), || Some(NOW + 10 * S), &store, &mut tally));
}

#[test]
fn a_request_is_decided_from_grants_only_if_every_global_descriptor_has_enough() {
    let (l, store, mut tally) = limiter(LEASED);
    // Only the tenant's descriptor is granted.
    let call = through(
        &l,
        &store,
        &mut tally,
        "/plan",
        granting(&[3, 0], NOW + 60 * S),
    );
    assert_eq!(quota(&call.call), "0,1");
    for _ in 0..2 {
        let again = ask(l.check(&mut on("/plan"), || Some(NOW), &store, &mut tally));
        assert_eq!(quota(&again.call), "0,1", "called for both");
    }
    // What the tenant's grant gave was given back each time: all 3 still there.
    for _ in 0..3 {
        decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    }
    ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    // A cost the grant cannot cover calls.
    through(&l, &store, &mut tally, "/", granting(&[3], NOW + 60 * S));
    let costly = on("/").with("x-cost", b"4");
    ask(l.check(&mut costly.clone(), || Some(NOW), &store, &mut tally));
    decided(l.check(
        &mut on("/").with("x-cost", b"3"),
        || Some(NOW),
        &store,
        &mut tally,
    ));
}

#[test]
fn a_rule_without_leases_makes_its_requests_call_and_ask_for_none() {
    let (l, store, mut tally) = limiter(LEASED);
    through(&l, &store, &mut tally, "/", granting(&[10], NOW + 60 * S));
    let call = ask(l.check(&mut on("/audit"), || Some(NOW), &store, &mut tally));
    assert_eq!(quota(&call.call), "", "grants for it would never be spent");
    // A grant the service sends anyway is not stored for it.
    let verdict = l.answer(
        call.pending,
        granting(&[7, 7], NOW + 60 * S),
        &mut on("/audit"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Continue(_)));
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.lease.grants".into(), 1)),
        "{counted:?}"
    );
    // Shadow rules and `quota: false` everywhere: no lease table at all.
    let none = LEASED.replace(r#""global": {}"#, r#""global": {"quota": false}"#);
    assert!(limiter(&none).0.lease_table().is_none());
    let shadowed = LEASED.replacen(r#""global": {},"#, r#""global": {}, "shadow": true,"#, 1);
    let (l, _, _) = limiter(&shadowed);
    let leasing: Vec<bool> = l
        .config()
        .rules
        .iter()
        .map(|r| r.asks_for_lease())
        .collect();
    assert_eq!(leasing, [false, true, false], "a shadow rule never leases");
}

#[test]
fn an_over_limit_answer_stores_no_grant() {
    let (l, store, mut tally) = limiter(LEASED);
    let call = ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    let Answer::Response(bytes) = granting(&[5], NOW + 60 * S) else {
        unreachable!()
    };
    let mut r = RateLimitResponse::decode(bytes.as_slice()).unwrap();
    r.overall_code = Code::OverLimit as i32;
    r.statuses[0].code = Code::OverLimit as i32;
    let verdict = l.answer(
        call.pending,
        Answer::Response(r.encode_to_vec()),
        &mut on("/"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Reject(_)));
    let key = l
        .placement()
        .lease("edge", "tenant-global", &[b"acme".to_vec()]);
    assert_eq!(l.lease_table().unwrap().get(&store, key).unwrap(), None);
}

/// A call that raced a grant can bring back a denial while this Envoy holds tokens: they
/// were counted by the service already, so they are still spent, and only then does the
/// remembered denial reject.
#[test]
fn tokens_held_are_spent_even_after_a_denial_is_remembered() {
    let (l, store, mut tally) = limiter(LEASED);
    let racing = ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    through(&l, &store, &mut tally, "/", granting(&[2], NOW + 60 * S));
    let denial = rls_answer(Code::OverLimit, &[Code::OverLimit]);
    let verdict = l.answer(
        racing.pending,
        denial,
        &mut on("/"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Reject(_)), "{verdict:?}");
    for _ in 0..2 {
        decided(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    }
    let rejected = l.check(&mut on("/"), || Some(NOW), &store, &mut tally);
    assert!(
        matches!(rejected, Verdict::Reject(_)),
        "from the cache: {rejected:?}"
    );
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.lease.allowed", 2),
        ("floodgate.over_limit_cached", 1),
        ("floodgate.rls.calls", 3),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}
