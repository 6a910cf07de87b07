use super::entry::FIXED_LEN;
use super::*;
use crate::testing::MemoryShared;
use smallvec::smallvec;

const S: u64 = 1_000_000_000;

fn cache(slots: u32) -> OverLimitCache {
    OverLimitCache::new(NonZeroU32::new(slots).unwrap())
}

/// A denial of a set of one descriptor asked `cost` hits, over until `until_ns`.
fn denial(fingerprint: u128, until_ns: u64, cost: u32) -> Denial {
    Denial {
        fingerprint,
        until_ns,
        costs: smallvec![cost],
        over: smallvec![Over {
            position: 0,
            limit: 10,
            reset_at_ns: until_ns,
        }],
        body: Vec::new(),
        headers: Vec::new(),
    }
}

/// The live denial `c` finds for the set `fingerprint` asking `costs` at `now_ns`.
fn found(
    c: &OverLimitCache,
    store: &MemoryShared,
    fingerprint: u128,
    costs: &[u32],
    now_ns: u64,
) -> Option<Denial> {
    c.lookup(store, fingerprint, costs, || Some(now_ns))
        .unwrap()
}

/// The key format is what a running Envoy's shared data holds: change it deliberately.
#[test]
fn key_format_is_pinned() {
    assert_eq!(&*cache(1024).sets.key(7), b"floodgate/v3/olc/7");
    assert_eq!(
        &*cache(1024).sets.key(u32::MAX),
        b"floodgate/v3/olc/4294967295"
    );
    assert_eq!(SETS_KEY, b"floodgate/v3/olc/sets");
    assert_eq!(cache(1024).sets(), 256);
    assert_eq!(cache(1).sets(), 1);
    assert_eq!(cache(5).sets(), 2, "rounded up to whole sets");
}

#[test]
fn entry_format_is_pinned() {
    let d = Denial {
        fingerprint: 0x0102,
        until_ns: 0x0304,
        costs: smallvec![5, 6],
        over: smallvec![Over {
            position: 1,
            limit: 7,
            reset_at_ns: 0x0809,
        }],
        body: b"b".to_vec(),
        headers: vec![("h".into(), "v".into())],
    };
    let mut expected = vec![0x02, 0x01];
    expected.extend([0; 14]);
    expected.extend([0x04, 0x03, 0, 0, 0, 0, 0, 0]);
    expected.extend([2, 5, 0, 0, 0, 6, 0, 0, 0]);
    expected.extend([1, 1, 7, 0, 0, 0, 0x09, 0x08, 0, 0, 0, 0, 0, 0]);
    expected.extend([1, 0, b'b']);
    expected.extend([1, 1, 0, b'h', 1, 0, b'v']);
    assert_eq!(encode_set(std::slice::from_ref(&d)), expected);
    assert_eq!(d.encoded_len(), expected.len());
}

#[test]
fn the_cost_rule_covers_costlier_requests_of_the_set_until_the_instant() {
    let mut d = denial(1, 100 * S, 10);
    d.costs = smallvec![10, 1];
    assert!(d.covers(&[10, 1], 50 * S));
    assert!(d.covers(&[11, 5], 50 * S));
    assert!(
        !d.covers(&[9, 1], 50 * S),
        "cheaper for one: ask the service"
    );
    assert!(!d.covers(&[10, 0], 50 * S));
    assert!(!d.covers(&[10], 50 * S), "another set");
    assert!(!d.covers(&[10, 1, 1], 50 * S));
    assert!(d.covers(&[10, 1], 100 * S - 1));
    assert!(!d.covers(&[10, 1], 100 * S), "expired at the instant");
}

#[test]
fn the_standings_count_down_to_the_services_resets() {
    let mut d = denial(1, 60 * S, 1);
    d.costs = smallvec![1, 1, 1];
    d.over = smallvec![
        Over {
            position: 0,
            limit: 10,
            reset_at_ns: 100 * S,
        },
        Over {
            position: 2,
            limit: 3,
            reset_at_ns: 60 * S,
        },
    ];
    let rules = |p: u8| [Some(4), Some(5), Some(6)][usize::from(p)];
    let at = d.standings(rules, 58 * S);
    assert_eq!(at.len(), 2);
    assert_eq!((at[0].rule, at[0].limit), (4, 10));
    assert_eq!(
        at[0].retry_ns,
        Some(42 * S),
        "the service's reset, not until"
    );
    assert_eq!(at[1].retry_ns, Some(2 * S));
    assert!(at.iter().all(|s| s.rejects() && s.remaining == 0));
    assert_eq!(crate::reply::retry_after_seconds(&at), Some(42));
    // A position no rule is at any more (cannot happen for the same set) is left out.
    assert_eq!(d.standings(|_| None, 58 * S), Vec::new());
}

#[test]
fn sets_round_trip_and_stop_at_garbage() {
    let mut a = denial(u128::MAX, 5, 3);
    a.body = b"slow down\n".to_vec();
    a.headers = vec![
        ("x-why".into(), "tenant".into()),
        ("x-e".into(), String::new()),
    ];
    let b = denial(2, 6, 1);
    let bytes = encode_set(&[a.clone(), b.clone()]);
    assert_eq!(bytes.len(), a.encoded_len() + b.encoded_len());
    assert_eq!(decode_set(&bytes), vec![a.clone(), b]);
    let mut torn = encode_set(std::slice::from_ref(&a));
    torn.extend_from_slice(&[1, 2, 3]);
    assert_eq!(decode_set(&torn), vec![a]);
    assert_eq!(decode_set(b"junk"), Vec::new());
}

