//! The concurrency table against its promises: never more than `max` admitted whatever
//! the interleaving, a release after a reclaim frees nothing, counts return to 0.

use super::*;
use crate::testing::MemoryShared;
use proptest::prelude::*;
use std::num::NonZeroU32;

const NOW: u64 = 1_000_000;
const DURATION: u64 = 8_000;

fn table(size: u32) -> (ConcurrencyTable, MemoryShared) {
    let t = ConcurrencyTable::new(NonZeroU32::new(size).unwrap());
    let store = MemoryShared::default();
    t.prepare(&store).unwrap();
    (t, store)
}

fn want(fp: u128, max: u32) -> Want {
    Want {
        fingerprint: fp,
        tag: 7,
        max,
        duration_ms: DURATION,
        cost: 1,
    }
}

/// What key `fp` holds at `now`, and what looking reclaimed: a request that cannot fit
/// reports what is held without taking anything.
fn observe(t: &ConcurrencyTable, store: &MemoryShared, fp: u128, now: u64) -> (u64, u64) {
    let a = t.acquire(store, &want(fp, 0), now).unwrap();
    match a.outcome {
        Acquired::Full { in_flight } | Acquired::Held { in_flight, .. } => (in_flight, a.reclaimed),
    }
}

fn in_flight(t: &ConcurrencyTable, store: &MemoryShared, fp: u128, now: u64) -> u64 {
    observe(t, store, fp, now).0
}

#[test]
fn admits_up_to_max_then_rejects_and_a_release_frees_one() {
    let (t, store) = table(64);
    let holds: Vec<Hold> = (0..3)
        .map(|_| t.acquire(&store, &want(1, 3), NOW).unwrap().hold.unwrap())
        .collect();
    let fourth = t.acquire(&store, &want(1, 3), NOW).unwrap();
    assert_eq!(fourth.outcome, Acquired::Full { in_flight: 3 });
    assert!(fourth.hold.is_none(), "a rejected request takes no slot");
    assert!(
        t.acquire(&store, &want(2, 3), NOW).unwrap().hold.is_some(),
        "another key"
    );
    assert_eq!(t.release(&store, &holds[0], NOW + 1).freed, 1);
    assert!(t
        .acquire(&store, &want(1, 3), NOW + 2)
        .unwrap()
        .hold
        .is_some());
}

#[test]
fn holds_come_back_at_their_deadline_and_a_late_release_frees_nothing() {
    let (t, store) = table(64);
    let old = t.acquire(&store, &want(1, 1), NOW).unwrap().hold.unwrap();
    assert!(old.deadline_ms >= NOW + DURATION, "never reclaimed early");
    assert!(t
        .acquire(&store, &want(1, 1), old.deadline_ms - 1)
        .unwrap()
        .hold
        .is_none());
    let later = t.acquire(&store, &want(1, 1), old.deadline_ms).unwrap();
    assert_eq!(
        later.reclaimed, 1,
        "the vanished holder's slot is reclaimed"
    );
    let new = later.hold.unwrap();
    assert_eq!(t.release(&store, &old, old.deadline_ms + 1).freed, 0);
    assert_eq!(
        in_flight(&t, &store, 1, old.deadline_ms + 1),
        1,
        "the new hold stays"
    );
    assert_eq!(t.release(&store, &new, old.deadline_ms + 2).freed, 1);
    assert_eq!(in_flight(&t, &store, 1, old.deadline_ms + 2), 0);
}

#[test]
fn a_cost_takes_that_many_slots() {
    let (t, store) = table(64);
    let big = Want {
        cost: 3,
        ..want(1, 4)
    };
    let hold = t.acquire(&store, &big, NOW).unwrap().hold.unwrap();
    assert!(t.acquire(&store, &big, NOW).unwrap().hold.is_none());
    assert_eq!(in_flight(&t, &store, 1, NOW), 3);
    assert_eq!(t.release(&store, &hold, NOW).freed, 3);
}

