//! Scenarios for the reference's `quota_mode`: quota-mode items block the
//! request only together (`store::admits`), get no lease, and never refuse a charge.

use super::{limit, Harness, W};
use floodgate_server::algorithm::lease::Quota;
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};
use std::num::NonZeroU32;

pub async fn quota_items_block_only_together<St: Store>(h: &Harness<St>) {
    h.at(W);
    let quota = |name: &str, rpu| Check {
        quota_mode: true,
        ..h.check(name, limit(rpu, Unit::Minute, Algorithm::FixedWindow))
    };
    let (alpha, beta) = (quota("alpha", 1), quota("beta", 2));
    let enforced = h.check("org", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let all = [alpha.clone(), beta.clone(), enforced.clone()];
    assert_eq!(h.allowed(&all).await, [true, true, true]);
    // alpha is over but beta is within: admitted, and beta and org consume.
    assert_eq!(h.allowed(&all).await, [false, true, true]);
    // Every quota item over: rejected, nothing consumed.
    assert_eq!(h.allowed(&all).await, [false, false, true]);
    assert_eq!(h.one(&enforced).await.remaining, 7);
    // A single quota item over blocks the request on its own.
    assert_eq!(h.allowed(&[alpha, enforced.clone()]).await, [false, true]);
    assert_eq!(h.one(&enforced).await.remaining, 6);
}

pub async fn a_quota_mode_item_gets_no_lease_and_never_refuses_a_charge<St: Store>(
    h: &Harness<St>,
) {
    h.at(W);
    let soft = Check {
        quota_mode: true,
        quota: Some(Quota {
            requests: NonZeroU32::new(5).unwrap(),
            valid_ms: 1_000,
        }),
        ..h.check("soft", limit(2, Unit::Minute, Algorithm::FixedWindow))
    };
    let admitted = h.one(&soft).await;
    assert!(admitted.allowed);
    assert_eq!(admitted.grant, None, "a quota-mode limit leases nothing");
    assert_eq!(admitted.remaining, 1);
    // A charge past a quota-mode limit is counted like any charge, into debt.
    let charged = h
        .charge(&Check {
            hits: 3,
            ..soft.clone()
        })
        .await;
    assert!(!charged.allowed);
    assert_eq!(charged.remaining, 0);
    assert!(!h.one(&soft).await.allowed, "the charge was counted");
}
