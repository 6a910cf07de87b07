//! Degraded mode next to other rules: a global rule without a fallback and local rules,
//! each keeping its own failure mode and its own buckets.

use super::super::{ask, counts, limiter, rls_answer, tenant, NOW};
use super::{through, unavailable};
use crate::bucket;
use crate::limiter::*;
use crate::reply::FAILURE_DETAILS;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;

/// A global rule with a fallback, one without, and a local rule.
const MIXED: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge", "failure_mode": "allow"},
  "rules": [
    {"name": "guarded", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {"fallback": {"capacity": 2, "refill_per_second": 0}}},
    {"name": "unguarded", "descriptors": [{"key": "plan", "value": "gold"}], "global": {}},
    {"name": "client-burst", "descriptors": [{"key": "client", "source": "remote_address"}],
     "local": {"capacity": 3, "refill_per_second": 0}}
  ],
  "failure_status": 503
}"#;

#[test]
fn mixed_rules_fail_open_where_there_is_no_fallback() {
    let (l, store, mut tally) = limiter(MIXED);
    let verdicts: Vec<Verdict> = (0..4)
        .map(|_| through(&l, &store, &mut tally, &mut tenant("a"), unavailable()))
        .collect();
    assert!(matches!(verdicts[0], Verdict::Continue(_)));
    assert!(matches!(verdicts[1], Verdict::Continue(_)));
    // The fallback of 2 is spent: rejected, and the local token it took is given back.
    assert!(matches!(
        &verdicts[2],
        Verdict::Reject(Reply::Http { status: 429, headers, .. })
            if headers.iter().any(|f| f == ("x-ratelimit-limit", "2"))
    ));
    assert!(matches!(verdicts[3], Verdict::Reject(_)));
    // Two of the local burst of 3 were taken; one is left.
    let ok = through(
        &l,
        &store,
        &mut tally,
        &mut tenant("a"),
        rls_answer(Code::Ok, &[Code::Ok, Code::Ok]),
    );
    assert!(matches!(ok, Verdict::Continue(_)), "{ok:?}");
    assert!(matches!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Reject(Reply::Http { status: 429, .. })
    ));
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.rls.error.unavailable", 4),
        ("floodgate.fallback.allowed", 2),
        ("floodgate.fallback.denied", 2),
        // Let through with a rule that has no fallback: that rule failed open.
        ("floodgate.failure_mode_allowed", 2),
        ("floodgate.rule.guarded.allowed", 3),
        ("floodgate.rule.guarded.denied", 2),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}

#[test]
fn mixed_rules_fail_closed_before_any_fallback_is_touched() {
    let closed = MIXED.replace(r#""failure_mode": "allow""#, r#""failure_mode": "deny""#);
    let (l, store, mut tally) = limiter(&closed);
    for _ in 0..4 {
        let verdict = through(&l, &store, &mut tally, &mut tenant("a"), unavailable());
        assert_eq!(
            verdict,
            Verdict::Reject(Reply::Http {
                status: 503,
                headers: Headers::new(),
                body: b"rate limiter unavailable\n".to_vec().into(),
                details: FAILURE_DETAILS.into(),
            })
        );
    }
    let counted = counts(&l, &mut tally);
    assert!(counted.contains(&("floodgate.failure_mode_denied".into(), 4)));
    assert!(!counted.iter().any(|(n, _)| n.contains("fallback")));
    // Rejected, they consumed nothing: the fallback bucket was never written...
    let fallback = l.placement().fallback(
        "guarded",
        bucket::Quota::new(2, 0).unwrap(),
        &[b"a".to_vec()],
    );
    let found = l.table().find(&store, fallback, NOW).unwrap();
    assert_eq!(found.origin, crate::shared::table::Origin::Empty);
    // ...and the local burst of 3 is whole.
    for _ in 0..3 {
        ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    }
    assert!(matches!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Reject(Reply::Http { status: 429, .. })
    ));
}

#[test]
fn fallback_buckets_are_apart_from_local_ones() {
    // The same descriptor and the same bucket shape, local and as a fallback.
    let (l, store, mut tally) = limiter(
        r#"{"rls": {"cluster": "c", "domain": "d"},
            "rules": [
              {"name": "g", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
               "global": {"fallback": {"capacity": 1, "refill_per_second": 0}}},
              {"name": "l", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
               "local": {"capacity": 2, "refill_per_second": 0}}
            ]}"#,
    );
    assert!(matches!(
        through(&l, &store, &mut tally, &mut tenant("a"), unavailable()),
        Verdict::Continue(_)
    ));
    assert!(matches!(
        through(&l, &store, &mut tally, &mut tenant("a"), unavailable()),
        Verdict::Reject(Reply::Http { status: 429, .. })
    ));
    // The fallback's token was its own: the local bucket still has one of its two.
    assert!(matches!(
        through(
            &l,
            &store,
            &mut tally,
            &mut tenant("a"),
            rls_answer(Code::Ok, &[Code::Ok])
        ),
        Verdict::Continue(_)
    ));
    let fallback = l
        .placement()
        .fallback("g", bucket::Quota::new(1, 0).unwrap(), &[b"a".to_vec()]);
    assert_ne!(
        fallback,
        l.placement()
            .bucket("g", bucket::Quota::new(1, 0).unwrap(), &[b"a".to_vec()])
    );
}