#[test]
fn a_key_with_holds_in_flight_is_never_evicted() {
    let (t, store) = table(PROBE_WINDOW);
    // Fill every slot of the (whole) table with a live key.
    for fp in 0..u128::from(PROBE_WINDOW) {
        assert!(t.acquire(&store, &want(fp, 1), NOW).unwrap().hold.is_some());
    }
    let err = t.acquire(&store, &want(99, 1), NOW).unwrap_err();
    assert_eq!(err, ConcurrencyError::Full);
    for fp in 0..u128::from(PROBE_WINDOW) {
        assert_eq!(in_flight(&t, &store, fp, NOW), 1, "key {fp} kept");
    }
    // Once a key's holds expire, its slot is taken and its reclaim reported.
    let later = t.acquire(&store, &want(99, 1), NOW + 2 * DURATION).unwrap();
    assert!(later.hold.is_some());
    assert_eq!(later.reclaimed_other, Some((7, 1)));
}

#[test]
fn racing_workers_never_admit_more_than_max() {
    let t = ConcurrencyTable::new(NonZeroU32::new(64).unwrap());
    let mut store = MemoryShared::default();
    store.yield_between = true;
    t.prepare(&store).unwrap();
    let admitted: u32 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                s.spawn(move || {
                    (0..20)
                        .filter(|_| t.acquire(&store, &want(5, 10), NOW).unwrap().hold.is_some())
                        .count() as u32
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(admitted, 10);
    assert_eq!(in_flight(&t, &store, 5, NOW), 10);
}

#[test]
fn values_of_the_wrong_shape_are_free_slots() {
    assert_eq!(Holds::decode(&[]), None);
    assert_eq!(Holds::decode(&[0; 21]), None);
    assert_eq!(Holds::decode(&[0; MAX_VALUE_LEN + 12]), None);
    let mut h = Holds::empty(9, 1);
    h.acquire(NOW, DURATION, 5, 2);
    assert_eq!(Holds::decode(&h.encode()), Some(h));
}

/// One step of a client population against one key.
#[derive(Debug, Clone)]
enum Step {
    Acquire(u32),
    /// Release the n-th hold still held (modulo).
    Release(usize),
    /// Let time pass, in milliseconds.
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..4).prop_map(Step::Acquire),
        3 => any::<usize>().prop_map(Step::Release),
        1 => (0u64..3_000).prop_map(Step::Wait),
    ]
}

proptest! {
    /// Against a model: in flight is the live holds' cost, never above max, and every
    /// slot comes back, by release or by deadline, exactly once.
    #[test]
    fn in_flight_follows_the_model(max in 1u32..6, steps in prop::collection::vec(step(), 1..80)) {
        let (t, store) = table(16);
        let mut now = NOW;
        let mut live: Vec<Hold> = Vec::new();
        let (mut taken, mut freed, mut reclaimed) = (0u64, 0u64, 0u64);
        for s in steps {
            match s {
                Step::Acquire(cost) => {
                    let a = t.acquire(&store, &Want { cost, ..want(3, max) }, now).unwrap();
                    reclaimed += a.reclaimed;
                    if let Some(h) = a.hold {
                        taken += u64::from(h.cost);
                        live.push(h);
                    }
                }
                Step::Release(n) if !live.is_empty() => {
                    let h = live.remove(n % live.len());
                    let r = t.release(&store, &h, now);
                    prop_assert!(h.deadline_ms > now || r.freed == 0, "nothing freed after reclaim");
                    freed += u64::from(r.freed);
                    reclaimed += r.reclaimed;
                }
                Step::Release(_) => {}
                Step::Wait(ms) => now += ms,
            }
            live.retain(|h| h.deadline_ms > now);
            let held: u64 = live.iter().map(|h| u64::from(h.cost)).sum();
            prop_assert!(held <= u64::from(max));
            let (seen, found) = observe(&t, &store, 3, now);
            reclaimed += found;
            prop_assert_eq!(seen, held);
        }
        // Everything ends: the count returns to 0, and every slot taken came back once.
        now += 2 * DURATION;
        let (seen, found) = observe(&t, &store, 3, now);
        reclaimed += found;
        prop_assert_eq!(seen, 0);
        prop_assert_eq!(taken, freed + reclaimed);
    }

    /// A hold's deadline is never before now + duration, and within one width after it.
    #[test]
    fn deadlines_round_up_within_one_width(now in 0u64..1 << 50, duration in 1_000u64..86_400_000) {
        let d = deadline(now, duration);
        prop_assert!(d >= now + duration);
        prop_assert!(d < now + duration + duration.div_ceil(BUCKETS));
    }
}
