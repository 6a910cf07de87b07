//! Fleet-wide concurrency rules: the one call takes a hold under a minted id, its release
//! names the same id and only the concurrency descriptors, and neither leases nor the
//! over-limit cache ever decide such a request.

use super::*;
use crate::limiter::StreamEndCall;
use floodgate_common::headers::{HOLD_HEADER, RELEASE_HEADER};

/// A fleet-wide concurrency rule beside a leased global rate rule, over-limit cache on.
const FLEET: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 20},
  "rules": [
    {"name": "rate", "descriptors": [{"key": "tenant", "header": "x-tenant"}], "global": {}},
    {"name": "streams", "descriptors": [{"key": "streams", "header": "x-tenant"}],
     "concurrency": {"global": {}}, "cost": {"header": "x-slots"}}
  ]
}"#;

fn fleet() -> (Limiter, MemoryShared, Tally) {
    let (l, store, tally) = limiter(FLEET);
    (l.with_hold_nonce([3; 16]), store, tally)
}

fn text(call: &crate::wire::call::Call, name: &str) -> Option<String> {
    call.header(name).map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn the_call_takes_a_hold_and_its_release_names_the_same_id() {
    let (l, store, mut tally) = fleet();
    let mut req = tenant("acme").with("x-slots", b"2");
    let asked = ask(l.check(&mut req, || Some(NOW), &store, &mut tally));
    let id = text(&asked.call, HOLD_HEADER).expect("a hold header");
    assert!(floodgate_common::headers::is_hold_id(id.as_bytes()), "{id}");
    assert_eq!(text(&asked.call, RELEASE_HEADER), None);
    // Concurrency descriptors are never leased: no quota asked on this call.
    assert_eq!(text(&asked.call, crate::wire::rls::QUOTA_HEADER), None);
    let request = RateLimitRequest::decode(asked.call.message()).unwrap();
    assert_eq!(request.descriptors.len(), 2);
    assert_eq!(request.descriptors[1].entries[0].key, "streams");
    assert_eq!(request.descriptors[1].hits_addend, Some(2));

    let release = asked.release.expect("a release");
    assert_eq!(text(&release, RELEASE_HEADER).as_deref(), Some(id.as_str()));
    assert_eq!(text(&release, HOLD_HEADER), None);
    let released = RateLimitRequest::decode(release.message()).unwrap();
    assert_eq!(released.domain, "edge");
    assert_eq!(
        released.descriptors.len(),
        1,
        "only the concurrency descriptor"
    );
    assert_eq!(released.descriptors[0].entries[0].key, "streams");
    assert_eq!(released.descriptors[0].entries[0].value, "acme");
    assert_eq!(released.descriptors[0].hits_addend, Some(2));

    // The next request holds under an id of its own.
    let next = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
    assert_ne!(text(&next.call, HOLD_HEADER), Some(id));
}

#[test]
fn a_call_without_a_concurrency_descriptor_takes_no_hold() {
    // The concurrency rule applies only under /streams: a request elsewhere asks about
    // its rate rule alone, with the plain headers and no release.
    let config = FLEET.replace(
        r#"{"name": "streams","#,
        r#"{"name": "streams", "match": {"path_prefix": "/streams"},"#,
    );
    let (l, store, mut tally) = limiter(&config);
    let l = l.with_hold_nonce([3; 16]);
    let asked = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
    assert_eq!(text(&asked.call, HOLD_HEADER), None);
    assert!(asked.release.is_none());
    let mut streams = FakeRequest::new(&[(":path", "/streams/1"), ("x-tenant", "acme")]);
    let asked = ask(l.check(&mut streams, || Some(NOW), &store, &mut tally));
    assert!(text(&asked.call, HOLD_HEADER).is_some());
    assert!(asked.release.is_some());
    // A configuration with no fleet-wide rule never mints.
    let (plain, _, _) = limiter(&FLEET.replace(
        r#""concurrency": {"global": {}}, "cost": {"header": "x-slots"}"#,
        r#""global": {}"#,
    ));
    assert!(!plain.mints_holds());
    assert!(l.mints_holds());
}

#[test]
fn a_client_cannot_choose_the_hold_id() {
    let (l, store, mut tally) = fleet();
    let mut req = tenant("acme")
        .with(HOLD_HEADER, b"mine")
        .with(RELEASE_HEADER, b"theirs");
    let asked = ask(l.check(&mut req, || Some(NOW), &store, &mut tally));
    let id = text(&asked.call, HOLD_HEADER).unwrap();
    assert!(id.starts_with("fg.") && id != "mine", "{id}");
    assert_eq!(text(&asked.call, RELEASE_HEADER), None);
}

#[test]
fn a_concurrency_denial_is_not_remembered_and_promises_no_time() {
    let (l, store, mut tally) = fleet();
    for _ in 0..2 {
        let asked = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
        let over = rls_answer(Code::OverLimit, &[Code::Ok, Code::OverLimit]);
        assert!(l.took_no_hold(&over));
        let Verdict::Reject(reply) = l.answer(
            asked.pending,
            over,
            &mut tenant("acme"),
            || Some(NOW),
            &store,
            &mut tally,
        ) else {
            panic!("rejected by the service");
        };
        let local = reply.local_response();
        let sent = crate::request::header_map::HeaderMap::decode(local.headers.to_vec()).unwrap();
        assert_eq!(
            sent.lookup("retry-after"),
            crate::request::header_map::Lookup::Absent,
            "{reply:?}"
        );
    }
    // Both requests called: the denial was never cached.
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.calls".into(), 2)),
        "{counted:?}"
    );
    assert!(!counted.iter().any(|(n, _)| n.contains("over_limit_cached")));
}

