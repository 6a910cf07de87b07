use super::*;
use crate::shared::Versioned;
use crate::testing::{Broken, MemoryShared};
use std::cell::RefCell;

const A: [u8; 16] = [0xa5; 16];
const B: [u8; 16] = [0x5b; 16];

fn key(bytes: [u8; 16]) -> PlacementKey {
    PlacementKey::from_bytes(bytes)
}

fn never() -> Result<[u8; 16], u32> {
    panic!("a stored key must not be drawn again")
}

#[test]
fn the_first_vm_draws_and_stores_the_key_and_later_ones_read_it() {
    let store = MemoryShared::default();
    let first = PlacementKey::load_or_create(&store, || Ok(A)).unwrap();
    assert_eq!(
        first,
        Agreed {
            key: key(A),
            drawn: true
        }
    );
    let later = PlacementKey::load_or_create(&store, never).unwrap();
    assert_eq!(
        later,
        Agreed {
            key: key(A),
            drawn: false
        }
    );
    assert_eq!(store.get(KEY).unwrap().unwrap().value, A.to_vec());
}

/// Pins the stored form: a running Envoy's shared data holds it, and a reloaded VM must
/// read it back as the same key.
#[test]
fn the_key_format_is_pinned() {
    assert_eq!(KEY, b"floodgate/placement-key/v1");
    let k = key([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    assert_eq!(k.k0, 0x0807_0605_0403_0201);
    assert_eq!(k.k1, 0x100f_0e0d_0c0b_0a09);
    assert_eq!(PlacementKey::from_bytes(k.to_bytes()), k);
    assert_eq!(format!("{k:?}"), "PlacementKey(..)", "never printed");
}

#[test]
fn an_unreadable_value_is_replaced_by_a_drawn_key() {
    let store = MemoryShared::default();
    store.create(KEY, b"junk").unwrap();
    let agreed = PlacementKey::load_or_create(&store, || Ok(B)).unwrap();
    assert_eq!(
        agreed,
        Agreed {
            key: key(B),
            drawn: true
        }
    );
}

#[test]
fn failures_are_reported_not_papered_over() {
    assert_eq!(
        PlacementKey::load_or_create(&Broken(7), || Ok(A)),
        Err(PlacementError::Store(StoreError { status: 7 }))
    );
    let store = MemoryShared::default();
    assert_eq!(
        PlacementKey::load_or_create(&store, || Err(28)),
        Err(PlacementError::Random(28))
    );
}

/// Another VM's steps, run once.
type OtherVm<'a> = Box<dyn FnOnce(&MemoryShared) + 'a>;

/// Shared data that runs `between` (another VM's steps) once, right after this VM's
/// `nth` call (0-based), to interleave two VMs exactly.
struct Interleaved<'a> {
    store: MemoryShared,
    calls: RefCell<u32>,
    nth: u32,
    between: RefCell<Option<OtherVm<'a>>>,
}

impl<'a> Interleaved<'a> {
    fn new(store: &MemoryShared, nth: u32, between: impl FnOnce(&MemoryShared) + 'a) -> Self {
        Interleaved {
            store: store.clone(),
            calls: RefCell::new(0),
            nth,
            between: RefCell::new(Some(Box::new(between))),
        }
    }

    fn after_call(&self) {
        let n = {
            let mut calls = self.calls.borrow_mut();
            *calls += 1;
            *calls - 1
        };
        if n == self.nth {
            if let Some(other) = self.between.borrow_mut().take() {
                other(&self.store);
            }
        }
    }
}

impl SharedData for Interleaved<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        let r = self.store.get(key);
        self.after_call();
        r
    }
    fn set(&self, key: &[u8], value: &[u8], cas: u32) -> Result<(), SetError> {
        let r = self.store.set(key, value, cas);
        self.after_call();
        r
    }
    fn create(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let r = self.store.create(key, value);
        self.after_call();
        r
    }
}

#[test]
fn a_vm_that_writes_second_takes_the_first_vms_key() {
    let store = MemoryShared::default();
    store.create(KEY, &[]).unwrap();
    // This VM reads the empty value; before its write, another VM stores A.
    let racing = Interleaved::new(&store, 0, |s| {
        PlacementKey::load_or_create(s, || Ok(A)).unwrap();
    });
    let agreed = PlacementKey::load_or_create(&racing, || Ok(B)).unwrap();
    assert_eq!(
        agreed,
        Agreed {
            key: key(A),
            drawn: false
        }
    );
}

#[test]
fn vms_whose_creations_race_converge_on_one_key_within_a_tick() {
    let store = MemoryShared::default();
    let other = RefCell::new(None);
    // This VM finds no key; before its creation lands, another VM runs the whole
    // protocol and stores A. This VM's creation then empties the value, and it stores B.
    let racing = Interleaved::new(&store, 0, |s| {
        *other.borrow_mut() = Some(PlacementKey::load_or_create(s, || Ok(A)).unwrap().key);
    });
    let mine = PlacementKey::load_or_create(&racing, || Ok(B)).unwrap().key;
    let theirs = other.borrow().unwrap();
    assert_eq!((mine, theirs), (key(B), key(A)), "the race happened");
    // Until they converge, neither takes the other's entries for its own.
    let q = Quota::new(10, 1_000_000).unwrap();
    let v = [b"acme".to_vec()];
    assert_ne!(mine.bucket("r", q, &v), theirs.bucket("r", q, &v));
    // At the next tick the VM that lost adopts the stored key; the winner keeps its own.
    assert_eq!(theirs.reconcile(&store).unwrap(), Some(mine));
    assert_eq!(mine.reconcile(&store).unwrap(), None);
}

