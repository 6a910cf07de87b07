//! Requests with global rules: one call for all of them, after the local rules, and
//! what the service's answer (or its failure) does.

use super::*;

const LAYERED: &str = r#"{
  "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 20, "failure_mode": "allow"},
  "rules": [
    {"name": "tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant"}],
     "global": {}, "cost": {"header": "x-cost"}},
    {"name": "trial", "shadow": true, "descriptors": [{"key": "plan", "value": "trial"}], "global": {}},
    {"name": "client-burst", "descriptors": [{"key": "client", "source": "remote_address"}],
     "local": {"capacity": 2, "refill_per_second": 0}}
  ]
}"#;

/// `config` with the over-limit cache switched off.
pub(super) fn no_cache(config: &str) -> String {
    config.replacen(r#""rls": {"#, r#""rls": {"cache_over_limit": false, "#, 1)
}

#[test]
fn only_local_rules_need_the_bucket_table() {
    assert!(limiter(LAYERED).0.needs_table());
    let global_only = r#"{"rls": {"cluster": "c", "domain": "d"},
        "rules": [{"name": "g", "descriptors": [{"key": "k", "value": "v"}], "global": {}}]}"#;
    let (l, store, mut tally) = limiter(global_only);
    assert!(!l.needs_table());
    // It needs the over-limit cache's and the lease table's keys (256 sets and their
    // count each), no bucket table: the call is asked for, and looking the cache and the
    // leases up writes nothing.
    assert_eq!(store.keys(), 2 * 257);
    let writes = store.writes();
    ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    assert_eq!((store.keys(), store.writes()), (2 * 257, writes));
    // With the cache off and no lease, nothing at all touches shared data, and no step
    // reads the clock.
    let off = global_only
        .replace(
            r#""domain": "d""#,
            r#""domain": "d", "cache_over_limit": false"#,
        )
        .replace(r#""global": {}"#, r#""global": {"quota": false}"#);
    let (l, store, mut tally) = limiter(&off);
    assert!(l.over_limit_cache().is_none());
    let no_clock = || panic!("no clock needed");
    ask(l.check(&mut tenant("a"), no_clock, &store, &mut tally));
    assert_eq!((store.keys(), store.writes()), (0, 0));
}

#[test]
fn global_rules_are_asked_in_one_call_after_local_rules() {
    let (l, store, mut tally) = limiter(LAYERED);
    let mut req = tenant("acme");
    req = req.with("x-cost", b"3");
    let call = ask(l.check(&mut req, || Some(NOW), &store, &mut tally));
    let request = RateLimitRequest::decode(call.call.message()).unwrap();
    assert_eq!(request.domain, "edge");
    assert_eq!(request.descriptors.len(), 2);
    assert_eq!(request.descriptors[0].entries[0].value, "acme");
    assert_eq!(request.descriptors[0].hits_addend, Some(3));
    assert_eq!(request.descriptors[1].entries[0].value, "trial");

    let verdict = l.answer(
        call.pending,
        rls_answer(Code::Ok, &[Code::Ok, Code::Ok]),
        &mut tenant("a"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert_eq!(
        verdict,
        Verdict::Continue(Pass {
            request_headers: vec![("x-upstream-note".into(), "checked".into())],
            response_headers: h(&[("x-from-rls", "yes")]),
            ..Pass::default()
        })
    );
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.ok".into(), 1)),
        "{counted:?}"
    );
    assert!(counted.contains(&("floodgate.rule.tenant-global.allowed".into(), 1)));
    assert!(counted.contains(&("floodgate.rule.client-burst.allowed".into(), 1)));
}

#[test]
fn a_local_rejection_means_no_call() {
    let (l, store, mut tally) = limiter(LAYERED);
    for _ in 0..2 {
        let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
        let ok = rls_answer(Code::Ok, &[Code::Ok, Code::Ok]);
        assert!(matches!(
            l.answer(
                call.pending,
                ok,
                &mut tenant("a"),
                || Some(NOW),
                &store,
                &mut tally
            ),
            Verdict::Continue(_)
        ));
    }
    assert!(matches!(
        l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Reject(Reply::Http { status: 429, .. })
    ));
}

#[test]
fn a_global_rejection_gives_local_tokens_back() {
    // With the cache off, every request is asked about (see the cache's own tests).
    let (l, store, mut tally) = limiter(&no_cache(LAYERED));
    for _ in 0..5 {
        let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
        let over = rls_answer(Code::OverLimit, &[Code::OverLimit, Code::Ok]);
        match l.answer(
            call.pending,
            over,
            &mut tenant("a"),
            || Some(NOW),
            &store,
            &mut tally,
        ) {
            Verdict::Reject(Reply::Http {
                status, headers, ..
            }) => {
                assert_eq!(status, 429);
                assert_eq!(headers.iter().next(), Some(("retry-after", "30")));
                assert!(headers.iter().any(|f| f == ("x-from-rls", "yes")));
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
    // Five rejected requests took nothing from the local burst of 2.
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    assert!(matches!(
        l.answer(
            call.pending,
            rls_answer(Code::Ok, &[Code::Ok, Code::Ok]),
            &mut tenant("a"),
            || Some(NOW),
            &store,
            &mut tally
        ),
        Verdict::Continue(_)
    ));
}

#[test]
fn shadow_global_rules_are_sent_and_counted_but_never_enforced() {
    let (l, store, mut tally) = limiter(LAYERED);
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let over = rls_answer(Code::OverLimit, &[Code::Ok, Code::OverLimit]);
    assert!(matches!(
        l.answer(
            call.pending,
            over,
            &mut tenant("a"),
            || Some(NOW),
            &store,
            &mut tally
        ),
        Verdict::Continue(_)
    ));
    let counted = counts(&l, &mut tally);
    assert!(
        counted.contains(&("floodgate.shadow_denied".into(), 1)),
        "{counted:?}"
    );
    assert!(counted.contains(&("floodgate.rule.trial.shadow_denied".into(), 1)));
    assert!(counted.contains(&("floodgate.allowed".into(), 1)));
}

#[test]
fn service_failures_take_the_rls_failure_mode() {
    let (open, store, mut tally) = limiter(LAYERED);
    let call = ask(open.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let late = Answer::Status {
        code: 14,
        message: "upstream request timeout".into(),
    };
    let verdict = open.answer(
        call.pending,
        late,
        &mut tenant("a"),
        || Some(NOW + 25_000_000),
        &store,
        &mut tally,
    );
    assert!(matches!(verdict, Verdict::Continue(_)));
    let counted = counts(&open, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.error.timeout".into(), 1)),
        "{counted:?}"
    );
    assert!(counted.contains(&("floodgate.failure_mode_allowed".into(), 1)));

    let (closed, store, mut tally) =
        limiter(&LAYERED.replace(r#""failure_mode": "allow""#, r#""failure_mode": "deny""#));
    for _ in 0..3 {
        let call = ask(closed.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
        let verdict = closed.answer(
            call.pending,
            Answer::NotSent(4),
            &mut tenant("a"),
            || Some(NOW),
            &store,
            &mut tally,
        );
        assert_eq!(
            verdict,
            Verdict::Reject(reply::failure(500, crate::reply::protocol::Protocol::Http))
        );
    }
    let counted = counts(&closed, &mut tally);
    assert!(
        counted.contains(&("floodgate.rls.error.not_sent".into(), 3)),
        "{counted:?}"
    );
    assert!(counted.contains(&("floodgate.failure_mode_denied".into(), 3)));
    // Rejected on failure, the requests gave their local tokens back.
    assert!(matches!(
        closed.check(&mut tenant("a"), || Some(NOW), &store, &mut tally),
        Verdict::Ask(_)
    ));
}