#[test]
fn any_answer_but_over_limit_may_have_taken_the_hold() {
    let (l, _, _) = fleet();
    assert!(!l.took_no_hold(&rls_answer(Code::Ok, &[Code::Ok, Code::Ok])));
    assert!(!l.took_no_hold(&Answer::NotSent(1)));
    assert!(!l.took_no_hold(&Answer::Undecodable));
    assert!(!l.took_no_hold(&Answer::Status {
        code: 4,
        message: "deadline".into()
    }));
}

#[test]
fn releases_are_counted_sent_and_failed() {
    let (l, _, mut tally) = fleet();
    l.stream_end_dispatched(StreamEndCall::Release, true, &mut tally);
    l.stream_end_dispatched(StreamEndCall::Release, false, &mut tally);
    l.stream_end_answered(
        StreamEndCall::Release,
        &rls_answer(Code::Ok, &[Code::Ok]),
        &mut tally,
    );
    l.stream_end_answered(StreamEndCall::Release, &Answer::Undecodable, &mut tally);
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.releases".into(), 1)),
        "{counted:?}"
    );
    assert!(
        counted.contains(&("floodgate.rls.release_failed".into(), 2)),
        "{counted:?}"
    );
}

#[test]
fn a_service_that_cannot_answer_leaves_the_rule_to_rls_failure_mode() {
    for (mode, allowed) in [("allow", true), ("deny", false)] {
        let config = FLEET.replace(
            r#""timeout_ms": 20}"#,
            &format!(r#""timeout_ms": 20, "failure_mode": "{mode}"}}"#),
        );
        let (l, store, mut tally) = limiter(&config);
        let l = l.with_hold_nonce([5; 16]);
        let asked = ask(l.check(&mut tenant("acme"), || Some(NOW), &store, &mut tally));
        let timeout = Answer::Status {
            code: 4,
            message: "deadline exceeded".into(),
        };
        // The call may have been decided: its release is still due.
        assert!(!l.took_no_hold(&timeout));
        let verdict = l.answer(
            asked.pending,
            timeout,
            &mut tenant("acme"),
            || Some(NOW),
            &store,
            &mut tally,
        );
        assert_eq!(matches!(verdict, Verdict::Continue(_)), allowed, "{mode}");
        let counted = counts(&l, &mut tally);
        let metric = format!(
            "floodgate.failure_mode_{}",
            if allowed { "allowed" } else { "denied" }
        );
        assert!(counted.contains(&(metric, 1)), "{mode}: {counted:?}");
    }
}
