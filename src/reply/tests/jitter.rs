//! `response.retry_after_jitter` as replies show it (the draw itself: `reply::jitter`).

use super::*;

#[test]
fn jitter_spreads_retry_after_upward_and_keeps_t_within_it() {
    let config = ResponseConfig {
        headers: crate::config::HeaderFields::Both,
        retry_after_jitter_ppm: 1_000_000,
        ..config()
    };
    // capacity 1 refilled once every 10 s: the exact wait is 10 s.
    let denied = after(Quota::new(1, 100_000).unwrap(), 1);
    let reply = |seed| {
        rejection(
            &config,
            &rules(),
            &[denied],
            None,
            Headers::new(),
            Protocol::Http,
            seed,
        )
    };
    let mut shown = std::collections::BTreeSet::new();
    for seed in 0..200u64 {
        let Reply::Http { headers, .. } = reply(seed) else {
            panic!("http expected");
        };
        let get = |name: &str| headers.get(name).map(str::to_string);
        let retry: u64 = get("retry-after").unwrap().parse().unwrap();
        assert!((10..=20).contains(&retry), "{retry}");
        let t = get("ratelimit").unwrap();
        let t: u64 = t.rsplit("t=").next().unwrap().parse().unwrap();
        assert!(t <= retry && t >= 10, "t={t} retry-after={retry}");
        shown.insert(retry);
        // The same seed gives the same reply.
        assert_eq!(
            reply(seed),
            Reply::Http {
                headers,
                body: b"rate limited\n".to_vec().into(),
                status: 429,
                details: "floodgate_rate_limited{per-tenant}".into()
            }
        );
    }
    assert!(shown.len() >= 8, "{shown:?}");
}

#[test]
fn zero_jitter_replies_are_the_same_whatever_the_seed() {
    let denied = after(quota(2, 1), 2);
    let reply = |seed| {
        rejection(
            &config(),
            &rules(),
            &[denied],
            None,
            Headers::new(),
            Protocol::Http,
            seed,
        )
    };
    assert_eq!(reply(0), reply(0x1234_5678_9abc_def0));
}
