use super::*;
use crate::testing::MemoryShared;
use std::num::NonZeroU32;

fn table(size: u32) -> Table {
    Table::new(NonZeroU32::new(size).unwrap())
}

/// The key format is what a running Envoy's shared data already holds: changing it
/// restarts every bucket and leaves the old keys behind for good. Change it deliberately.
#[test]
fn key_format_is_pinned() {
    assert_eq!(&*table(10_000).key(42), b"floodgate/v2/42");
    assert_eq!(&*table(1).key(0), b"floodgate/v2/0");
    assert_eq!(&*table(u32::MAX).key(u32::MAX), b"floodgate/v2/4294967295");
    assert_eq!(
        table(7).key(3),
        table(1_000_000).key(3),
        "slot keys do not depend on the size"
    );
    assert_eq!(key::SLOTS_KEY, b"floodgate/v2/slots");
    assert_eq!(key::encode_count(0x0102_0304), [4, 3, 2, 1]);
    assert_eq!(key::decode_count(&[4, 3, 2, 1]), 0x0102_0304);
    assert_eq!(
        key::decode_count(b"junk!"),
        0,
        "unreadable: check every key"
    );
}

/// The salt is part of the stored format: pinned like the keys.
#[test]
fn salt_is_pinned_and_differs_by_size() {
    assert_eq!(key::salt(10_000), 0x8a83_b1e0_9394_e27c_9394_e27c_8a83_b1e0);
    assert_eq!(key::salt(1), 0x910a_2dec_8902_5cc1_8902_5cc1_910a_2dec);
    let salts: std::collections::HashSet<u128> = (1..10_000).map(key::salt).collect();
    assert_eq!(salts.len(), 9_999);
}

#[test]
fn slot_format_is_pinned() {
    let slot = Slot {
        fingerprint: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
        tat: Tat(0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00),
        rate_micro: 0x0a0b_0c0d_0e0f_1011,
    };
    let bytes = slot.encode();
    assert_eq!(
        bytes.to_vec(),
        [
            0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03,
            0x02, 0x01, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55,
            0x44, 0x33, 0x22, 0x11, 0x11, 0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a
        ]
    );
    assert_eq!(Slot::decode(&bytes), Some(slot));
    // A table stores the fingerprint XOR its salt, and reads it back.
    let t = table(10_000);
    let stored = t.encode(&slot);
    assert_eq!(
        stored[..16],
        (slot.fingerprint ^ key::salt(10_000)).to_le_bytes()
    );
    assert_eq!(stored[16..], bytes[16..]);
    assert_eq!(t.decode(&stored), Some(slot));
    assert_eq!(Slot::decode(&[]), None);
    assert_eq!(Slot::decode(&bytes[..39]), None);
}

#[test]
fn prepare_creates_every_slot_once() {
    let store = MemoryShared::default();
    let t = table(50);
    assert_eq!(t.prepare(&store).unwrap(), 50);
    assert_eq!(store.keys(), 51);
    let writes = store.writes();
    assert_eq!(t.prepare(&store).unwrap(), 0);
    assert_eq!(
        store.writes(),
        writes,
        "a prepared table is not written again"
    );
}

fn occupy(store: &MemoryShared, t: &Table, index: u32, fp: u128, tat: u128, rate: u64) {
    let cas = store.get(&t.key(index)).unwrap().unwrap().cas;
    let slot = Slot {
        fingerprint: fp,
        tat: Tat(tat),
        rate_micro: rate,
    };
    t.write(store, index, &slot, cas).unwrap();
}

#[test]
fn a_new_bucket_takes_its_home_slot_when_free() {
    let store = MemoryShared::default();
    let t = table(16);
    t.prepare(&store).unwrap();
    let found = t.find(&store, 35, 0).unwrap();
    assert_eq!((found.index, found.origin), (3, Origin::Empty));
    assert_eq!(found.state, Tat::default());
}

#[test]
fn an_existing_bucket_is_found_past_others() {
    let store = MemoryShared::default();
    let t = table(16);
    t.prepare(&store).unwrap();
    occupy(&store, &t, 3, 99, u128::MAX, 0);
    occupy(&store, &t, 4, 35, 777, 0);
    let found = t.find(&store, 35, 0).unwrap();
    assert_eq!(
        (found.index, found.origin, found.state),
        (4, Origin::Existing, Tat(777))
    );
}

#[test]
fn idle_slots_are_reused_but_only_after_checking_the_window() {
    let store = MemoryShared::default();
    let t = table(16);
    t.prepare(&store).unwrap();
    // Slot 3: someone else's full bucket (tat in the past at rate 1 token/s).
    occupy(&store, &t, 3, 99, 1_000_000, 1_000_000);
    let found = t.find(&store, 35, 10).unwrap();
    assert_eq!((found.index, found.origin), (3, Origin::Idle));
    // Our own bucket further on is preferred over the idle slot.
    occupy(&store, &t, 4, 35, 5, 0);
    let found = t.find(&store, 35, 10).unwrap();
    assert_eq!((found.index, found.origin), (4, Origin::Existing));
}

#[test]
fn a_full_window_evicts_the_bucket_closest_to_full() {
    let store = MemoryShared::default();
    let t = table(8);
    t.prepare(&store).unwrap();
    let now = 1_000_000_000u64;
    let rate = 1_000_000u64; // 1 token/s: one token of debt is one second.
    let scaled_now = u128::from(now) * u128::from(rate);
    for index in 0..8u32 {
        let debt_tokens = 10 - u128::from(index % 5);
        occupy(
            &store,
            &t,
            index,
            1000 + u128::from(index),
            scaled_now + debt_tokens * bucket::UNITS_PER_TOKEN,
            rate,
        );
    }
    let found = t.find(&store, 7, now).unwrap();
    assert_eq!((found.index, found.origin), (4, Origin::Evicted));
}