#[test]
fn finding_an_entry_reads_the_set_as_decoding_it_does() {
    let (a, b) = (denial(7, 5, 3), denial(2, 6, 1));
    let bytes = encode_set(&[a.clone(), b.clone()]);
    let by = |fingerprint: u128| move |d: &Denial| d.fingerprint == fingerprint;
    assert_eq!(find_entry(&bytes, by(2)), Some(b.clone()));
    assert_eq!(find_entry(&bytes, by(7)), Some(a.clone()));
    assert_eq!(find_entry(&bytes, by(9)), None);
    // Past a torn entry nothing is found, as nothing is decoded.
    let mut torn = encode_set(std::slice::from_ref(&a));
    torn.extend_from_slice(&[1, 2, 3]);
    torn.extend_from_slice(&encode_set(&[b]));
    assert_eq!(find_entry(&torn, by(2)), None);
    assert_eq!(find_entry(&torn, by(7)), Some(a));
    assert_eq!(find_entry(b"", by(7)), None);
}

#[test]
fn entries_are_bounded() {
    let mut d = denial(1, 5, 1);
    d.over.clear();
    d.body = vec![b'x'; ENTRY_MAX - FIXED_LEN - 4];
    assert!(d.fits());
    d.body.push(b'x');
    assert!(!d.fits(), "one byte more than an entry holds");
    let mut h = denial(1, 5, 1);
    h.headers = vec![("x-a".into(), "v".repeat(ENTRY_MAX))];
    assert!(!h.fits());
    let mut many = denial(1, 5, 1);
    many.costs = smallvec![1; 64];
    many.over = (0..64)
        .map(|position| Over {
            position,
            limit: 1,
            reset_at_ns: 5,
        })
        .collect();
    assert!(!many.fits(), "64 descriptors all over do not fit an entry");
}

#[test]
fn a_stored_denial_is_found_by_every_reader_until_it_expires() {
    let store = MemoryShared::default();
    let c = cache(16);
    assert_eq!(c.prepare(&store).unwrap(), 4);
    assert_eq!(c.prepare(&store).unwrap(), 0, "idempotent");
    let stored = c.store(&store, denial(9, 10 * S, 5), S).unwrap();
    assert_eq!(stored, Stored::default());
    assert_eq!(
        found(&c, &store, 9, &[5], 2 * S),
        Some(denial(9, 10 * S, 5))
    );
    assert_eq!(found(&c, &store, 9, &[4], 2 * S), None, "cheaper");
    assert_eq!(found(&c, &store, 8, &[5], 2 * S), None, "another set");
    assert_eq!(found(&c, &store, 9, &[5], 10 * S), None, "expired");
}

#[test]
fn the_clock_is_read_only_for_an_entry_of_the_same_descriptors() {
    let store = MemoryShared::default();
    let c = cache(4); // one set: every fingerprint shares it
    c.prepare(&store).unwrap();
    let no_clock = || panic!("no clock needed");
    assert_eq!(
        c.lookup(&store, 9, &[5], no_clock).unwrap(),
        None,
        "empty set"
    );
    c.store(&store, denial(9, 10 * S, 5), S).unwrap();
    assert_eq!(
        c.lookup(&store, 8, &[5], no_clock).unwrap(),
        None,
        "another set"
    );
    // The entry found, a clock that fails finds nothing: the call decides.
    assert_eq!(c.lookup(&store, 9, &[5], || None).unwrap(), None);
    assert!(c.lookup(&store, 9, &[5], || Some(2 * S)).unwrap().is_some());
}

#[test]
fn a_cheaper_denial_replaces_the_entry_and_a_dominated_one_writes_nothing() {
    let store = MemoryShared::default();
    let c = cache(4);
    c.prepare(&store).unwrap();
    c.store(&store, denial(9, 10 * S, 5), S).unwrap();
    let writes = store.writes();
    c.store(&store, denial(9, 9 * S, 7), S).unwrap();
    assert_eq!(store.writes(), writes, "the entry already says more");
    c.store(&store, denial(9, 10 * S, 2), S).unwrap();
    assert_eq!(
        found(&c, &store, 9, &[2], S).map(|d| d.costs),
        Some(smallvec![2])
    );
    let set = decode_set(&store.get(b"floodgate/v3/olc/0").unwrap().unwrap().value);
    assert_eq!(set.len(), 1, "one entry per set of descriptors");
}

#[test]
fn a_full_set_evicts_the_entry_expiring_first_and_expired_entries_are_free() {
    let store = MemoryShared::default();
    let c = cache(4); // one set
    c.prepare(&store).unwrap();
    for fp in 0..4u128 {
        let stored = c
            .store(&store, denial(fp, (10 + fp as u64) * S, 1), S)
            .unwrap();
        assert!(!stored.evicted);
    }
    let stored = c.store(&store, denial(99, 50 * S, 1), S).unwrap();
    assert!(stored.evicted);
    assert_eq!(
        found(&c, &store, 0, &[1], S),
        None,
        "expired first: evicted"
    );
    assert!(found(&c, &store, 1, &[1], S).is_some());
    // At 12 s, entries 0..=2 would have expired: room without evicting.
    let stored = c.store(&store, denial(100, 50 * S, 1), 12 * S).unwrap();
    assert!(!stored.evicted);
    let set = decode_set(&store.get(b"floodgate/v3/olc/0").unwrap().unwrap().value);
    assert!(set.len() <= WAYS as usize);
    assert!(
        set.iter().all(|e| e.until_ns > 12 * S),
        "expired entries dropped"
    );
}

#[test]
fn shared_data_failures_are_errors() {
    let c = cache(4);
    let broken = crate::testing::Broken(7);
    assert!(c.lookup(&broken, 1, &[1], || Some(S)).is_err());
    assert!(c.store(&broken, denial(1, 2 * S, 1), S).is_err());
}