#[test]
fn a_vm_finding_the_value_emptied_stores_its_key_back() {
    let store = MemoryShared::default();
    PlacementKey::load_or_create(&store, || Ok(A)).unwrap();
    store.create(KEY, &[]).unwrap();
    assert_eq!(key(A).reconcile(&store).unwrap(), None);
    assert_eq!(
        PlacementKey::load_or_create(&store, never).unwrap().key,
        key(A)
    );
}

fn values(s: &[&str]) -> Vec<Vec<u8>> {
    s.iter().map(|x| x.as_bytes().to_vec()).collect()
}

#[test]
fn fingerprints_separate_kinds_rules_values_limits_and_keys() {
    let k = key(A);
    let q = Quota::new(1, 1_000_000).unwrap();
    let base = k.bucket("all", q, &values(&["acme"]));
    assert_eq!(base, k.bucket("all", q, &values(&["acme"])));
    assert_ne!(base, k.bucket("all", q, &values(&["acme2"])));
    assert_ne!(base, k.bucket("api", q, &values(&["acme"])));
    assert_ne!(base, k.fallback("all", q, &values(&["acme"])));
    assert_ne!(base, k.lease("", "all", &values(&["acme"])));
    assert_ne!(
        k.bucket("all", q, &values(&["ab", "c"])),
        k.bucket("all", q, &values(&["a", "bc"]))
    );
    let changed = Quota::new(2, 1_000_000).unwrap();
    assert_ne!(base, k.bucket("all", changed, &values(&["acme"])));
    assert_ne!(base, key(B).bucket("all", q, &values(&["acme"])));
    assert_ne!(
        k.lease("edge", "r", &values(&["a"])),
        k.lease("edge2", "r", &values(&["a"]))
    );
}

#[test]
fn a_denial_set_is_told_apart_by_every_descriptor_and_their_order() {
    let k = key(A);
    let (t, p) = (values(&["acme"]), values(&["premium"]));
    let (tenant, plan) = (k.lease("edge", "tenant", &t), k.lease("edge", "plan", &p));
    let set = |ids: &[u128]| k.denial("edge", ids);
    let alone = set(&[tenant]);
    let both = set(&[tenant, plan]);
    assert_ne!(alone, both, "another descriptor beside it is another set");
    assert_ne!(both, set(&[plan, tenant]), "order is kept");
    assert_eq!(alone, tenant, "a set of one is its descriptor's identity");
    assert_ne!(both, tenant, "a set of several is no descriptor's identity");
    assert_ne!(both, plan);
    assert_ne!(
        k.lease("edge", "r", &values(&["a", "b"])),
        k.lease("edge", "r", &values(&["ab"])),
        "each descriptor's values are counted"
    );
    assert_ne!(both, k.denial("edge2", &[tenant, plan]));
    assert_ne!(both, key(B).denial("edge", &[tenant, plan]));
}

/// What an attacker with the source computes offline: values landing in the victim's
/// slot under one key. Under another key they land anywhere.
#[test]
fn values_crafted_for_one_key_spread_under_another() {
    let q = Quota::new(10, 100_000).unwrap();
    let home = |k: PlacementKey, v: &str| k.bucket("r", q, &values(&[v])) as u64 % 10_000;
    let known = key(A);
    let target = home(known, "victim");
    let crafted: Vec<String> = (0u64..)
        .map(|i| format!("attacker-{i}"))
        .filter(|v| home(known, v) == target)
        .take(8)
        .collect();
    let secret = key(B);
    let victim = home(secret, "victim");
    let near = crafted
        .iter()
        .filter(|v| home(secret, v).abs_diff(victim) < 8)
        .count();
    assert_eq!(near, 0, "{crafted:?}");
}

/// Pins the hash under a known key, so that a change to it (which restarts every entry of
/// a running Envoy on upgrade) is a deliberate one.
#[test]
fn fingerprints_are_stable_for_a_given_key() {
    let k = key(A);
    let q = Quota::new(1, 1_000_000).unwrap();
    let v = values(&["acme"]);
    assert_eq!(
        [
            k.bucket("all", q, &v),
            k.fallback("all", q, &v),
            k.lease("edge", "all", &v),
            k.denial(
                "edge",
                &[k.lease("edge", "all", &v), k.lease("edge", "r", &v)]
            ),
        ],
        [
            0xeff4_1124_a702_e9d8_9764_8d48_8d40_cc20,
            0x8398_0d54_eda3_2920_1044_b09b_e7a6_f8d4,
            0x354f_8223_28c9_ec9e_31f8_a80c_9618_e4fa,
            0x8611_7d4f_299c_02b4_0899_4def_7565_725e,
        ]
    );
}

/// A prefix hashed once and finished per request gives the fingerprint of the whole
/// input, for every kind: the entries' identities do not depend on the shortcut.
#[test]
fn prefixes_finish_to_the_whole_inputs_fingerprints() {
    let k = key(A);
    let q = Quota::new(7, 3_000_000).unwrap();
    for v in [values(&[]), values(&["acme"]), values(&["a", "bc", ""])] {
        assert_eq!(k.bucket_prefix("r", q).values(&v), k.bucket("r", q, &v));
        assert_eq!(k.fallback_prefix("r", q).values(&v), k.fallback("r", q, &v));
        assert_eq!(
            k.lease_prefix("edge", "r").values(&v),
            k.lease("edge", "r", &v)
        );
        let ids = [k.lease("edge", "r", &v), k.lease("edge", "s", &v)];
        for set in [&ids[..1], &ids[..]] {
            assert_eq!(k.denial_prefix("edge").denial(set), k.denial("edge", set));
        }
    }
}
