use super::*;
use crate::algorithm::test_support::limit;
use crate::algorithm::{Algorithm, Unit, NANOS_PER_SECOND as S};

const T: u64 = 1_700_000_000 * S;

fn id(s: &str) -> HoldId {
    HoldId::parse(s.as_bytes()).unwrap()
}

/// Decides and applies when admitted, as a store does.
fn step(s: &mut State, now: u64, l: &Limit, hits: u64, op: HoldOp) -> Decision {
    let (d, u) = decide(s, now, l, hits, Some(&op));
    if d.allowed {
        s.apply(&u);
    }
    d
}

#[test]
fn acquires_to_the_limit_then_over_until_the_earliest_deadline() {
    let l = limit(2, Unit::Minute, Algorithm::Concurrency);
    let mut s = State::default();
    let a = step(&mut s, T, &l, 1, HoldOp::Acquire(id("a")));
    assert_eq!((a.allowed, a.remaining, a.reset_in_ns), (true, 1, 60 * S));
    let b = step(&mut s, T + S, &l, 1, HoldOp::Acquire(id("b")));
    assert_eq!((b.allowed, b.remaining, b.reset_in_ns), (true, 0, 60 * S));
    let c = step(&mut s, T + 2 * S, &l, 1, HoldOp::Acquire(id("c")));
    assert_eq!((c.allowed, c.remaining, c.reset_in_ns), (false, 0, 58 * S));
    assert_eq!(s.in_flight(T + 2 * S), 2);
    // "a" expires at T + 60 s: its slot comes back by itself.
    let c = step(&mut s, T + 60 * S, &l, 1, HoldOp::Acquire(id("c")));
    assert!(c.allowed);
    assert_eq!(s.len(), 2, "the expired hold was reclaimed");
}

#[test]
fn the_same_id_is_one_hold_and_keeps_its_deadline() {
    let l = limit(2, Unit::Second, Algorithm::Concurrency);
    let mut s = State::default();
    step(&mut s, T, &l, 1, HoldOp::Acquire(id("a")));
    let again = step(&mut s, T + S / 2, &l, 1, HoldOp::Acquire(id("a")));
    assert_eq!((again.allowed, again.remaining), (true, 1));
    assert_eq!(s.in_flight(T + S / 2), 1);
    assert_eq!(s.idle_at(), T + S, "not extended");
}

#[test]
fn release_frees_once_and_unknown_ids_free_nothing() {
    let l = limit(1, Unit::Minute, Algorithm::Concurrency);
    let mut s = State::default();
    step(&mut s, T, &l, 1, HoldOp::Acquire(id("a")));
    let other = step(&mut s, T, &l, 1, HoldOp::Release(id("nobody")));
    assert_eq!((other.allowed, other.remaining), (true, 0));
    assert_eq!(s.in_flight(T), 1);
    let r = step(&mut s, T, &l, 1, HoldOp::Release(id("a")));
    assert_eq!((r.allowed, r.remaining, r.reset_in_ns), (true, 1, 0));
    let r = step(&mut s, T, &l, 1, HoldOp::Release(id("a")));
    assert_eq!((r.allowed, r.remaining), (true, 1), "idempotent");
    assert!(s.is_empty());
}

#[test]
fn slots_check_only_and_no_op() {
    let l = limit(3, Unit::Minute, Algorithm::Concurrency);
    let mut s = State::default();
    let big = step(&mut s, T, &l, 2, HoldOp::Acquire(id("a")));
    assert_eq!(big.remaining, 1);
    // Two more do not fit, but one slot is free: over, reset 0.
    let d = step(&mut s, T, &l, 2, HoldOp::Acquire(id("b")));
    assert_eq!((d.allowed, d.remaining, d.reset_in_ns), (false, 1, 0));
    // Check-only takes nothing.
    let probe = step(&mut s, T, &l, 0, HoldOp::Acquire(id("c")));
    assert_eq!((probe.allowed, probe.remaining), (true, 1));
    assert_eq!(s.len(), 1);
    // No op (a charge): nothing taken whatever the hits.
    let (d, u) = decide(&s, T, &l, 5, None);
    assert!(d.allowed);
    s.apply(&u);
    assert_eq!(s.in_flight(T), 2);
}

#[test]
fn ids_are_checked() {
    assert!(HoldId::parse(b"").is_none());
    assert!(HoldId::parse(&[b'a'; 65]).is_none());
    assert!(HoldId::parse(&[b'a'; 64]).is_some());
    for bad in [&b"a:b"[..], b"a b", b"\xc3\xa9", b"a/b", b"a*"] {
        assert!(HoldId::parse(bad).is_none(), "{bad:?}");
    }
    assert_eq!(id("Az09._-").as_str(), "Az09._-");
    assert_eq!(
        HoldId::server(1, u64::MAX).as_str(),
        "fg-srv.0000000000000001ffffffffffffffff"
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Against a model (id → (slots, deadline)) on random acquires, releases and time:
        /// the same decisions, never more than the limit held, and a release frees exactly
        /// what its id held live.
        #[test]
        fn holds_match_a_model_and_never_pass_the_limit(
            rpu in 1u32..6,
            ops in prop::collection::vec((0u64..400_000_000, prop::bool::ANY, 0u8..5, 0u64..4), 1..80),
        ) {
            let l = limit(rpu, Unit::Second, Algorithm::Concurrency);
            let max = u64::from(rpu);
            let mut s = State::default();
            let mut model: HashMap<u8, (u64, u64)> = HashMap::new();
            let mut now = T;
            for (gap, release, who, hits) in ops {
                now += gap;
                model.retain(|_, (_, deadline)| *deadline > now);
                let held: u64 = model.values().map(|(slots, _)| slots).sum();
                let hid = id(&format!("id-{who}"));
                let op = if release { HoldOp::Release(hid) } else { HoldOp::Acquire(hid) };
                let d = step(&mut s, now, &l, hits, op);
                let want_allowed = release
                    || model.contains_key(&who)
                    || (hits == 0 && held < max)
                    || (hits > 0 && held + hits <= max);
                prop_assert_eq!(d.allowed, want_allowed);
                if release {
                    model.remove(&who);
                } else if d.allowed && hits > 0 && !model.contains_key(&who) {
                    model.insert(who, (hits, now + S));
                }
                let held: u64 = model.values().map(|(slots, _)| slots).sum();
                prop_assert!(held <= max);
                prop_assert_eq!(s.in_flight(now), held);
                if d.allowed {
                    prop_assert_eq!(u64::from(d.remaining), max - held);
                } else {
                    // Over: at most until the earliest deadline, 0 when a slot is free.
                    let earliest = model.values().map(|(_, at)| *at).min().unwrap_or(now);
                    let want = if held < max { 0 } else { earliest - now };
                    prop_assert_eq!(d.reset_in_ns, want);
                }
            }
        }
    }
}
