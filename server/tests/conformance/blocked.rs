//! Scenarios for a limit of `requests_per_unit: 0` (a `blocked` item): always
//! over, no counter, the request's other items consume nothing, and a charge counts
//! nothing on it.

use super::{limit, Harness, S, W};
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};
use std::num::NonZeroU32;

pub async fn a_blocked_item_is_always_over_and_consumes_nothing<St: Store>(h: &Harness<St>) {
    h.at(W + 10 * S);
    let blocked = Check {
        blocked: true,
        ..h.check(
            "banned",
            limit(
                1,
                Unit::Minute,
                Algorithm::TokenBucket {
                    burst: NonZeroU32::MIN,
                },
            ),
        )
    };
    let enforced = h.check("other", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let pair = [blocked.clone(), enforced.clone()];
    let answer = h.ask(&pair).await;
    assert!(!answer[0].allowed && answer[1].allowed);
    assert_eq!(answer[0].remaining, 0);
    // Until the minute's epoch-aligned window ends, as the reference reports a block.
    let to_window_end = 60 * S - (W + 10 * S) % (60 * S);
    assert_eq!(answer[0].reset_in_ns, to_window_end);
    assert_eq!(
        h.one(&enforced).await.remaining,
        9,
        "the blocked request consumed nothing"
    );
    // Blocked in shadow mode: never blocks the others.
    let shadow = Check {
        shadow: true,
        ..blocked
    };
    assert_eq!(h.allowed(&[shadow, enforced.clone()]).await, [false, true]);
    assert_eq!(h.one(&enforced).await.remaining, 7);
}

pub async fn a_charge_counts_nothing_on_a_blocked_item<St: Store>(h: &Harness<St>) {
    h.at(W + 10 * S);
    let limit = limit(10, Unit::Minute, Algorithm::FixedWindow);
    let counted = h.check("shared", limit);
    // The same key and limit as a counting item: a blocked item still has no counter.
    let blocked = Check {
        blocked: true,
        hits: 4,
        ..counted.clone()
    };
    let answer = h
        .store
        .charge(&[
            blocked.clone(),
            Check {
                hits: 2,
                ..counted.clone()
            },
        ])
        .await
        .unwrap();
    assert!(!answer[0].allowed && answer[1].allowed);
    assert_eq!(answer[0].remaining, 0);
    assert_eq!(answer[0].reset_in_ns, 60 * S - (W + 10 * S) % (60 * S));
    assert_eq!(answer[1].remaining, 8);
    assert_eq!(
        h.one(&counted).await.remaining,
        7,
        "only the counting item's hits"
    );
}
