//! Memory store: exactness under concurrency, all-or-nothing batches, bounds.

use super::*;
use crate::algorithm::{Algorithm, Unit};
use crate::clock::ManualClock;
use crate::store::CounterKey;
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * S;

fn limit(rpu: u32, algorithm: Algorithm) -> Limit {
    Limit {
        requests_per_unit: NonZeroU32::new(rpu).unwrap(),
        unit: Unit::Second,
        unit_multiplier: NonZeroU16::MIN,
        algorithm,
    }
}

fn check(key: &str, limit: Limit) -> Check {
    Check {
        key: CounterKey::new("d", [("k", key)]),
        limit,
        hits: 1,
        shadow: false,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

fn store(capacity: usize) -> (Arc<ManualClock>, MemoryStore<Arc<ManualClock>>) {
    let clock = Arc::new(ManualClock::new(T0));
    (clock.clone(), MemoryStore::with_clock(capacity, clock))
}

fn allowed(store: &MemoryStore<Arc<ManualClock>>, batch: &[Check]) -> Vec<bool> {
    store
        .check_now(batch)
        .unwrap()
        .iter()
        .map(|d| d.allowed)
        .collect()
}

fn all_algorithms() -> [Algorithm; 4] {
    [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket {
            burst: NonZeroU32::new(500).unwrap(),
        },
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
    ]
}

#[test]
fn sixteen_tasks_on_one_key_admit_exactly_the_limit() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    for algorithm in all_algorithms() {
        let (_clock, store) = store(DEFAULT_CAPACITY);
        let store = Arc::new(store);
        let l = limit(500, algorithm);
        let admitted: usize = rt.block_on(async {
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let mut n = 0;
                        for _ in 0..100 {
                            let d = store.check(&[check("hot", l)]).await.unwrap();
                            n += usize::from(d[0].allowed);
                            tokio::task::yield_now().await;
                        }
                        n
                    })
                })
                .collect();
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total
        });
        assert_eq!(admitted, 500, "{}", algorithm.name());
    }
}

#[test]
fn a_rejected_request_consumes_nothing() {
    let (_clock, s) = store(DEFAULT_CAPACITY);
    let tight = check("tight", limit(1, Algorithm::FixedWindow));
    let loose = check("loose", limit(10, Algorithm::FixedWindow));
    assert_eq!(allowed(&s, &[tight.clone(), loose.clone()]), [true, true]);
    for _ in 0..5 {
        assert_eq!(allowed(&s, &[tight.clone(), loose.clone()]), [false, true]);
    }
    // Only the admitted request counted against the loose limit: 10 - 1 - this one.
    let d = s.check_now(&[loose]).unwrap();
    assert_eq!(d[0].remaining, 8);
}

#[test]
fn a_shadow_limit_never_blocks_the_others() {
    let (_clock, s) = store(DEFAULT_CAPACITY);
    let mut shadow = check("shadow", limit(1, Algorithm::FixedWindow));
    shadow.shadow = true;
    let enforced = check("enforced", limit(10, Algorithm::FixedWindow));
    assert_eq!(
        allowed(&s, &[shadow.clone(), enforced.clone()]),
        [true, true]
    );
    assert_eq!(
        allowed(&s, &[shadow.clone(), enforced.clone()]),
        [false, true]
    );
    let d = s.check_now(&[enforced]).unwrap();
    assert_eq!(d[0].remaining, 7);
}

#[test]
fn the_same_counter_twice_in_one_request_counts_twice() {
    let (_clock, s) = store(DEFAULT_CAPACITY);
    for algorithm in all_algorithms() {
        let key = format!("dup-{}", algorithm.name());
        let one = check(&key, limit(1, algorithm));
        let one = match algorithm {
            Algorithm::TokenBucket { .. } => Check {
                limit: limit(
                    1,
                    Algorithm::TokenBucket {
                        burst: NonZeroU32::MIN,
                    },
                ),
                ..one
            },
            _ => one,
        };
        assert_eq!(allowed(&s, &[one.clone(), one.clone()]), [true, false]);
        assert_eq!(
            allowed(&s, &[one]),
            [true],
            "the rejected pair consumed nothing"
        );
    }
}

