//! Scenarios for counting a rejected request: what its admitted descriptors
//! report under all-or-nothing (the remaining that holds, nothing having been taken), and
//! what `Counting::PerDescriptor`, the reference's counting, consumes.

use super::{limit, Harness, W};
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};

pub async fn a_rejected_request_reports_the_remaining_that_holds<St: Store>(h: &Harness<St>) {
    h.at(W);
    for algorithm in h.algorithms(10) {
        let name = algorithm.name();
        let tight = h.check(
            &format!("{name}-tight"),
            limit(1, Unit::Minute, Algorithm::FixedWindow),
        );
        let loose = Check {
            hits: 2,
            ..h.check(&format!("{name}-loose"), limit(10, Unit::Minute, algorithm))
        };
        let twice = [tight.clone(), loose.clone(), loose.clone()];
        let admitted = h.ask(&twice).await;
        assert_eq!(
            admitted
                .iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(true, 0), (true, 8), (true, 6)],
            "{name}: admitted, each told what is left after it"
        );
        let rejected = h.ask(&twice).await;
        assert_eq!(
            rejected
                .iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(false, 0), (true, 6), (true, 6)],
            "{name}: rejected, so the loose limit still has its 6"
        );
        assert_eq!(
            h.one(&loose).await.remaining,
            4,
            "{name}: and 6 - 2 = 4 now"
        );
    }
}

/// Run on stores built with `Counting::PerDescriptor` (`--counting per-descriptor`).
pub async fn per_descriptor_counting_consumes_what_fits_in_a_rejected_request<St: Store>(
    h: &Harness<St>,
) {
    h.at(W);
    for algorithm in h.algorithms(10) {
        let name = algorithm.name();
        let tight = h.check(
            &format!("{name}-tight"),
            limit(1, Unit::Minute, Algorithm::FixedWindow),
        );
        let loose = Check {
            hits: 2,
            ..h.check(&format!("{name}-loose"), limit(10, Unit::Minute, algorithm))
        };
        let both = [tight.clone(), loose.clone()];
        assert_eq!(h.allowed(&both).await, [true, true], "{name}");
        // Rejected by the tight limit, yet the loose one is drained, as the reference does.
        for left in [6, 4, 2, 0] {
            let ds = h.ask(&both).await;
            assert_eq!(
                ds.iter()
                    .map(|d| (d.allowed, d.remaining))
                    .collect::<Vec<_>>(),
                [(false, 0), (true, left)],
                "{name}"
            );
        }
        let ds = h.ask(&both).await;
        assert_eq!(
            ds.iter().map(|d| d.allowed).collect::<Vec<_>>(),
            [false, false],
            "{name}: the loose limit is spent by requests that were all rejected"
        );
        assert!(!h.one(&loose).await.allowed, "{name}");
    }
}
