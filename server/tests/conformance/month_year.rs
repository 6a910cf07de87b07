//! Scenarios for the reference's `month` and `year` units: 30 and 365 days,
//! epoch aligned, on every algorithm.

use super::{limit, Harness, W};
use floodgate_server::algorithm::Unit;
use floodgate_server::store::Store;

pub async fn month_and_year_work_with_every_algorithm<St: Store>(h: &Harness<St>) {
    h.at(W);
    for unit in [Unit::Month, Unit::Year] {
        for algorithm in h.algorithms(2) {
            let c = h.check(
                &format!("{}-{}", unit.name(), algorithm.name()),
                limit(2, unit, algorithm),
            );
            assert_eq!(h.allowed(std::slice::from_ref(&c)).await, [true]);
            assert_eq!(h.allowed(std::slice::from_ref(&c)).await, [true]);
            let denied = h.one(&c).await;
            assert!(!denied.allowed, "{unit:?} {algorithm:?}");
            assert!(denied.reset_in_ns > 0 && denied.reset_in_ns <= unit.period_ns());
        }
    }
}
