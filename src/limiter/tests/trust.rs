//! How far the limiter trusts what the rate limit service says: a remembered denial for
//! at most `rls.over_limit_cache_max_seconds`, whatever reset the service reported; a
//! quota lease up to `rls.max_grant_requests` hits and `rls.max_grant_valid_ms`.

use super::*;
use crate::shared::lease::SubGrant;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Quota;

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
    headers.get("retry-after").and_then(|v| v.parse().ok())
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

/// 2100-01-01T00:00:00Z.
const YEAR_2100_S: i64 = 4_102_444_800;

/// One leasing global rule on `x-tenant`, with `extra` in the `rls` section.
fn leasing(extra: &str) -> String {
    config(extra).replace(r#""global": {"quota": false}"#, r#""global": {}"#)
}

/// The service's OK with a grant of every hit there is, valid until 2100.
fn boundless_grant() -> Answer {
    let Answer::Response(bytes) = rls_answer(Code::Ok, &[Code::Ok]) else {
        unreachable!()
    };
    let mut r = RateLimitResponse::decode(bytes.as_slice()).unwrap();
    r.statuses[0].quota = Some(Quota {
        requests: u32::MAX,
        expiration_specifier: Some(ExpirationSpecifier::ValidUntil(prost_types::Timestamp {
            seconds: YEAR_2100_S,
            nanos: 0,
        })),
        id: String::new(),
    });
    Answer::Response(r.encode_to_vec())
}

/// The grant held for tenant `a` after one call answered with [`boundless_grant`].
fn held_after_a_boundless_grant(json: &str) -> (SubGrant, Vec<(String, i64)>) {
    let (l, store, mut tally) = limiter(json);
    let call = ask(l.check(&mut tenant("a"), || Some(NOW), &store, &mut tally));
    let admitted = l.answer(
        call.pending,
        boundless_grant(),
        &mut tenant("a"),
        || Some(NOW),
        &store,
        &mut tally,
    );
    assert!(matches!(admitted, Verdict::Continue(_)));
    let key = l
        .placement()
        .lease("edge", "tenant-global", &[b"a".to_vec()]);
    let lease = l.lease_table().unwrap().get(&store, key).unwrap().unwrap();
    let live: Vec<SubGrant> = lease
        .grants
        .into_iter()
        .filter(|g| g.remaining > 0)
        .collect();
    assert_eq!(live.len(), 1);
    (live[0], counts(&l, &mut tally))
}

#[test]
fn a_boundless_grant_is_kept_at_the_servers_own_bounds_by_default() {
    let (held, counted) = held_after_a_boundless_grant(&leasing(""));
    assert_eq!(
        held,
        SubGrant {
            remaining: 1_000_000,
            valid_until_ns: NOW + 3_600 * S,
        }
    );
    assert!(
        counted.contains(&("floodgate.lease.grants_clamped".into(), 1)),
        "{counted:?}"
    );
}

#[test]
fn the_grant_bounds_are_configurable() {
    let json = leasing(r#", "max_grant_requests": 5, "max_grant_valid_ms": 1500"#);
    let (held, _) = held_after_a_boundless_grant(&json);
    assert_eq!(
        held,
        SubGrant {
            remaining: 5,
            valid_until_ns: NOW + 1_500_000_000,
        }
    );
}
