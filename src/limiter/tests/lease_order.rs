//! The order of the over-limit cache and the quota leases: a request that takes nothing
//! locally is paid from its leases before the cache is read (one shared-data read
//! fewer); one with a local or concurrency rule meets the cache first, and a remembered
//! denial rejects it before it takes anything.

use super::leased::{granting, on, quota, S};
use super::*;

/// One global rule that leases, one concurrency rule on `/streams`.
const LEASED_AND_STREAMS: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge"},
  "rules": [
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {}},
    {"name": "streams", "match": {"path_prefix": "/streams"},
     "descriptors": [{"key": "tenant", "header": "x-tenant"}], "concurrency": {"max": 1}}
  ]
}"#;

/// A grant of `grant` tokens for the global descriptor of `on("/")` (that of
/// `on("/streams")` too), and a denial remembered for it: a call that raced the grant, as
/// in `tokens_held_are_spent_even_after_a_denial_is_remembered`.
pub(super) fn held_and_denied(l: &Limiter, store: &MemoryShared, tally: &mut Tally, grant: u32) {
    let racing = ask(l.check(&mut on("/"), || Some(NOW), store, tally));
    let granted = ask(l.check(&mut on("/"), || Some(NOW), store, tally));
    assert_eq!(quota(&granted.call), "0");
    let until = NOW + 60 * S;
    let verdict = l.answer(
        granted.pending,
        granting(&[grant], until),
        &mut on("/"),
        || Some(NOW),
        store,
        tally,
    );
    assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    let denial = rls_answer(Code::OverLimit, &[Code::OverLimit]);
    let verdict = l.answer(
        racing.pending,
        denial,
        &mut on("/"),
        || Some(NOW),
        store,
        tally,
    );
    assert!(matches!(verdict, Verdict::Reject(_)), "{verdict:?}");
}

/// A request with a concurrency rule meets the remembered denial before its slots and
/// its leases: it is rejected from the cache, takes no slot and spends no token (it used
/// to be admitted from the leases without taking its slot).
#[test]
fn a_remembered_denial_rejects_a_request_with_a_concurrency_rule_before_its_leases() {
    let (l, store, mut tally) = limiter(LEASED_AND_STREAMS);
    held_and_denied(&l, &store, &mut tally, 2);
    let mut holds = Slots::new();
    let verdict = l.check_holding(
        &mut on("/streams"),
        || Some(NOW),
        &store,
        &mut tally,
        &mut holds,
    );
    assert!(matches!(verdict, Verdict::Reject(_)), "{verdict:?}");
    assert!(holds.is_empty(), "no slot taken: {holds:?}");
    // The tokens are still there for requests without the concurrency rule.
    for _ in 0..2 {
        let verdict = l.check(&mut on("/"), || Some(NOW), &store, &mut tally);
        assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    }
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.lease.allowed", 2),
        ("floodgate.over_limit_cached", 1),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}

/// The order pinned: with a denial remembered and tokens held, a request that takes
/// nothing locally reads its lease set and no over-limit cache set; once its tokens are
/// spent, it reads both and the cached denial rejects it.
#[test]
fn a_leased_request_reads_no_cache_set_when_its_leases_decide() {
    let (l, store, mut tally) = limiter(LEASED_AND_STREAMS);
    held_and_denied(&l, &store, &mut tally, 1);
    let before = store.reads();
    let verdict = l.check(&mut on("/"), || Some(NOW), &store, &mut tally);
    assert!(matches!(verdict, Verdict::Continue(_)), "{verdict:?}");
    assert_eq!(store.reads() - before, 1, "the lease set only");
    let before = store.reads();
    let verdict = l.check(&mut on("/"), || Some(NOW), &store, &mut tally);
    assert!(
        matches!(verdict, Verdict::Reject(_)),
        "from the cache: {verdict:?}"
    );
    assert_eq!(
        store.reads() - before,
        2,
        "the lease set, then the cache set"
    );
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.lease.allowed", 1),
        ("floodgate.over_limit_cached", 1),
        // The two calls, and the refill the last token's spend started.
        ("floodgate.lease.refills", 1),
        ("floodgate.rls.calls", 3),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}

/// A global rule that does not lease: its requests read the cache set only, and the
/// remembered denial rejects them with no call.
#[test]
fn a_request_without_leases_still_gets_the_cached_rejection() {
    let (l, store, mut tally) = limiter(
        r#"{"rls": {"cluster": "ratelimit", "domain": "edge"},
        "rules": [{"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
          "global": {"quota": false}}]}"#,
    );
    let call = ask(l.check(&mut on("/"), || Some(NOW), &store, &mut tally));
    assert_eq!(quota(&call.call), "", "no quota asked");
    let denial = rls_answer(Code::OverLimit, &[Code::OverLimit]);
    let verdict = l.answer(
        call.pending,
        denial,
        &mut on("/"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Reject(_)), "{verdict:?}");
    let before = store.reads();
    let verdict = l.check(&mut on("/"), || Some(NOW), &store, &mut tally);
    assert!(
        matches!(verdict, Verdict::Reject(_)),
        "from the cache: {verdict:?}"
    );
    assert_eq!(store.reads() - before, 1, "the cache set only");
    let counted = counts(&l, &mut tally);
    for expected in [
        ("floodgate.over_limit_cached", 1),
        ("floodgate.rls.calls", 1),
    ] {
        assert!(
            counted.contains(&(expected.0.into(), expected.1)),
            "{expected:?} in {counted:?}"
        );
    }
}