#[test]
fn never_refilling_buckets_are_evicted_last() {
    let store = MemoryShared::default();
    let t = table(2);
    t.prepare(&store).unwrap();
    occupy(&store, &t, 0, 10, 5 * bucket::UNITS_PER_TOKEN, 0);
    occupy(&store, &t, 1, 11, 100 * bucket::UNITS_PER_TOKEN, 1_000_000);
    let found = t.find(&store, 12, 0).unwrap();
    assert_eq!((found.index, found.origin), (1, Origin::Evicted));
}

#[test]
fn any_sequence_of_sizes_costs_at_most_the_largest_table() {
    let store = MemoryShared::default();
    let sizes = [100, 250, 99, 250, 1, 180, 250, 7, 249];
    let created: Vec<u32> = sizes
        .iter()
        .map(|&size| table(size).prepare(&store).unwrap())
        .collect();
    assert_eq!(store.keys(), 250 + 1, "250 slot keys and the record");
    assert_eq!(created, [100, 150, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn a_smaller_table_only_reads_the_record() {
    let store = MemoryShared::default();
    table(300).prepare(&store).unwrap();
    let writes = store.writes();
    assert_eq!(table(120).prepare(&store).unwrap(), 0);
    assert_eq!(store.writes(), writes);
}

#[test]
fn a_lost_record_is_rebuilt_without_touching_existing_slots() {
    let store = MemoryShared::default();
    let t = table(20);
    t.prepare(&store).unwrap();
    occupy(&store, &t, 5, 77, 123, 0);
    // An unreadable record: every key is checked again, none is overwritten.
    store.create(key::SLOTS_KEY, b"?").unwrap();
    assert_eq!(t.prepare(&store).unwrap(), 0);
    assert_eq!(
        t.read(&store, 5).unwrap().map(|(s, _)| s.fingerprint),
        Some(77)
    );
    assert_eq!(
        key::decode_count(&store.get(key::SLOTS_KEY).unwrap().unwrap().value),
        20
    );
}

#[test]
fn the_same_size_finds_its_buckets_again() {
    let store = MemoryShared::default();
    let t = table(16);
    t.prepare(&store).unwrap();
    occupy(&store, &t, 3, 35, 777, 0);
    // A new configuration with the same size (a listener update) is the same table.
    let again = table(16);
    again.prepare(&store).unwrap();
    let found = again.find(&store, 35, 0).unwrap();
    assert_eq!(
        (found.index, found.origin, found.state),
        (3, Origin::Existing, Tat(777))
    );
}

#[test]
fn another_size_never_takes_a_bucket_for_its_own() {
    let store = MemoryShared::default();
    let old = table(16);
    old.prepare(&store).unwrap();
    // Bucket 35 at its home under 16 slots (3), refilling; 32 slots put its home at 3 too.
    occupy(&store, &old, 3, 35, 5 * bucket::UNITS_PER_TOKEN, 1_000_000);
    let new = table(32);
    new.prepare(&store).unwrap();
    let found = new.find(&store, 35, 0).unwrap();
    assert_ne!(
        found.origin,
        Origin::Existing,
        "a size change restarts the bucket"
    );
    assert_eq!(found.state, Tat::default());
    assert_eq!(
        (found.index, found.origin),
        (4, Origin::Empty),
        "past the refilling slot"
    );
    // Once the old bucket is full again, its slot is reused like any idle one.
    let later = 10 * bucket::UNITS_PER_TOKEN as u64;
    let found = new.find(&store, 35, later).unwrap();
    assert_eq!((found.index, found.origin), (3, Origin::Idle));
}

proptest::proptest! {
    /// Whatever sizes come, and whatever traffic between them, the shared data holds the
    /// keys of the largest table and the record: nothing more.
    #[test]
    fn keys_stay_bounded_by_the_largest_size(
        sizes in proptest::collection::vec(1u32..400, 1..12),
        buckets in proptest::collection::vec(proptest::num::u128::ANY, 0..20),
    ) {
        let store = MemoryShared::default();
        for &size in &sizes {
            let t = table(size);
            t.prepare(&store).unwrap();
            for &fp in &buckets {
                let found = t.find(&store, fp, 0).unwrap();
                let slot = Slot { fingerprint: fp, tat: Tat(1), rate_micro: 0 };
                let _ = t.write_found(&store, &found, &slot);
            }
        }
        let largest = *sizes.iter().max().unwrap() as usize;
        proptest::prop_assert_eq!(store.keys(), largest + 1);
    }
}

proptest::proptest! {
    /// Digits written in place, last first, spell the index as `format!` does.
    #[test]
    fn a_slot_key_is_its_prefix_and_the_index_in_decimal(index in proptest::num::u32::ANY) {
        let expected = format!("floodgate/v2/{index}");
        proptest::prop_assert_eq!(&*SlotKey::new(index), expected.as_bytes());
        let longest = b"floodgate/over-limit/x";
        let key = SlotKey::with_prefix(longest, index);
        proptest::prop_assert_eq!(&*key, [&longest[..], index.to_string().as_bytes()].concat());
    }
}

#[test]
fn a_slot_key_spells_every_number_of_digits() {
    for digits in 0..10u32 {
        let low = 10u32.pow(digits);
        for index in [low - 1, low, low + 1, low.saturating_mul(10) - 1] {
            assert_eq!(
                &*SlotKey::new(index),
                format!("floodgate/v2/{index}").as_bytes()
            );
        }
    }
    assert_eq!(&*SlotKey::new(u32::MAX), b"floodgate/v2/4294967295");
}
