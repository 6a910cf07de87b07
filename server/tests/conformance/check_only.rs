//! Scenarios for a descriptor's own `hits_addend` of 0, **check-only** (the
//! envoyproxy/ratelimit semantics, which quota leases refill with): decided as whether one
//! hit would fit, `remaining` as it stands, nothing counted; in the all-or-nothing rule a
//! check-only item over its limit blocks the request like any other, and never consumes.

use super::{bucket, limit, Harness, MS, S, US, W};
use floodgate_server::algorithm::{self, Algorithm, Decision, State, Unit};
use floodgate_server::store::{Check, Store};

fn probe(c: &Check) -> Check {
    Check {
        hits: 0,
        ..c.clone()
    }
}

/// Per algorithm, probes interleaved with real hits answer what the pure definition says,
/// and the real hits decide exactly as they would without the probes.
pub async fn check_only_counts_nothing_on_every_algorithm<St: Store>(h: &Harness<St>) {
    for algorithm in h.algorithms(3) {
        let l = limit(3, Unit::Second, algorithm);
        let c = h.check(algorithm.name(), l);
        let mut state = State::fresh(&l);
        let mut now = W + 250 * MS;
        // Probe a fresh counter, fill it one hit at a time probing after each, probe it
        // full, then again after some time has passed.
        let steps = [0, 1, 0, 1, 0, 1, 0, 0, 1];
        for (i, hits) in steps.into_iter().enumerate() {
            if i == 7 {
                now += 400 * MS;
            }
            h.at(now);
            let want: Decision = {
                let (d, u) = algorithm::decide(&state, now, &l, hits);
                if d.allowed {
                    state.apply(u);
                }
                d
            };
            let got = h.one(&Check { hits, ..c.clone() }).await;
            assert_eq!(got, want, "{} step {i} ({hits} hits)", algorithm.name());
        }
    }
    // Pinned answers on a fixed window: a fresh probe sees the whole limit, and a full
    // counter's probe is over until the window ends, like a one-hit request.
    h.at(W + 250 * MS);
    let c = h.check("pinned", limit(2, Unit::Second, Algorithm::FixedWindow));
    let p = probe(&c);
    assert_eq!(h.one(&p).await, super::d(true, 2, 750 * MS));
    assert_eq!(h.one(&p).await, super::d(true, 2, 750 * MS), "still 2");
    assert_eq!(h.one(&c).await, super::d(true, 1, 750 * MS));
    assert_eq!(h.one(&c).await, super::d(true, 0, 750 * MS));
    assert_eq!(h.one(&p).await, super::d(false, 0, 750 * MS));
    if !h.needs(&[bucket(2), Algorithm::SlidingWindowLog]) {
        return;
    }
    // A token bucket's probe reports the time until it is full, as it stands.
    let b = h.check("bucket", limit(2, Unit::Second, bucket(2)));
    assert_eq!(h.one(&probe(&b)).await, super::d(true, 2, 0));
    assert_eq!(h.one(&b).await, super::d(true, 1, 500 * MS));
    assert_eq!(h.one(&probe(&b)).await, super::d(true, 1, 500 * MS));
    // A log's probe: until its newest entry leaves.
    let log = h.check("log", limit(2, Unit::Second, Algorithm::SlidingWindowLog));
    assert_eq!(h.one(&probe(&log)).await, super::d(true, 2, 0));
    assert_eq!(h.one(&log).await, super::d(true, 1, S));
    h.at(W + 250 * MS + 100 * US);
    assert_eq!(h.one(&probe(&log)).await, super::d(true, 1, S - 100 * US));
}

/// A check-only item over its limit makes the request over the limit, and nothing of the
/// request is consumed; within its limit it admits and the others consume.
pub async fn a_check_only_item_over_its_limit_blocks_and_consumes_nothing<St: Store>(
    h: &Harness<St>,
) {
    h.at(W);
    for (algorithm, roomy_algorithm) in h.algorithms(1).into_iter().zip(h.algorithms(5)) {
        let full = h.check(
            &format!("full-{}", algorithm.name()),
            limit(1, Unit::Minute, algorithm),
        );
        let other = h.check(
            &format!("other-{}", algorithm.name()),
            limit(5, Unit::Minute, Algorithm::FixedWindow),
        );
        assert!(h.one(&full).await.allowed, "fills the one-hit limit");
        let got = h.ask(&[probe(&full), other.clone()]).await;
        assert_eq!(
            got.iter().map(|d| d.allowed).collect::<Vec<_>>(),
            [false, true],
            "{}",
            algorithm.name()
        );
        assert_eq!(
            h.one(&other).await.remaining,
            4,
            "{}: the blocked request consumed nothing",
            algorithm.name()
        );
        // Within its limit, the probe admits and the other item consumes.
        let roomy = h.check(
            &format!("roomy-{}", algorithm.name()),
            limit(5, Unit::Minute, roomy_algorithm),
        );
        let got = h.ask(&[probe(&roomy), other.clone()]).await;
        assert_eq!(
            got.iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(true, 5), (true, 3)],
            "{}",
            algorithm.name()
        );
        assert_eq!(h.one(&probe(&roomy)).await.remaining, 5, "counted nothing");
    }
}
