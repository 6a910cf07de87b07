use super::*;
use crate::testing::MemoryShared;
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const FLIGHT: u64 = S / 10;

fn table(slots: u32) -> LeaseTable {
    LeaseTable::new(NonZeroU32::new(slots).unwrap())
}

fn grant(remaining: u32, valid_until_ns: u64) -> SubGrant {
    SubGrant {
        remaining,
        valid_until_ns,
    }
}

/// A prepared table holding `n` tokens for fingerprint 7, valid until 100 s.
fn with_grant(n: u32) -> (LeaseTable, MemoryShared) {
    let (t, store) = (table(8), MemoryShared::default());
    t.prepare(&store).unwrap();
    t.store(&store, 7, grant(n, 100 * S), 0).unwrap();
    (t, store)
}

/// The key format is what a running Envoy's shared data holds: change it deliberately.
#[test]
fn format_is_pinned() {
    assert_eq!(&*table(8).sets.key(3), b"floodgate/v2/lease/3");
    assert_eq!(SETS_KEY, b"floodgate/v2/lease/sets");
    assert_eq!(table(1024).sets(), 256);
    assert_eq!(table(5).sets(), 2, "rounded up to whole sets");
    let lease = Lease {
        fingerprint: 1,
        last_grant: 2,
        flight_until_ns: 3,
        grants: [grant(4, 5), grant(6, 7)],
    };
    let bytes = encode_set(&[lease]);
    assert_eq!(bytes.len(), ENTRY_LEN);
    let mut expected = vec![1];
    expected.extend([0; 15]);
    expected.extend([2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend([4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend([6, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes, expected);
    assert_eq!(decode_set(&bytes), vec![lease]);
    assert_eq!(
        decode_set(&bytes[..ENTRY_LEN - 1]),
        vec![],
        "a partial entry is none"
    );
}

#[test]
fn a_spend_takes_its_cost_and_nothing_when_the_grant_holds_less() {
    let (t, store) = with_grant(10);
    assert!(t.spend(&store, 7, 4, S, FLIGHT).unwrap().taken.is_some());
    assert_eq!(t.get(&store, 7).unwrap().unwrap().available(S), 6);
    let short = t.spend(&store, 7, 7, S, FLIGHT).unwrap();
    assert_eq!(short.taken, None, "7 do not fit in 6: call instead");
    assert_eq!(
        t.get(&store, 7).unwrap().unwrap().available(S),
        6,
        "nothing taken"
    );
    assert_eq!(
        t.spend(&store, 8, 1, S, FLIGHT).unwrap().taken,
        None,
        "no lease"
    );
}

#[test]
fn no_token_is_spent_at_or_after_valid_until() {
    let (t, store) = with_grant(10);
    assert!(t
        .spend(&store, 7, 1, 100 * S - 1, FLIGHT)
        .unwrap()
        .taken
        .is_some());
    assert_eq!(t.spend(&store, 7, 1, 100 * S, FLIGHT).unwrap().taken, None);
}

#[test]
fn one_refill_starts_below_half_of_the_last_grant_until_its_deadline_or_its_answer() {
    let (t, store) = with_grant(10);
    for _ in 0..5 {
        assert!(
            !t.spend(&store, 7, 1, S, FLIGHT).unwrap().refill,
            "5 left: not below half"
        );
    }
    let spent = t.spend(&store, 7, 1, S, FLIGHT).unwrap();
    assert!(spent.refill, "4 left of 10: refill");
    assert!(
        !t.spend(&store, 7, 1, S, FLIGHT).unwrap().refill,
        "one in flight"
    );
    assert!(
        t.spend(&store, 7, 1, S + FLIGHT, FLIGHT).unwrap().refill,
        "a lost refill blocks others only until its deadline"
    );
    // Its answer clears the marker: the next low-water spend refills at once.
    t.store(&store, 7, grant(2, 100 * S), S + FLIGHT).unwrap();
    let lease = t.get(&store, 7).unwrap().unwrap();
    assert_eq!((lease.available(S + FLIGHT), lease.last_grant), (4, 2));
    assert_eq!(lease.flight_until_ns, 0);
}

#[test]
fn grants_with_different_deadlines_stay_apart_and_the_earliest_is_spent_first() {
    let mut lease = Lease::empty(1);
    lease.add(grant(3, 10 * S), 0);
    lease.add(grant(5, 20 * S), 0);
    lease.add(grant(2, 20 * S), 0);
    assert_eq!(lease.grants, [grant(3, 10 * S), grant(7, 20 * S)]);
    let taken = lease.take(4, S).unwrap();
    assert_eq!(lease.grants, [grant(0, 10 * S), grant(6, 20 * S)]);
    assert_eq!(taken.parts, [grant(3, 10 * S), grant(1, 20 * S)]);
    lease.give_back(&taken, 15 * S);
    assert_eq!(
        lease.grants,
        [grant(0, 10 * S), grant(7, 20 * S)],
        "tokens of an expired grant are void"
    );
}

#[test]
fn a_third_grant_merges_to_the_earlier_deadline_never_a_later_one() {
    let mut lease = Lease::empty(1);
    lease.add(grant(3, 10 * S), 0);
    lease.add(grant(5, 30 * S), 0);
    lease.add(grant(4, 20 * S), 0);
    assert_eq!(lease.grants, [grant(3, 10 * S), grant(9, 20 * S)]);
    lease.add(grant(1, 40 * S), 0);
    assert_eq!(lease.grants, [grant(3, 10 * S), grant(10, 20 * S)]);
    assert_eq!(lease.last_grant, 1);
}

#[test]
fn a_full_set_evicts_the_entry_holding_fewest_tokens_and_counts_it() {
    let (t, store) = (table(1), MemoryShared::default());
    t.prepare(&store).unwrap();
    // The entry expiring first holds the most: the one with the fewest goes instead.
    for (fp, tokens) in [(0u128, 90), (1, 5), (2, 60), (3, 70)] {
        let until = (10 + fp as u64) * S;
        assert!(
            !t.store(&store, fp, grant(tokens, until), 0)
                .unwrap()
                .evicted
        );
    }
    assert!(t.store(&store, 99, grant(100, 50 * S), 0).unwrap().evicted);
    assert_eq!(t.get(&store, 1).unwrap(), None, "the fewest tokens went");
    for kept in [0, 2, 3, 99] {
        assert!(t.get(&store, kept).unwrap().is_some(), "{kept}");
    }
    // A spent entry waiting for its refill holds none: it goes before any that holds some.
    let spent = t.spend(&store, 2, 60, S, FLIGHT).unwrap();
    assert!(spent.taken.is_some() && spent.refill);
    assert!(t.store(&store, 98, grant(100, 50 * S), S).unwrap().evicted);
    assert_eq!(t.get(&store, 2).unwrap(), None);
}

#[test]
fn among_equal_holdings_the_entry_expiring_first_is_evicted() {
    let (t, store) = (table(1), MemoryShared::default());
    t.prepare(&store).unwrap();
    for fp in 0..WAYS {
        let stored = t.store(
            &store,
            u128::from(fp),
            grant(1, (10 + u64::from(fp)) * S),
            0,
        );
        assert!(!stored.unwrap().evicted);
    }
    assert!(t.store(&store, 99, grant(1, 50 * S), 0).unwrap().evicted);
    assert_eq!(t.get(&store, 0).unwrap(), None, "the first to expire went");
    assert!(t.get(&store, 1).unwrap().is_some());
    // Expired entries are free: no eviction.
    assert!(
        !t.store(&store, 100, grant(1, 60 * S), 20 * S)
            .unwrap()
            .evicted
    );
    assert_eq!(
        store.keys(),
        2,
        "the set key and its count, whatever was stored"
    );
}

#[test]
fn grants_are_kept_within_their_bounds() {
    let bounds = GrantBounds {
        max_requests: 100,
        max_valid_ns: 10 * S,
    };
    assert_eq!(
        bounds.clamp(50, 5 * S, 0),
        (grant(50, 5 * S), false),
        "within both"
    );
    assert_eq!(bounds.clamp(u32::MAX, 5 * S, 0), (grant(100, 5 * S), true));
    assert_eq!(
        bounds.clamp(50, u64::MAX, 3 * S),
        (grant(50, 13 * S), true),
        "from its arrival"
    );
    assert_eq!(bounds.clamp(100, 10 * S, 0), (grant(100, 10 * S), false));
}

proptest! {
    /// Workers spending one grant at once never spend more than it holds, each spend
    /// taking exactly its cost or nothing, and none after `valid_until`.
    #[test]
    fn concurrent_spenders_never_spend_more_than_granted(
        granted in 1u32..60,
        costs in prop::collection::vec(prop::collection::vec(1u32..4, 1..30), 2..5),
        until_s in 5u64..20,
    ) {
        let mut store = MemoryShared::default();
        store.yield_between = true;
        let t = table(4);
        t.prepare(&store).unwrap();
        t.store(&store, 7, grant(granted, until_s * S), 0).unwrap();
        let handles: Vec<_> = costs
            .into_iter()
            .map(|costs| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut spent = 0u32;
                    for (i, cost) in costs.into_iter().enumerate() {
                        let now = i as u64 * S;
                        let s = t.spend(&store, 7, cost, now, FLIGHT).unwrap();
                        if let Some(taken) = s.taken {
                            assert!(now < until_s * S, "spent at {now} after valid_until");
                            let parts: u32 = taken.parts.iter().map(|p| p.remaining).sum();
                            assert_eq!(parts, cost);
                            spent += cost;
                        }
                    }
                    spent
                })
            })
            .collect();
        let spent: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let left = t.get(&store, 7).unwrap().unwrap().grants[0].remaining;
        prop_assert!(spent <= granted);
        prop_assert_eq!(spent + left, granted, "every token spent or still there");
    }

    /// Whatever grants arrive in whatever order, a token is only ever moved to an
    /// earlier deadline: the tokens live at any instant never exceed those granted
    /// with a deadline after it.
    #[test]
    fn merging_never_extends_a_deadline(
        grants in prop::collection::vec((1u32..20, 1u64..50), 1..8),
        at in 0u64..50,
    ) {
        let mut lease = Lease::empty(1);
        for &(n, until) in &grants {
            lease.add(grant(n, until * S), 0);
        }
        let live_granted: u32 = grants.iter().filter(|&&(_, u)| u * S > at * S).map(|&(n, _)| n).sum();
        prop_assert!(lease.available(at * S) <= live_granted);
    }
}

proptest! {
    /// Changing one entry in place writes what decoding the whole set, changing it and
    /// encoding them all again wrote (trailing partial entry and repeated fingerprints
    /// included).
    #[test]
    fn an_entry_changed_in_place_is_the_set_decoded_and_encoded_again(
        bytes in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..(3 * ENTRY_LEN + 7)),
        heads in prop::collection::vec(0u128..3, 0..4),
        wanted in 0u128..3,
        remaining in any::<u32>(),
    ) {
        let mut bytes = bytes;
        for (i, head) in heads.iter().enumerate() {
            if let Some(slot) = bytes.get_mut(i * ENTRY_LEN..i * ENTRY_LEN + 16) {
                slot.copy_from_slice(&head.to_le_bytes());
            }
        }
        let mut entries = decode_set(&bytes);
        let expected = match entries.iter_mut().find(|e| e.fingerprint == wanted) {
            Some(lease) => {
                lease.last_grant = remaining;
                Some(encode_set(&entries))
            }
            None => None,
        };
        let got = find_in_set(&bytes, wanted).map(|(index, mut lease)| {
            lease.last_grant = remaining;
            replace_in_set(&bytes, index, &lease)
        });
        prop_assert_eq!(got, expected);
    }
}