#[test]
fn fresh_state_is_swept_and_its_cells_returned() {
    let (clock, s) = store(DEFAULT_CAPACITY);
    for i in 0..100 {
        let algorithm = all_algorithms()[i % 4];
        s.check_now(&[check(&i.to_string(), limit(500, algorithm))])
            .unwrap();
    }
    assert_eq!(s.len(), 100);
    assert_eq!(s.cells(), 125, "one per counter, one per log entry");
    assert_eq!(s.sweep(), 0, "nothing is idle yet");
    // The sliding counter remembers its window for one more unit.
    clock.advance(2 * S);
    assert_eq!(s.sweep(), 100);
    assert_eq!((s.len(), s.cells()), (0, 0));
}

#[test]
fn a_full_store_refuses_new_counters_and_keeps_old_ones_exact() {
    let (clock, s) = store(10);
    let l = limit(2, Algorithm::FixedWindow);
    for i in 0..10 {
        assert_eq!(allowed(&s, &[check(&i.to_string(), l)]), [true]);
    }
    assert_eq!(s.check_now(&[check("new", l)]), Err(StoreError::Full(10)));
    assert_eq!(
        allowed(&s, &[check("0", l)]),
        [true],
        "existing counters still work"
    );
    assert_eq!(allowed(&s, &[check("0", l)]), [false], "and still count");
    clock.advance(S);
    s.sweep();
    assert_eq!(
        allowed(&s, &[check("new", l)]),
        [true],
        "room again once swept"
    );
}

#[test]
fn a_full_store_refuses_log_growth() {
    let (clock, s) = store(3);
    let l = limit(10, Algorithm::SlidingWindowLog);
    assert_eq!(allowed(&s, &[check("log", l)]), [true]);
    clock.advance(1);
    assert_eq!(allowed(&s, &[check("log", l)]), [true]);
    clock.advance(1);
    assert!(matches!(
        s.check_now(&[check("log", l)]),
        Err(StoreError::Full(3))
    ));
    // Once the entries leave the window the log is trimmed and has room again.
    clock.advance(S);
    assert_eq!(allowed(&s, &[check("log", l)]), [true]);
    assert_eq!(s.cells(), 2);
}

#[test]
fn a_changed_limit_starts_afresh() {
    let (_clock, s) = store(DEFAULT_CAPACITY);
    assert_eq!(
        allowed(&s, &[check("k", limit(1, Algorithm::FixedWindow))]),
        [true]
    );
    assert_eq!(
        allowed(&s, &[check("k", limit(1, Algorithm::FixedWindow))]),
        [false]
    );
    assert_eq!(
        allowed(&s, &[check("k", limit(2, Algorithm::FixedWindow))]),
        [true]
    );
}

/// A counter's entry is fixed-size: the key is a fingerprint, never the client's bytes
/// (so a flood of long values costs what short ones cost); the per-cell figure of
/// `docs/server/stores.md` is built on this size.
#[test]
fn a_counters_entry_is_fixed_size() {
    let entry = std::mem::size_of::<(CounterKey, Slot)>();
    assert_eq!(std::mem::size_of::<CounterKey>(), 16);
    assert!(entry <= 96, "{entry} bytes");
}

mod rejected_batches {
    use super::*;
    use proptest::prelude::*;

    fn algorithm() -> impl Strategy<Value = Algorithm> {
        prop_oneof![
            Just(Algorithm::FixedWindow),
            (1u32..=6).prop_map(|b| Algorithm::TokenBucket {
                burst: NonZeroU32::new(b).unwrap()
            }),
            Just(Algorithm::SlidingWindowLog),
            Just(Algorithm::SlidingWindowCounter),
        ]
    }

