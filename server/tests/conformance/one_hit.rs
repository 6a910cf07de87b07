//! Scenarios for the filter's over-limit cache: on a denial, `reset_in_ns` (the RLS
//! `duration_until_reset`) is exactly the time until a one-hit request is admitted, on
//! every store. Each drives a counter over its limit, reads the duration, then checks that
//! one hit is still over one clock tick (1 µs, Redis's resolution) before it and admitted
//! at it. A longer duration would make the filter reject requests the server admits.

use super::{bucket, limit, Harness, MS, S, US, W};
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};

/// At `at`, `c` (any cost) is denied with a duration of `expected_ns`; a one-hit request on
/// the same counter is over 1 µs before that and admitted at it (0: admitted at once).
pub async fn one_hit_is_over_exactly_until<St: Store>(
    h: &Harness<St>,
    c: &Check,
    at: u64,
    expected_ns: u64,
) {
    h.at(at);
    let denied = h.one(c).await;
    assert!(!denied.allowed, "{c:?} is over at {at}");
    assert_eq!(denied.reset_in_ns, expected_ns, "{c:?} at {at}");
    let one = Check {
        hits: 1,
        ..c.clone()
    };
    if expected_ns > 0 {
        h.at(at + expected_ns - US);
        assert!(
            !h.one(&one).await.allowed,
            "{c:?}: one hit is over 1 µs before"
        );
    }
    h.at(at + expected_ns);
    assert!(
        h.one(&one).await.allowed,
        "{c:?}: one hit fits at the duration"
    );
}

fn costing(c: Check, hits: u64) -> Check {
    Check { hits, ..c }
}

pub async fn fixed_window_reports_until_the_window_ends<St: Store>(h: &Harness<St>) {
    let c = h.check("full", limit(2, Unit::Second, Algorithm::FixedWindow));
    h.at(W + 300 * MS);
    assert!(h.one(&costing(c.clone(), 2)).await.allowed);
    one_hit_is_over_exactly_until(h, &costing(c, 3), W + 300 * MS, 700 * MS).await;
    // Only the cost is too much: one hit fits now, reported as 0.
    let c = h.check("cost", limit(3, Unit::Second, Algorithm::FixedWindow));
    h.at(W + S + 400 * MS);
    assert!(h.one(&costing(c.clone(), 2)).await.allowed);
    one_hit_is_over_exactly_until(h, &costing(c, 2), W + S + 400 * MS, 0).await;
}

pub async fn token_bucket_reports_until_one_token_is_back<St: Store>(h: &Harness<St>) {
    if !h.needs(&[bucket(2)]) {
        return;
    }
    // 4 per second, burst 2: spent at W, a token is back every 250 ms. At W+100ms the
    // debt is 400 ms; one token fits once it is 250 ms, 150 ms later, whatever the cost
    // (2 hits would need 400 ms; 3 never fit).
    for (name, hits) in [("one", 1), ("two", 2), ("above-burst", 3)] {
        let c = h.check(name, limit(4, Unit::Second, bucket(2)));
        h.at(W);
        assert!(h.one(&costing(c.clone(), 2)).await.allowed);
        one_hit_is_over_exactly_until(h, &costing(c, hits), W + 100 * MS, 150 * MS).await;
    }
}

pub async fn sliding_log_reports_until_the_oldest_that_matters_leaves<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::SlidingWindowLog]) {
        return;
    }
    // 3 per second, logged at W, W+100ms, W+200ms: one more fits when the first leaves.
    for (name, hits) in [("one", 1), ("two", 2), ("never", 4)] {
        let c = h.check(name, limit(3, Unit::Second, Algorithm::SlidingWindowLog));
        for t in [W, W + 100 * MS, W + 200 * MS] {
            h.at(t);
            assert!(h.one(&c).await.allowed);
        }
        one_hit_is_over_exactly_until(h, &costing(c, hits), W + 300 * MS, 700 * MS).await;
    }
}

pub async fn sliding_counter_reports_until_the_estimate_has_room<St: Store>(h: &Harness<St>) {
    // 4 per second, 4 in window W: at W+1.1s the estimate is 3.6; one more fits once
    // 4 × (1 − e) ≤ 3, at e = 250 ms, whatever the cost.
    for (name, hits) in [("one", 1), ("three", 3), ("never", 5)] {
        let c = h.check(
            name,
            limit(4, Unit::Second, Algorithm::SlidingWindowCounter),
        );
        h.at(W);
        assert!(h.one(&costing(c.clone(), 4)).await.allowed);
        one_hit_is_over_exactly_until(h, &costing(c, hits), W + S + 100 * MS, 150 * MS).await;
    }
    // A full current window: the room comes in the next one (4 × (1 − e) ≤ 3 at 250 ms)...
    let c = h.check(
        "next",
        limit(4, Unit::Second, Algorithm::SlidingWindowCounter),
    );
    h.at(W + 2 * S);
    assert!(h.one(&costing(c.clone(), 4)).await.allowed);
    one_hit_is_over_exactly_until(h, &c, W + 2 * S + S / 2, 750 * MS).await;
    // ...and with a limit of one, only once the hit has slid out entirely.
    let c = h.check(
        "single",
        limit(1, Unit::Second, Algorithm::SlidingWindowCounter),
    );
    h.at(W + 4 * S + S / 2);
    assert!(h.one(&c).await.allowed);
    one_hit_is_over_exactly_until(h, &c, W + 4 * S + S / 2, 3 * S / 2).await;
}
