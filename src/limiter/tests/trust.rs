//! How far the limiter trusts what the rate limit service says: a remembered denial for
//! at most `rls.over_limit_cache_max_seconds`, whatever reset the service reported.

use super::*;

const S: u64 = 1_000_000_000;

/// One global rule on `x-tenant`, with `extra` in the `rls` section.
fn config(extra: &str) -> String {
    format!(
        r#"{{"rls": {{"cluster": "ratelimit", "domain": "edge"{extra}}},
        "rules": [{{"name": "tenant-global", "descriptors": [{{"key": "tenant", "header": "x-tenant"}}],
                    "global": {{"quota": false}}}}]}}"#
    )
}

/// The service's denial of one descriptor, resetting in `seconds`.
fn denial_for(seconds: i64) -> Answer {
    let Answer::Response(bytes) = rls_answer(Code::OverLimit, &[Code::OverLimit]) else {
        unreachable!()
    };
    let mut r = RateLimitResponse::decode(bytes.as_slice()).unwrap();
    r.statuses[0].duration_until_reset = Some(prost_types::Duration { seconds, nanos: 0 });
    Answer::Response(r.encode_to_vec())
}

fn deny(l: &Limiter, store: &MemoryShared, tally: &mut Tally, answer: Answer) -> Verdict {
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), store, tally));
    l.answer(
        call.pending,
        answer,
        &mut tenant("a"),
        || Some(NOW),
        store,
        tally,
    )
}

fn retry_after(verdict: &Verdict) -> Option<u64> {
    let Verdict::Reject(Reply::Http { headers, .. }) = verdict else {
        return None;
    };
    headers
        .iter()
        .find(|(k, _)| k == "retry-after")
        .and_then(|(_, v)| v.parse().ok())
}

/// 4294967295 tokens reported once made a service answer a reset of eight years; a
/// restarted service had no memory of it, and still the cache rejected for eight years.
#[test]
fn a_denial_is_trusted_for_at_most_a_minute_by_default() {
    const EIGHT_YEARS: i64 = 257_697_917;
    let (l, store, mut tally) = limiter(&config(""));
    deny(&l, &store, &mut tally, denial_for(EIGHT_YEARS));
    let cached = l.check(&mut tenant("a"), || Some(NOW + 59 * S), &store, &mut tally);
    // The reply says what the service said, counting down: the cap only bounds how long
    // the proxy answers for the service.
    assert_eq!(retry_after(&cached), Some(EIGHT_YEARS as u64 - 59));
    ask(l.check(&mut tenant("a"), || Some(NOW + 60 * S), &store, &mut tally));
}

#[test]
fn the_cap_is_configurable_and_a_shorter_reset_still_wins() {
    let (l, store, mut tally) = limiter(&config(r#", "over_limit_cache_max_seconds": 5"#));
    deny(&l, &store, &mut tally, denial_for(3_600));
    assert!(matches!(
        l.check(
            &mut tenant("a"),
            || Some(NOW + 5 * S - 1),
            &store,
            &mut tally
        ),
        Verdict::Reject(_)
    ));
    ask(l.check(&mut tenant("a"), || Some(NOW + 5 * S), &store, &mut tally));
    // A reset within the cap is the service's own instant.
    let (l, store, mut tally) = limiter(&config(r#", "over_limit_cache_max_seconds": 5"#));
    deny(&l, &store, &mut tally, denial_for(2));
    ask(l.check(&mut tenant("a"), || Some(NOW + 2 * S), &store, &mut tally));
}
