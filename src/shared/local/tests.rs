use super::*;
use crate::bucket::Tat;
use crate::shared::Versioned;
use crate::testing::{Broken, MemoryShared};
use std::cell::Cell;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const NOW: u64 = 1_700_000_000_000_000_000;

fn table(size: u32) -> Table {
    Table::new(NonZeroU32::new(size).unwrap())
}

fn take(fp: u128, capacity: u32, rate_micro: u64) -> Take {
    Take {
        fingerprint: fp,
        quota: Quota::new(capacity, rate_micro).unwrap(),
        shadow: false,
        cost: 1,
    }
}

fn prepared(size: u32) -> (Table, MemoryShared) {
    let t = table(size);
    let store = MemoryShared::default();
    t.prepare(&store).unwrap();
    (t, store)
}

fn check(t: &Table, store: &impl SharedData, takes: &[Take]) -> Checked {
    take_all(t, store, takes, NOW, &mut TableEvents::default()).unwrap()
}

/// Tokens left in a bucket right now, read straight from the table.
fn left(t: &Table, store: &impl SharedData, tk: &Take) -> u32 {
    let found = t.find(store, tk.fingerprint, NOW).unwrap();
    let state = if found.origin == Origin::Existing {
        found.state
    } else {
        Tat::default()
    };
    match bucket::decide(state, NOW, tk.quota, 1) {
        d @ Decision::Allow { .. } => d.remaining() + 1,
        Decision::Deny { remaining, .. } => remaining,
    }
}

#[test]
fn a_bucket_admits_its_capacity_then_denies() {
    let (t, store) = prepared(64);
    let a = take(1, 3, 0);
    let allowed = (0..5).filter(|_| check(&t, &store, &[a]).allowed).count();
    assert_eq!(allowed, 3);
}

#[test]
fn a_denied_request_consumes_nothing_from_other_rules() {
    let (t, store) = prepared(64);
    let strict = take(1, 1, 0);
    let loose = take(2, 5, 0);
    assert!(check(&t, &store, &[strict, loose]).allowed);
    assert_eq!(left(&t, &store, &loose), 4);
    let denied = check(&t, &store, &[strict, loose]);
    assert!(!denied.allowed);
    assert!(!denied.decisions[0].is_allow());
    assert!(denied.decisions[1].is_allow(), "loose would have allowed");
    assert_eq!(
        left(&t, &store, &loose),
        4,
        "the denied request took nothing"
    );
}

#[test]
fn shadow_denials_are_reported_but_never_enforced() {
    let (t, store) = prepared(64);
    let shadow = Take {
        shadow: true,
        ..take(1, 1, 0)
    };
    let enforced = take(2, 10, 0);
    assert!(check(&t, &store, &[shadow, enforced]).allowed);
    let second = check(&t, &store, &[shadow, enforced]);
    assert!(second.allowed);
    assert!(!second.decisions[0].is_allow());
    assert_eq!(left(&t, &store, &enforced), 8);
}

#[test]
fn new_buckets_and_evictions_are_counted() {
    let (t, store) = prepared(8);
    let mut events = TableEvents::default();
    for fp in 0..8u128 {
        take_all(&t, &store, &[take(fp, 5, 0)], NOW, &mut events).unwrap();
    }
    assert_eq!(events.new_buckets, 8);
    take_all(&t, &store, &[take(100, 5, 0)], NOW, &mut events).unwrap();
    assert_eq!(events.evictions, 1);
}

/// A flood of distinct keys never grows shared data beyond the table.
#[test]
fn a_hundred_thousand_keys_stay_within_the_table() {
    let (t, store) = prepared(64);
    let mut events = TableEvents::default();
    for fp in 0..100_000u128 {
        let fp = fp.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        let checked = take_all(&t, &store, &[take(fp, 10, 1_000_000)], NOW, &mut events);
        assert!(checked.unwrap().allowed);
    }
    assert_eq!(store.keys(), 65);
    assert_eq!(events.new_buckets, 64);
}

/// Wraps a store and, just before our first conditional write, lets "another worker"
/// run a request of its own: a deterministic compare-and-swap conflict.
struct Interleaved<'a> {
    store: &'a MemoryShared,
    meddle: Cell<Option<Box<dyn FnOnce() + 'a>>>,
}

impl SharedData for Interleaved<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.store.get(key)
    }
    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        if let Some(meddle) = self.meddle.take() {
            meddle();
        }
        self.store.set(key, value, cas)
    }
    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.store.create(key, value)
    }
}

