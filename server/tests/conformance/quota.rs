//! Scenarios for quota leases: an admitted item that asked takes up to its
//! quota of what remains, in the same atomic step, on every algorithm and store; never more
//! than remain; never for a shadow item, an over-limit request, or a counter used twice in
//! one request; valid until now + `valid_ms`, capped at the window's end for the windowed
//! algorithms.

use super::{bucket, limit, Harness, MS, S, W};
use floodgate_server::algorithm::lease::{Grant, Quota};
use floodgate_server::algorithm::{Algorithm, Decision, Unit};
use floodgate_server::store::{Check, Store};
use std::num::NonZeroU32;

fn quota(requests: u32, valid_ms: u64) -> Quota {
    Quota {
        requests: NonZeroU32::new(requests).unwrap(),
        valid_ms,
    }
}

fn asking(c: Check, q: Quota) -> Check {
    Check {
        quota: Some(q),
        ..c
    }
}

fn granted(d: &Decision) -> u32 {
    d.grant.map_or(0, |g| g.hits)
}

/// Per algorithm: the grant's size, its validity, and `remaining` after it.
pub async fn a_grant_takes_up_to_its_quota_on_every_algorithm<St: Store>(h: &Harness<St>) {
    let now = W + 250 * MS;
    h.at(now);
    let q = quota(10, 100);
    for algorithm in h.algorithms(50) {
        let c = asking(
            h.check(algorithm.name(), limit(50, Unit::Second, algorithm)),
            q,
        );
        let d = h.one(&c).await;
        assert!(d.allowed, "{}", algorithm.name());
        assert_eq!(d.remaining, 39, "{}: 50 − 1 − 10", algorithm.name());
        assert_eq!(
            d.grant,
            Some(Grant {
                hits: 10,
                valid_until_ns: now + 100 * MS
            }),
            "{}",
            algorithm.name()
        );
        // The grant was counted: the next request without asking sees 38.
        let plain = Check {
            quota: None,
            ..c.clone()
        };
        assert_eq!(h.one(&plain).await.remaining, 38, "{}", algorithm.name());
    }
    // Windowed algorithms: never valid past the end of the window the hits counted in.
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindowCounter] {
        let c = asking(
            h.check(
                &format!("{}-long", algorithm.name()),
                limit(50, Unit::Second, algorithm),
            ),
            quota(10, 5_000),
        );
        let g = h.one(&c).await.grant.unwrap();
        assert_eq!(g.valid_until_ns, W + S, "{}", algorithm.name());
    }
    for algorithm in [bucket(50), Algorithm::SlidingWindowLog] {
        if !h.needs(&[algorithm]) {
            continue;
        }
        let c = asking(
            h.check(
                &format!("{}-long", algorithm.name()),
                limit(50, Unit::Second, algorithm),
            ),
            quota(10, 5_000),
        );
        let g = h.one(&c).await.grant.unwrap();
        assert_eq!(g.valid_until_ns, now + 5 * S, "{}", algorithm.name());
    }
}

/// A limit of 25 with a quota of 10, asked repeatedly: 10, 10, then what is left minus
/// each request's own hit, then over the limit; admitted + granted is exactly 25.
pub async fn grants_never_take_more_than_remains<St: Store>(h: &Harness<St>) {
    h.at(W + 250 * MS);
    for algorithm in h.algorithms(25) {
        let c = asking(
            h.check(algorithm.name(), limit(25, Unit::Hour, algorithm)),
            quota(10, 1_000),
        );
        let mut answers = Vec::new();
        let mut total = 0;
        for _ in 0..5 {
            let d = h.one(&c).await;
            if d.allowed {
                total += 1 + granted(&d);
            }
            answers.push((d.allowed, granted(&d), d.remaining));
        }
        assert_eq!(
            answers,
            [
                (true, 10, 14),
                (true, 10, 3),
                (true, 2, 0),
                (false, 0, 0),
                (false, 0, 0)
            ],
            "{}",
            algorithm.name()
        );
        assert_eq!(total, 25, "{}", algorithm.name());
    }
}

/// A check-only item (hits 0) that asks is granted without a hit of its own: how the
/// filter refills a lease.
pub async fn a_check_only_refill_grants_without_counting_a_hit<St: Store>(h: &Harness<St>) {
    h.at(W + 250 * MS);
    for algorithm in h.algorithms(25) {
        let c = h.check(algorithm.name(), limit(25, Unit::Hour, algorithm));
        let refill = asking(
            Check {
                hits: 0,
                ..c.clone()
            },
            quota(10, 1_000),
        );
        let d = h.one(&refill).await;
        assert_eq!(
            (d.allowed, granted(&d), d.remaining),
            (true, 10, 15),
            "{}",
            algorithm.name()
        );
        assert_eq!(h.one(&c).await.remaining, 14, "{}", algorithm.name());
        // Full: a refill is over the limit and takes nothing.
        let hog = asking(c.clone(), quota(100, 1_000));
        assert_eq!(granted(&h.one(&hog).await), 13, "{}", algorithm.name());
        let d = h.one(&refill).await;
        assert!(!d.allowed, "{}", algorithm.name());
        assert_eq!(d.grant, None, "{}", algorithm.name());
    }
}

/// No grant for a shadow item, for any item of an over-limit request (which consumes
/// nothing), or for a counter used twice in one request.
pub async fn no_grant_for_shadow_over_limit_or_repeated_counters<St: Store>(h: &Harness<St>) {
    h.at(W + 250 * MS);
    let q = quota(10, 1_000);
    let shadow = Check {
        shadow: true,
        ..asking(
            h.check("shadow", limit(25, Unit::Hour, Algorithm::FixedWindow)),
            q,
        )
    };
    let d = h.one(&shadow).await;
    assert_eq!((d.allowed, d.grant, d.remaining), (true, None, 24));

    let full = h.check("full", limit(1, Unit::Hour, Algorithm::FixedWindow));
    assert!(h.one(&full).await.allowed);
    for algorithm in h.algorithms(25) {
        let c = asking(
            h.check(algorithm.name(), limit(25, Unit::Hour, algorithm)),
            q,
        );
        let got = h.ask(&[c.clone(), full.clone()]).await;
        assert_eq!(
            got.iter().map(|d| (d.allowed, d.grant)).collect::<Vec<_>>(),
            [(true, None), (false, None)],
            "{}",
            algorithm.name()
        );
        let got = h.ask(&[c.clone(), c.clone()]).await;
        assert_eq!(
            got.iter()
                .map(|d| (d.allowed, d.grant, d.remaining))
                .collect::<Vec<_>>(),
            [(true, None, 24), (true, None, 23)],
            "{}: the same counter twice",
            algorithm.name()
        );
    }
}
