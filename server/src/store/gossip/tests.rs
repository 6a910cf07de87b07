//! Gossip store: one node is the memory store exactly; peers' parts count, a dead peer's
//! until its window ends, a carried debt across windows and sweeps; the wire format.

use super::part::Part;
use super::wire::{self, Tag};
use super::*;
use crate::algorithm::lease::Quota;
use crate::algorithm::{Algorithm, Unit};
use crate::clock::ManualClock;
use crate::store::memory::MemoryStore;
use proptest::prelude::*;
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * S;

fn limit(rpu: u32, algorithm: Algorithm) -> Limit {
    Limit {
        requests_per_unit: NonZeroU32::new(rpu).unwrap_or(NonZeroU32::MIN),
        unit: Unit::Second,
        unit_multiplier: NonZeroU16::MIN,
        algorithm,
    }
}

fn check(key: &str, limit: Limit, hits: u64) -> Check {
    Check {
        key: CounterKey::new("d", [("k", key)]),
        limit,
        hits,
        shadow: false,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

fn store() -> (Arc<ManualClock>, GossipStore<Arc<ManualClock>>) {
    let clock = Arc::new(ManualClock::new(T0));
    (clock.clone(), GossipStore::with_clock(1_000, clock))
}

fn allowed(s: &GossipStore<Arc<ManualClock>>, c: &Check) -> bool {
    s.check_now(std::slice::from_ref(c))
        .is_ok_and(|d| d[0].allowed)
}

/// `peer`'s part of `c`'s counter, as the gossip loop would hand it over.
fn peers_of(c: &Check, parts: &[Part]) -> Peers {
    let mut peers = Peers::new();
    for (node, p) in parts.iter().enumerate() {
        peers
            .entry(c.key)
            .or_default()
            .push((node as u64, Tag::of(&c.limit), *p));
    }
    peers
}

#[test]
fn a_peers_count_is_added_to_ours() {
    let (_, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 1);
    let window = T0 / S;
    s.set_peers(peers_of(
        &c,
        &[Part::Fixed {
            window,
            count: 7,
            debt: 0,
        }],
    ));
    let admitted = (0..10).filter(|_| allowed(&s, &c)).count();
    assert_eq!(admitted, 3, "10 less the peer's 7");
}

#[test]
fn a_silent_peers_count_keeps_counting_until_its_window_ends() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 1);
    let window = T0 / S;
    // The peer published 10 and died: nothing more comes from it.
    s.set_peers(peers_of(
        &c,
        &[Part::Fixed {
            window,
            count: 10,
            debt: 0,
        }],
    ));
    clock.set(T0 + S / 2);
    assert!(!allowed(&s, &c), "the dead peer's 10 still count");
    clock.set(T0 + S);
    assert!(allowed(&s, &c), "its window ended");
}

#[test]
fn a_peers_debt_carries_into_the_next_window_only() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 1);
    let window = T0 / S;
    s.set_peers(peers_of(
        &c,
        &[Part::Fixed {
            window,
            count: 16,
            debt: 6,
        }],
    ));
    clock.set(T0 + S);
    let admitted = (0..10).filter(|_| allowed(&s, &c)).count();
    assert_eq!(admitted, 4, "the next window starts with the peer's 6");
    clock.set(T0 + 2 * S);
    let admitted = (0..10).filter(|_| allowed(&s, &c)).count();
    assert_eq!(admitted, 10);
}

#[test]
fn our_debt_survives_a_sweep_and_an_empty_window() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 25);
    // A charge of 25: 10 of the limit, one limit of debt (the rest forgiven).
    let d = s.charge_now(std::slice::from_ref(&c)).unwrap_or_default();
    assert!(!d[0].allowed);
    // The next window passes untouched but for a sweep: the debt is not lost with it.
    clock.set(T0 + S + S / 2);
    assert_eq!(s.sweep(), 0, "the part is not idle while it carries debt");
    let one = check("a", limit(10, Algorithm::FixedWindow), 1);
    assert!(!allowed(&s, &one), "the whole window is owed");
    clock.set(T0 + 2 * S);
    assert!(allowed(&s, &one));
    clock.set(T0 + 3 * S);
    assert_eq!(s.sweep(), 1);
}

#[test]
fn a_part_under_another_limit_is_ignored() {
    let (_, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 1);
    let other = limit(20, Algorithm::FixedWindow);
    let mut peers = Peers::new();
    peers.entry(c.key).or_default().push((
        1,
        Tag::of(&other),
        Part::Fixed {
            window: T0 / S,
            count: 10,
            debt: 0,
        },
    ));
    s.set_peers(peers);
    assert!(allowed(&s, &c));
}

#[test]
fn what_changed_is_published_and_idle_parts_are_deleted() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::SlidingWindowCounter), 3);
    assert!(allowed(&s, &c));
    let out = s.take_outbox();
    let value = out.get(&c.key).cloned().flatten().unwrap_or_default();
    assert_eq!(value, format!("s 10/1 {} 0 3", T0 / S));
    assert!(s.take_outbox().is_empty(), "taken once");
    clock.set(T0 + 2 * S);
    assert_eq!(s.sweep(), 1);
    assert_eq!(s.take_outbox().get(&c.key), Some(&None));
    assert_eq!(s.cells(), 0);
}

#[test]
fn other_algorithms_are_refused_per_request_too() {
    let (_, s) = store();
    let burst = NonZeroU32::MIN;
    let c = check("a", limit(10, Algorithm::TokenBucket { burst }), 1);
    assert!(matches!(
        s.check_now(&[c]),
        Err(StoreError::Unavailable(m)) if m.contains("token_bucket")
    ));
}