    proptest! {
        /// After any traffic, a rejected batch's admitted items report exactly what the
        /// counter has: asked alone next, each is admitted with that minus its hits.
        #[test]
        fn an_admitted_item_of_a_rejected_batch_reports_what_holds(
            algs in prop::collection::vec((algorithm(), 1u32..=6), 3),
            warmup in prop::collection::vec((0usize..3, 1u64..=3, 0u64..400_000_000), 0..12),
            hits in prop::collection::vec(1u64..=3, 3),
        ) {
            let (clock, store) = store(10_000);
            let checks: Vec<Check> = algs
                .iter()
                .enumerate()
                .map(|(i, &(a, rpu))| check(&format!("c{i}"), limit(rpu, a)))
                .collect();
            let mut now = T0;
            for (i, h, gap) in warmup {
                now += gap;
                clock.set(now);
                let c = Check { hits: h, ..checks[i].clone() };
                store.check_now(&[c]).unwrap();
            }
            // Item 0 can never fit (more hits than any limit or burst), so the batch is
            // rejected whatever the others say.
            let mut batch = vec![Check { hits: 7, ..checks[0].clone() }];
            batch.extend((1..3).map(|i| Check { hits: hits[i], ..checks[i].clone() }));
            let decided = store.check_now(&batch).unwrap();
            prop_assert!(!decided[0].allowed);
            for (c, d) in batch.iter().zip(&decided).skip(1) {
                if !d.allowed {
                    continue;
                }
                let alone = store.check_now(std::slice::from_ref(c)).unwrap()[0];
                prop_assert!(alone.allowed, "{:?}", c.limit);
                prop_assert_eq!(u64::from(alone.remaining) + c.hits, u64::from(d.remaining));
            }
        }
    }
}

#[test]
fn check_only_items_take_no_cell() {
    let (_, s) = store(1);
    for algorithm in all_algorithms() {
        let probe = Check {
            hits: 0,
            ..check(algorithm.name(), limit(5, algorithm))
        };
        assert_eq!(allowed(&s, &[probe.clone(), probe]), [true, true]);
    }
    assert_eq!(s.cells(), 0, "probing fresh counters stores nothing");
    // At capacity a probe still answers (it needs no cell), and with a hit on the same
    // counter the reservation counts the cell the hit needs.
    assert!(s
        .check_now(&[check("taken", limit(5, Algorithm::FixedWindow))])
        .is_ok());
    let log = limit(5, Algorithm::SlidingWindowLog);
    let probe = Check {
        hits: 0,
        ..check("log", log)
    };
    assert_eq!(allowed(&s, std::slice::from_ref(&probe)), [true]);
    assert!(matches!(
        s.check_now(&[probe, check("log", log)]),
        Err(StoreError::Full(1))
    ));
    assert_eq!(s.cells(), 1);
}

#[test]
fn holds_take_a_cell_each_and_are_counted_in_flight_and_reclaimed() {
    use crate::algorithm::concurrency::{HoldId, HoldOp};
    let (clock, store) = store(100);
    let l = limit(3, Algorithm::Concurrency);
    let take = |who: &str| Check {
        hold: Some(HoldOp::Acquire(HoldId::parse(who.as_bytes()).unwrap())),
        ..check("streams", l)
    };
    assert_eq!(allowed(&store, &[take("a"), take("b")]), [true, true]);
    assert_eq!(store.cells(), 3, "the counter and one cell per hold");
    store.sweep();
    assert_eq!((store.holds_in_flight(), store.holds_reclaimed()), (2, 0));
    // Past both deadlines: the next write drops them (reclaimed) and takes its own.
    clock.advance(S);
    assert_eq!(allowed(&store, &[take("c")]), [true]);
    assert_eq!(store.holds_reclaimed(), 2);
    assert_eq!(store.cells(), 2);
    store.sweep();
    assert_eq!(store.holds_in_flight(), 1);
    // Nobody touches it again: the sweep drops the counter and its expired hold.
    clock.advance(S);
    assert_eq!(store.sweep(), 1);
    assert_eq!((store.holds_in_flight(), store.holds_reclaimed()), (0, 3));
    assert_eq!(store.cells(), 0);
}