#[test]
fn a_conflict_is_decided_again_not_just_written_again() {
    let (t, store) = prepared(64);
    let last_token = take(1, 1, 0);
    let racing = Interleaved {
        store: &store,
        meddle: Cell::new(Some(Box::new(|| {
            assert!(
                check(&t, &store, &[last_token]).allowed,
                "the other worker wins"
            );
        }))),
    };
    let mut events = TableEvents::default();
    let ours = take_all(&t, &racing, &[last_token], NOW, &mut events).unwrap();
    assert!(
        !ours.allowed,
        "only one of two racing requests gets the last token"
    );
    assert_eq!(events.conflicts, 1);
}

#[test]
fn a_late_denial_refunds_rules_already_committed() {
    let (t, store) = prepared(64);
    let first = take(1, 5, 0);
    let second = take(2, 1, 0);
    // Our first write (rule `first`) goes through; meanwhile another worker takes the
    // last token of `second`, so our commit of `second` conflicts and now denies.
    let racing = Interleaved {
        store: &store,
        meddle: Cell::new(Some(Box::new(|| {
            assert!(check(&t, &store, &[second]).allowed);
        }))),
    };
    let ours = take_all(
        &t,
        &racing,
        &[first, second],
        NOW,
        &mut TableEvents::default(),
    );
    assert!(!ours.unwrap().allowed);
    assert_eq!(left(&t, &store, &first), 5, "refunded");
}

/// A store whose conditional writes always lose.
struct AlwaysConflicting(MemoryShared);

impl SharedData for AlwaysConflicting {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.0.get(key)
    }
    fn set(&self, _: &[u8], _: &[u8], _: u32) -> Result<(), SetError> {
        Err(SetError::Conflict)
    }
    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.0.create(key, value)
    }
}

#[test]
fn endless_conflicts_end_in_contention() {
    let (t, store) = prepared(64);
    let mut events = TableEvents::default();
    let result = take_all(
        &t,
        &AlwaysConflicting(store),
        &[take(1, 5, 0)],
        NOW,
        &mut events,
    );
    assert_eq!(result, Err(LocalError::Contention));
    assert_eq!(events.conflicts, MAX_ATTEMPTS);
}

#[test]
fn host_failures_are_reported() {
    let result = take_all(
        &table(8),
        &Broken(2),
        &[take(1, 5, 0)],
        NOW,
        &mut TableEvents::default(),
    );
    assert_eq!(result, Err(LocalError::Store(StoreError { status: 2 })));
}

/// Eight threads hammer one bucket through a store that yields between every call, to
/// force CAS conflicts: exactly the capacity is admitted, every time. Whether threads
/// interleave is up to the OS scheduler (on a loaded machine they may run one after
/// another), so the experiment is repeated on a fresh table until one run has seen
/// conflicts; each run must be exact.
#[test]
fn concurrent_workers_admit_exactly_the_capacity() {
    let saw_conflicts = (0..20).any(|_| {
        let (admitted, left_in_other, conflicts) = hammer_one_bucket();
        assert_eq!(admitted, 50);
        assert_eq!(left_in_other, 950, "denied requests took nothing");
        conflicts > 0
    });
    assert!(saw_conflicts, "the test must exercise conflicts");
}