#[test]
fn the_wire_format_is_pinned() {
    let k = CounterKey::new("web", [("tenant", "acme"), ("path", "/a|b")]);
    assert_eq!(wire::key(&k), "c1:7488dcd026b8897b6efd78a0ba89d93f");
    assert_eq!(wire::parse_key(&wire::key(&k)), Some(k));
    assert_eq!(wire::parse_key("c0:7488dcd026b8897b6efd78a0ba89d93f"), None);
    let l = Limit {
        unit: Unit::Minute,
        unit_multiplier: NonZeroU16::new(5).unwrap_or(NonZeroU16::MIN),
        ..limit(100, Algorithm::FixedWindow)
    };
    let p = Part::Fixed {
        window: 5_666_666,
        count: 120,
        debt: 20,
    };
    assert_eq!(wire::value(&l, &p), "f 100/300 5666666 120 20");
    assert_eq!(
        wire::parse_value("f 100/300 5666666 120 20"),
        Some((Tag::of(&l), p))
    );
    for bad in [
        "",
        "x 1/1 1 1 1",
        "f 1/1 1 1",
        "f 1/1 1 1 1 1",
        "f 1-1 1 1 1",
        "f 1/1 -1 1 1",
        "s 99999999999/1 1 1 1",
    ] {
        assert_eq!(wire::parse_value(bad), None, "{bad:?}");
    }
}

/// One step of random traffic: when, which counter, how many hits, check or charge.
#[derive(Debug, Clone)]
struct Step {
    at_ms: u64,
    counter: usize,
    hits: u64,
    charge: bool,
    quota: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0u64..1_500,
        0usize..3,
        0u64..6,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(at_ms, counter, hits, charge, quota)| Step {
            at_ms,
            counter,
            hits,
            charge: charge && hits > 0,
            quota,
        })
}

proptest! {
    /// With no peer, the gossip store is the memory store: the same answers to the
    /// nanosecond on random checks, charges and grants of both window algorithms, with
    /// sweeps between steps.
    #[test]
    fn one_node_answers_as_the_memory_store(
        rpu in 1u32..6,
        sliding in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let algorithm = if sliding { Algorithm::SlidingWindowCounter } else { Algorithm::FixedWindow };
        let clock = Arc::new(ManualClock::new(T0));
        let memory = MemoryStore::with_clock(1_000, clock.clone());
        let gossip = GossipStore::with_clock(1_000, clock.clone());
        let mut now = T0;
        for s in steps {
            now += s.at_ms * 1_000_000;
            clock.set(now);
            let mut c = check(&s.counter.to_string(), limit(rpu, algorithm), s.hits);
            if s.quota {
                c.quota = Some(Quota { requests: NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN), valid_ms: 1_000 });
            }
            let batch = [c];
            let (m, g) = if s.charge {
                (memory.charge_now(&batch), gossip.charge_now(&batch))
            } else {
                (memory.check_now(&batch), gossip.check_now(&batch))
            };
            prop_assert_eq!(m, g);
            memory.sweep();
            gossip.sweep();
        }
    }
}

#[test]
fn a_peers_latest_part_replaces_its_last_and_idle_ones_are_forgotten() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::FixedWindow), 1);
    let tag = Tag::of(&c.limit);
    let at = |count| Part::Fixed {
        window: T0 / S,
        count,
        debt: 0,
    };
    s.hear(1, c.key, tag, at(3));
    s.hear(1, c.key, tag, at(5));
    s.hear(2, c.key, tag, at(4));
    assert_eq!(s.forget_idle_peers(), 2, "one part per peer");
    let admitted = (0..10).filter(|_| allowed(&s, &c)).count();
    assert_eq!(admitted, 1, "10 less 5 and 4");
    clock.set(T0 + S);
    assert_eq!(s.forget_idle_peers(), 0);
}

#[test]
fn a_grant_takes_only_this_nodes_share_of_what_remains() {
    let (_, s) = store();
    let c = Check {
        quota: Some(Quota {
            requests: NonZeroU32::new(20).unwrap_or(NonZeroU32::MIN),
            valid_ms: 1_000,
        }),
        ..check("a", limit(31, Algorithm::FixedWindow), 1)
    };
    let grant = |s: &GossipStore<Arc<ManualClock>>| {
        s.check_now(std::slice::from_ref(&c))
            .ok()
            .and_then(|d| d[0].grant)
            .map(|g| g.hits)
    };
    // Alone: up to the quota of the 30 left.
    assert_eq!(grant(&s), Some(20));
    // 31 - 1 - 20 - 1 = 9 left after the next admission; with three nodes live, 3 of them.
    s.set_fleet(3);
    assert_eq!(grant(&s), Some(3));
}

#[test]
fn a_peers_sliding_count_weighs_on_the_next_window() {
    let (clock, s) = store();
    let c = check("a", limit(10, Algorithm::SlidingWindowCounter), 1);
    s.hear(
        1,
        c.key,
        Tag::of(&c.limit),
        Part::Sliding {
            window: T0 / S,
            previous: 0,
            current: 8,
        },
    );
    // A quarter into the next window, 6 of the peer's 8 still count: 4 fit.
    clock.set(T0 + S + S / 4);
    let admitted = (0..10).filter(|_| allowed(&s, &c)).count();
    assert_eq!(admitted, 4);
}
