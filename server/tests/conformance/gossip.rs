//! The gossip store as one node: no peer, so it must answer exactly as the memory store
//! does (peers and their bound are tested in `gossip_e2e.rs` and the store's unit tests).

use super::*;

type One = Arc<GossipStore<Arc<ManualClock>>>;

fn one(clock: &Arc<ManualClock>, counting: Counting) -> One {
    Arc::new(GossipStore::with_clock(DEFAULT_CAPACITY, clock.clone()).with_counting(counting))
}

async fn harness(domain: &str) -> (Harness<One>, ()) {
    let clock = Arc::new(ManualClock::new(W));
    let store = one(&clock, Counting::AllOrNothing);
    let h = Harness {
        supports: part::supports,
        ..harness_of(store, clock, domain)
    };
    (h, ())
}

for_each_scenario!(test_per_scenario);

#[tokio::test]
async fn per_descriptor_counting_consumes_what_fits_in_a_rejected_request() {
    let clock = Arc::new(ManualClock::new(W));
    let store = one(&clock, Counting::PerDescriptor);
    let h = Harness {
        supports: part::supports,
        ..harness_of(store, clock, "per-descriptor")
    };
    super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&h).await;
}
