//! Concurrency rules through the limiter: slots taken at admission, given back by
//! `release`, counted; rejections that take nothing; their reply's fields.

use super::*;

const CONC: &str = r#"{"rules":[{"name":"streams",
    "descriptors":[{"key":"tenant","header":"x-tenant"}],
    "concurrency":{"max":2}}],
    "response":{"headers":"both","body_format":"problem+json"}}"#;

fn admit(l: &Limiter, store: &MemoryShared, tally: &mut Tally, t: &str) -> (Verdict, Slots) {
    let mut holds = Slots::new();
    let v = l.check_holding(&mut tenant(t), || Some(NOW), store, tally, &mut holds);
    (v, holds)
}

fn metric(counts: &[(String, i64)], name: &str) -> i64 {
    counts
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn admits_max_in_flight_then_rejects_without_retry_after_until_one_ends() {
    let (l, store, mut tally) = limiter(CONC);
    let (v1, h1) = admit(&l, &store, &mut tally, "a");
    let (v2, h2) = admit(&l, &store, &mut tally, "a");
    assert!(matches!(v1, Verdict::Continue(_)) && matches!(v2, Verdict::Continue(_)));
    assert_eq!((h1.len(), h2.len()), (1, 1));
    let (v3, h3) = admit(&l, &store, &mut tally, "a");
    assert!(h3.is_empty(), "a rejected request holds nothing");
    let Verdict::Reject(Reply::Http {
        status,
        headers,
        body,
        details,
    }) = v3
    else {
        panic!("rejected: {v3:?}");
    };
    assert_eq!(status, 429);
    assert_eq!(details, "floodgate_rate_limited{streams}");
    assert!(
        !headers.iter().any(|(n, _)| n == "retry-after"),
        "{headers:?}"
    );
    let get = |name: &str| headers.get(name);
    assert_eq!(get("x-ratelimit-limit"), Some("2"));
    assert_eq!(get("x-ratelimit-remaining"), Some("0"));
    assert_eq!(get("x-ratelimit-reset"), None);
    assert_eq!(
        get("ratelimit-policy"),
        Some(r#""streams";q=2;qu="concurrent-requests""#)
    );
    assert_eq!(get("ratelimit"), Some(r#""streams";r=0"#));
    assert!(String::from_utf8_lossy(body.as_bytes()).contains("streams"));
    // Another key is unaffected; one stream ending frees one slot.
    assert_eq!(admit(&l, &store, &mut tally, "b").1.len(), 1);
    l.release(&h1, Some(NOW + 1), &store, &mut tally);
    assert_eq!(admit(&l, &store, &mut tally, "a").1.len(), 1);
    let c = counts(&l, &mut tally);
    assert_eq!(metric(&c, "floodgate.rule.streams.concurrency_admitted"), 4);
    assert_eq!(metric(&c, "floodgate.rule.streams.concurrency_rejected"), 1);
    assert_eq!(metric(&c, "floodgate.rule.streams.concurrency_released"), 1);
    assert_eq!(
        metric(&c, "floodgate.rule.streams.concurrency_in_flight"),
        3
    );
    assert_eq!(metric(&c, "floodgate.rule.streams.denied"), 1);
    assert_eq!(metric(&c, "floodgate.denied"), 1);
}

#[test]
fn a_concurrency_rejection_gives_back_the_local_tokens() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[
        {"name":"rate","descriptors":[{"key":"t","header":"x-tenant"}],
         "local":{"capacity":2,"refill_per_second":0}},
        {"name":"streams","descriptors":[{"key":"t","header":"x-tenant"}],
         "concurrency":{"max":1}}]}"#,
    );
    let (_, held) = admit(&l, &store, &mut tally, "a");
    let (v, _) = admit(&l, &store, &mut tally, "a");
    assert!(matches!(v, Verdict::Reject(_)));
    l.release(&held, Some(NOW), &store, &mut tally);
    // The rejected request took no token: the bucket of 2 still admits one more.
    let (v, _) = admit(&l, &store, &mut tally, "a");
    assert!(matches!(v, Verdict::Continue(_)), "{v:?}");
}

#[test]
fn a_shadow_rule_counts_but_never_rejects_and_takes_nothing_when_full() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"streams","shadow":true,
        "descriptors":[{"key":"t","header":"x-tenant"}],"concurrency":{"max":1}}]}"#,
    );
    let (_, first) = admit(&l, &store, &mut tally, "a");
    let (v, second) = admit(&l, &store, &mut tally, "a");
    assert!(matches!(v, Verdict::Continue(_)));
    assert_eq!((first.len(), second.len()), (1, 0));
    l.release(&first, Some(NOW), &store, &mut tally);
    let c = counts(&l, &mut tally);
    assert_eq!(metric(&c, "floodgate.shadow_denied"), 1);
    assert_eq!(
        metric(&c, "floodgate.rule.streams.concurrency_in_flight"),
        0
    );
}

#[test]
fn holds_of_a_vanished_request_are_reclaimed_at_their_deadline() {
    let (l, store, mut tally) = limiter(
        r#"{"rules":[{"name":"streams","descriptors":[{"key":"t","header":"x-tenant"}],
        "concurrency":{"max":1,"max_duration_seconds":2}}]}"#,
    );
    let (_, lost) = admit(&l, &store, &mut tally, "a");
    assert_eq!(lost.len(), 1, "never released: its VM went away");
    assert!(admit(&l, &store, &mut tally, "a").1.is_empty());
    let mut holds = Slots::new();
    let later = NOW + 2_250_000_000;
    l.check_holding(
        &mut tenant("a"),
        || Some(later),
        &store,
        &mut tally,
        &mut holds,
    );
    assert_eq!(holds.len(), 1);
    l.release(&lost, Some(later), &store, &mut tally);
    let c = counts(&l, &mut tally);
    assert_eq!(
        metric(&c, "floodgate.rule.streams.concurrency_reclaimed"),
        1
    );
    assert_eq!(metric(&c, "floodgate.rule.streams.concurrency_released"), 0);
    assert_eq!(
        metric(&c, "floodgate.rule.streams.concurrency_in_flight"),
        1
    );
}

#[test]
fn a_full_window_is_decided_by_failure_mode() {
    let json = |mode: &str| {
        format!(
            r#"{{"max_buckets":1,"failure_mode":"{mode}","rules":[{{"name":"s",
            "descriptors":[{{"key":"t","header":"x-tenant"}}],"concurrency":{{"max":1}}}}]}}"#
        )
    };
    for (mode, rejected) in [("allow", false), ("deny", true)] {
        let (l, store, mut tally) = limiter(&json(mode));
        assert_eq!(admit(&l, &store, &mut tally, "a").1.len(), 1);
        let (v, holds) = admit(&l, &store, &mut tally, "b");
        assert!(holds.is_empty());
        assert_eq!(matches!(v, Verdict::Reject(_)), rejected, "{mode}");
        let c = counts(&l, &mut tally);
        assert_eq!(metric(&c, "floodgate.concurrency.table_full"), 1);
    }
}