/// One run of [`concurrent_workers_admit_exactly_the_capacity`]: (requests admitted,
/// tokens left in the second bucket each request also took from, CAS conflicts seen).
fn hammer_one_bucket() -> (u32, u32, u32) {
    let t = table(128);
    let mut store = MemoryShared::default();
    store.yield_between = true;
    t.prepare(&store).unwrap();
    let admitted = Arc::new(AtomicU32::new(0));
    let conflicts = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (store, admitted, conflicts) = (store.clone(), admitted.clone(), conflicts.clone());
            std::thread::spawn(move || {
                let tk = take(42, 50, 0);
                let other = take(7, 1_000, 0);
                for _ in 0..100 {
                    let mut events = TableEvents::default();
                    let checked = take_all(&t, &store, &[tk, other], NOW, &mut events);
                    if checked.unwrap().allowed {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                    conflicts.fetch_add(events.conflicts, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let other = take(7, 1_000, 0);
    (
        admitted.load(Ordering::SeqCst),
        left(&t, &store, &other),
        conflicts.load(Ordering::SeqCst),
    )
}

#[test]
fn costs_take_several_tokens_and_give_back_returns_them() {
    let (t, store) = prepared(64);
    let heavy = Take {
        cost: 4,
        ..take(1, 10, 0)
    };
    let checked = check(&t, &store, &[heavy]);
    assert!(checked.allowed);
    assert_eq!(left(&t, &store, &heavy), 6);
    assert_eq!(
        checked.held.as_slice(),
        [Held {
            take: heavy,
            index: checked.held[0].index
        }]
    );
    give_back(&t, &store, &checked.held, NOW + 5);
    assert_eq!(left(&t, &store, &heavy), 10);
    let too_heavy = Take {
        cost: 11,
        ..take(1, 10, 0)
    };
    assert!(!check(&t, &store, &[too_heavy]).allowed);
}

/// Four threads settle responses on one bucket at once (each held 1 token and cost 3),
/// through a store that yields between calls, so that most writes conflict: every
/// settlement that reports success is in the bucket, none lost to a conflict (one that
/// gives up after [`MAX_ATTEMPTS`] says so, and the caller counts it).
#[test]
fn concurrent_settlements_never_lose_a_charge() {
    let saw_conflicts = (0..20).any(|_| {
        let t = table(128);
        let mut store = MemoryShared::default();
        store.yield_between = true;
        t.prepare(&store).unwrap();
        // Room for 200 charges of 2 and 1 of 3 without reaching the debt cap.
        let tk = take(42, 1000, 0);
        let index = t.find(&store, tk.fingerprint, NOW).unwrap().index;
        let (conflicts, settled) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (store, conflicts, settled) =
                    (store.clone(), conflicts.clone(), settled.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut events = TableEvents::default();
                        let held = Held { take: tk, index };
                        match settle(&t, &store, &held, 3, NOW, &mut events) {
                            Ok(_) => settled.fetch_add(1, Ordering::SeqCst),
                            Err(e) => {
                                assert_eq!(e, LocalError::Contention);
                                0
                            }
                        };
                        conflicts.fetch_add(events.conflicts, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let settled = u128::from(settled.load(Ordering::SeqCst));
        assert!(settled > 0);
        // The first settlement placed the bucket afresh (charged 3), the others 2 each.
        let (slot, _) = t.read(&store, index).unwrap().unwrap();
        assert_eq!(
            slot.tat.0,
            (3 + 2 * (settled - 1)) * crate::bucket::UNITS_PER_TOKEN
        );
        conflicts.load(Ordering::SeqCst) > 0
    });
    assert!(saw_conflicts, "the test must exercise conflicts");
}

/// A bucket in debt denies with the exact wait, its debt stops at one burst, and a
/// settlement cheaper than what was held gives the difference back.
#[test]
fn a_settled_bucket_goes_into_debt_or_gets_tokens_back() {
    let (t, store) = prepared(64);
    // 10 tokens, 1 per second; admitted on an estimate of 2.
    let est = Take {
        cost: 2,
        ..take(1, 10, 1_000_000)
    };
    let checked = check(&t, &store, &[est]);
    assert!(checked.allowed);
    let mut events = TableEvents::default();
    assert_eq!(
        settle(&t, &store, &checked.held[0], 15, NOW, &mut events),
        Ok(false)
    );
    assert_eq!(left(&t, &store, &est), 0);
    match &check(&t, &store, &[est]).decisions[0] {
        // 15 taken from 10: 5 in debt, and 2 more needed: 7 s.
        Decision::Deny { retry_in_ns, .. } => assert_eq!(*retry_in_ns, Some(7_000_000_000)),
        other => panic!("expected a denial, got {other:?}"),
    }
    // However much more is charged, the debt stops at one burst (10): 12 s.
    assert_eq!(
        settle(&t, &store, &checked.held[0], u32::MAX, NOW, &mut events),
        Ok(true)
    );
    match &check(&t, &store, &[est]).decisions[0] {
        Decision::Deny { retry_in_ns, .. } => assert_eq!(*retry_in_ns, Some(12_000_000_000)),
        other => panic!("expected a denial, got {other:?}"),
    }
    let (t, store) = prepared(64);
    let checked = check(&t, &store, &[est]);
    settle(&t, &store, &checked.held[0], 0, NOW, &mut events).unwrap();
    assert_eq!(left(&t, &store, &est), 10);
}

mod one_bucket;
