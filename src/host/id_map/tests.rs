use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// One step on both maps.
#[derive(Debug, Clone)]
enum Op {
    Insert(u32, u32),
    Remove(u32),
    Retain(u32),
}

fn op(ids: impl Strategy<Value = u32> + Clone) -> impl Strategy<Value = Op> {
    prop_oneof![
        (ids.clone(), any::<u32>()).prop_map(|(id, v)| Op::Insert(id, v)),
        ids.prop_map(Op::Remove),
        (1u32..5).prop_map(Op::Retain),
    ]
}

/// Applies `ops` to an `IdMap` and a `HashMap`, which must agree at every step.
fn agrees_with_hash_map(ops: &[Op]) {
    let mut map = IdMap::new();
    let mut model = HashMap::new();
    for op in ops {
        match *op {
            Op::Insert(id, v) => assert_eq!(map.insert(id, v), model.insert(id, v)),
            Op::Remove(id) => assert_eq!(map.remove(id), model.remove(&id)),
            Op::Retain(m) => {
                map.retain(|v| v % m != 0);
                model.retain(|_, v| *v % m != 0);
            }
        }
        assert_eq!(map.len, model.len());
        assert!(map.len * 2 <= map.slots.len().max(1));
        for (id, v) in &model {
            assert_eq!(map.get(*id), Some(v));
        }
    }
    for id in model.keys() {
        assert!(map.get_mut(*id).is_some());
    }
}

proptest! {
    #[test]
    fn agrees_with_a_hash_map_on_colliding_ids(ops in prop::collection::vec(op(0u32..64), 0..200)) {
        agrees_with_hash_map(&ops);
    }

    #[test]
    fn agrees_with_a_hash_map_on_any_ids(ops in prop::collection::vec(op(any::<u32>()), 0..100)) {
        agrees_with_hash_map(&ops);
    }

    /// Ids that wrap around the table's end, and many sharing one home slot.
    #[test]
    fn agrees_with_a_hash_map_on_ids_a_table_apart(
        ops in prop::collection::vec(op((0u32..6, 0u32..3).prop_map(|(k, o)| k * 16 + o + 14)), 0..200)
    ) {
        agrees_with_hash_map(&ops);
    }
}

#[test]
fn sequential_contexts_stay_in_a_small_table() {
    // As Envoy numbers them: a window of live requests moving through the ids.
    let mut map = IdMap::new();
    for id in 1..10_000u32 {
        map.insert(id, id);
        if id > 20 {
            assert_eq!(map.remove(id - 20), Some(id - 20));
        }
    }
    assert_eq!(map.len, 20);
    assert!(map.slots.len() <= 64);
    assert_eq!(map.get(9_999), Some(&9_999));
    assert_eq!(map.get(1), None);
}

#[test]
fn an_empty_map_finds_nothing() {
    let mut map: IdMap<u8> = IdMap::default();
    assert_eq!(map.len, 0);
    assert_eq!(map.get(0), None);
    assert_eq!(map.remove(7), None);
}
