//! Scenarios for the stream-end charge (`x-floodgate-charge`): every item is
//! counted whether it fits or not, the limit goes into debt, and the answer is over the
//! limit with the exact time until one hit fits again, on every store.

use super::one_hit::one_hit_is_over_exactly_until;
use super::{bucket, d, limit, Harness, MS, S, US, W};
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};

fn costing(c: Check, hits: u64) -> Check {
    Check { hits, ..c }
}

pub async fn a_fixed_window_charge_passes_the_limit<St: Store>(h: &Harness<St>) {
    let c = h.check("fw", limit(10, Unit::Second, Algorithm::FixedWindow));
    h.at(W + 250 * MS);
    assert_eq!(h.one(&costing(c.clone(), 8)).await, d(true, 2, 750 * MS));
    assert_eq!(
        h.charge(&costing(c.clone(), 5)).await,
        d(false, 0, 750 * MS),
        "counted past the limit: over until the window ends"
    );
    one_hit_is_over_exactly_until(h, &c, W + 250 * MS, 750 * MS).await;
    // The next window starts with the debt of 3 (and one hit taken there): a charge that
    // fits is an admission.
    assert_eq!(h.charge(&costing(c, 4)).await, d(true, 2, S));
}

pub async fn a_token_bucket_charge_goes_into_debt<St: Store>(h: &Harness<St>) {
    if !h.needs(&[bucket(10)]) {
        return;
    }
    // 10 per second, burst 10: 3 tokens left, a charge of 8 leaves a debt of 5 tokens;
    // one hit fits once 6 have come back.
    let c = h.check("tb", limit(10, Unit::Second, bucket(10)));
    h.at(W);
    assert_eq!(h.one(&costing(c.clone(), 7)).await, d(true, 3, 700 * MS));
    assert_eq!(
        h.charge(&costing(c.clone(), 8)).await,
        d(false, 0, 600 * MS)
    );
    one_hit_is_over_exactly_until(h, &c, W, 600 * MS).await;
}

pub async fn a_sliding_counter_charge_weighs_on_the_next_window<St: Store>(h: &Harness<St>) {
    // 10 per second: 6 then a charge of 9 make 15 in window W. In the next, one hit fits
    // once 15 x (1 - e) <= 9, at e = 400 ms.
    let c = h.check(
        "swc",
        limit(10, Unit::Second, Algorithm::SlidingWindowCounter),
    );
    h.at(W);
    assert!(h.one(&costing(c.clone(), 6)).await.allowed);
    h.at(W + 500 * MS);
    assert_eq!(
        h.charge(&costing(c.clone(), 9)).await,
        d(false, 0, 900 * MS)
    );
    one_hit_is_over_exactly_until(h, &c, W + 500 * MS, 900 * MS).await;
}

pub async fn a_sliding_log_charge_joins_the_newest_entry<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::SlidingWindowLog]) {
        return;
    }
    // 10 per second: 3 at W, 4 at W+500ms, then a charge of 6 just after. It joins the
    // newest entry, restamped: 13 live, one hit fits once 4 have left, i.e. when the
    // merged entry leaves, one second after the charge (an entry of its own would have
    // let the 4 at W+500ms leave 100 us earlier).
    let c = h.check("swl", limit(10, Unit::Second, Algorithm::SlidingWindowLog));
    h.at(W);
    assert!(h.one(&costing(c.clone(), 3)).await.allowed);
    h.at(W + 500 * MS);
    assert!(h.one(&costing(c.clone(), 4)).await.allowed);
    let at = W + 500 * MS + 100 * US;
    h.at(at);
    assert_eq!(h.charge(&costing(c.clone(), 6)).await, d(false, 0, S));
    one_hit_is_over_exactly_until(h, &c, at, S).await;
    // With nothing live, a charge past the limit is an entry of its own.
    let c = h.check(
        "alone",
        limit(10, Unit::Second, Algorithm::SlidingWindowLog),
    );
    let later = at + 2 * S;
    h.at(later);
    assert_eq!(h.charge(&costing(c.clone(), 25)).await, d(false, 0, S));
    one_hit_is_over_exactly_until(h, &c, later, S).await;
}

pub async fn a_charge_counts_every_descriptor<St: Store>(h: &Harness<St>) {
    if !h.needs(&[bucket(2)]) {
        return;
    }
    // An item over its limit blocks nothing in a charge: the others, shadow ones
    // included, are counted too (on a cluster they span slots: one call per slot).
    let full = h.check("full", limit(3, Unit::Second, Algorithm::FixedWindow));
    let wide = h.check("wide", limit(100, Unit::Second, Algorithm::FixedWindow));
    let shadow = Check {
        shadow: true,
        ..h.check("shadow", limit(2, Unit::Second, bucket(2)))
    };
    h.at(W);
    assert!(h.one(&costing(full.clone(), 3)).await.allowed);
    let batch = [
        costing(full.clone(), 2),
        costing(wide.clone(), 2),
        costing(shadow.clone(), 3),
    ];
    let charged = h.store.charge(&batch).await.unwrap();
    assert_eq!(charged, [d(false, 0, S), d(true, 98, S), d(false, 0, S)]);
    assert_eq!(
        h.one(&wide).await,
        d(true, 97, S),
        "counted though another was over"
    );
    assert_eq!(h.one(&full).await, d(false, 0, S));
    let shadow_now = h.one(&shadow).await;
    assert!(!shadow_now.allowed, "the shadow item was counted too");
}

/// A charge of `u32::MAX` (what one hostile or buggy answer can report) owes at most one
/// limit: the block it causes is bounded, and a second one at once changes nothing.
pub async fn a_charge_owes_at_most_one_limit<St: Store>(h: &Harness<St>) {
    let huge = u64::from(u32::MAX);
    let at = W + 250 * MS;
    // (algorithm, the time until one hit fits after the huge charge at W + 250 ms)
    let cases = [
        // 10 tokens owed: 11 must come back, at 10 per second.
        (bucket(10), 1_100 * MS),
        // 20 counted: the next window starts full, so until it ends.
        (Algorithm::FixedWindow, S + 750 * MS),
        // 20 counted: in the next window 20 x (1 - e) <= 9 from e = 550 ms.
        (Algorithm::SlidingWindowCounter, 750 * MS + 550 * MS),
        // One entry restamped now: one unit.
        (Algorithm::SlidingWindowLog, S),
    ];
    for (algorithm, blocked_for) in cases {
        if !h.needs(&[algorithm]) {
            continue;
        }
        let c = h.check(
            &format!("huge-{}", algorithm.name()),
            limit(10, Unit::Second, algorithm),
        );
        h.at(at);
        assert!(h.one(&c).await.allowed);
        let charged = h.charge(&costing(c.clone(), huge)).await;
        assert_eq!(charged, d(false, 0, blocked_for), "{}", algorithm.name());
        let again = h.charge(&costing(c.clone(), huge)).await;
        assert_eq!(again, charged, "{}: owes no more", algorithm.name());
        one_hit_is_over_exactly_until(h, &c, at, blocked_for).await;
    }
}
