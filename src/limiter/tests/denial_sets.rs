//! A remembered denial is for the call's whole set of global descriptors: it rejects only
//! that set, for as long as every descriptor said to be over still is, and costs one
//! shared-data read per request.

use super::cached::{denial, denial_message, req, through, TWO_GLOBAL};
use super::*;

const S: u64 = 1_000_000_000;

#[test]
fn a_denial_rejects_only_requests_with_the_same_set_of_descriptors() {
    let (l, store, mut tally) = limiter(TWO_GLOBAL);
    let mut both = req("a", 1).with("x-plan", b"gold");
    // tenant OK, plan over: the pair is remembered, with only the plan shown as over.
    through(
        &l,
        &store,
        &mut tally,
        &mut both,
        denial(&[Code::Ok, Code::OverLimit]),
        NOW,
    );
    let mut again = req("a", 1).with("x-plan", b"gold");
    let Verdict::Reject(Reply::Http { details, .. }) =
        l.check(&mut again, || Some(NOW + S), &store, &mut tally)
    else {
        panic!("the same set is rejected from the cache");
    };
    assert_eq!(details, "floodgate_rate_limited{plan-global}");
    // Another tenant with the same plan, or the tenant alone, is another set: the service
    // decides it from all of its descriptors (a limit may replace another), so it asks.
    ask(l.check(
        &mut req("z", 1).with("x-plan", b"gold"),
        || Some(NOW + S),
        &store,
        &mut tally,
    ));
    ask(l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally));
}

/// The reported case: a denial of the tenant's default limit, remembered from plain
/// requests, must not reject a premium request, for which a premium limit replaces it.
#[test]
fn a_denial_of_one_descriptor_never_rejects_a_request_that_adds_another() {
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
        l.check(&mut req("a", 1), || Some(NOW + S), &store, &mut tally),
        Verdict::Reject(_)
    ));
    let mut premium = req("a", 1).with("x-plan", b"premium");
    let call = ask(l.check(&mut premium, || Some(NOW + S), &store, &mut tally));
    let admitted = l.answer(
        call.pending,
        rls_answer(Code::Ok, &[Code::Ok, Code::Ok]),
        &mut premium,
        || Some(NOW + S),
        &store,
        &mut tally,
    );
    assert!(matches!(admitted, Verdict::Continue(_)), "{admitted:?}");
}

/// A set is over while every descriptor said to be over still is: trusted until the
/// earliest reset among them, a shadow rule's included (the service's answer may rest on
/// it), while `retry-after` shows the longest wait among the enforced ones.
#[test]
fn a_set_is_trusted_until_its_earliest_reset() {
    let shadow_plan = TWO_GLOBAL.replace(
        r#""plan-global", "descriptors": [{"key": "plan", "header": "x-plan"}], "global": {}"#,
        r#""plan-global", "descriptors": [{"key": "plan", "header": "x-plan"}], "global": {},
           "shadow": true"#,
    );
    assert_ne!(shadow_plan, TWO_GLOBAL);
    let (l, store, mut tally) = limiter(&shadow_plan);
    let mut r = denial_message(&[Code::OverLimit, Code::OverLimit]);
    r.statuses[1].duration_until_reset = Some(prost_types::Duration {
        seconds: 10,
        nanos: 0,
    });
    let both = || req("a", 1).with("x-plan", b"gold");
    through(
        &l,
        &store,
        &mut tally,
        &mut both(),
        Answer::Response(r.encode_to_vec()),
        NOW,
    );
    let Verdict::Reject(Reply::Http { headers, .. }) =
        l.check(&mut both(), || Some(NOW + 10 * S - 1), &store, &mut tally)
    else {
        panic!("rejected from the cache until the shadow rule's reset");
    };
    assert_eq!(headers.iter().next(), Some(("retry-after", "21")));
    ask(l.check(&mut both(), || Some(NOW + 10 * S), &store, &mut tally));
}

/// The look-up costs one shared-data read per request, however many global rules apply;
/// remembering a denial one read and one write.
#[test]
fn a_request_is_looked_up_with_one_read_and_a_denial_remembered_with_one_write() {
    // Two global rules that do not lease, and no local rule: only the cache's traffic.
    let (l, store, mut tally) = limiter(
        r#"{"rls": {"cluster": "ratelimit", "domain": "edge"},
        "rules": [
          {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
           "global": {"quota": false}},
          {"name": "plan-global", "descriptors": [{"key": "plan", "header": "x-plan"}],
           "global": {"quota": false}}]}"#,
    );
    let both = || req("a", 1).with("x-plan", b"gold");
    let (reads, writes) = (store.reads(), store.writes());
    let call = ask(l.check(&mut both(), || Some(NOW), &store, &mut tally));
    assert_eq!(store.reads() - reads, 1, "one look-up for two global rules");
    let (reads, writes_before) = (store.reads(), store.writes());
    assert_eq!(writes_before, writes);
    let denied = denial(&[Code::OverLimit, Code::OverLimit]);
    l.answer(
        call.pending,
        denied,
        &mut both(),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert_eq!(
        (store.reads() - reads, store.writes() - writes_before),
        (1, 1),
        "one entry for the pair"
    );
    let reads = store.reads();
    let rejected = l.check(&mut both(), || Some(NOW + S), &store, &mut tally);
    assert!(matches!(rejected, Verdict::Reject(_)));
    assert_eq!(store.reads() - reads, 1);
}
