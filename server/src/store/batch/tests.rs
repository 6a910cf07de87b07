//! The batch rules on small batches: what is decided, admitted, granted and written.

use super::*;
use crate::algorithm::{Algorithm, Unit};
use crate::store::CounterKey;
use std::num::{NonZeroU16, NonZeroU32};

fn check(name: &str, rpu: u32, hits: u64, shadow: bool) -> Check {
    Check {
        key: CounterKey::new("d", [("k", name)]),
        limit: Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap_or(NonZeroU32::MIN),
            unit: Unit::Second,
            unit_multiplier: NonZeroU16::MIN,
            algorithm: Algorithm::FixedWindow,
        },
        hits,
        shadow,
        quota: None,
        quota_mode: false,
        blocked: false,
        hold: None,
    }
}

fn decision(allowed: bool, remaining: u32) -> Decision {
    Decision {
        allowed,
        remaining,
        reset_in_ns: 0,
        grant: None,
    }
}

#[test]
fn a_rejected_batch_reports_what_its_admitted_items_still_have() {
    let batch = [
        check("a", 10, 3, false),
        check("b", 1, 1, false),
        check("a", 10, 2, false),
        check("s", 5, 1, true),
    ];
    // "a" told 7 then 5 (the second saw the first's 3), "b" over, shadow "s" told 4.
    let mut ds = [
        decision(true, 7),
        decision(false, 0),
        decision(true, 5),
        decision(true, 4),
    ];
    assert!(rejected(&batch, &ds));
    report_unconsumed(&batch, &mut ds);
    assert_eq!(
        ds.map(|d| d.remaining),
        [10, 0, 10, 5],
        "nothing was taken, so every admitted item has all it had"
    );
}

#[test]
fn a_shadow_denial_does_not_reject_and_remaining_saturates() {
    let batch = [
        check("s", 1, 1, true),
        check("a", u32::MAX, u64::MAX, false),
    ];
    let ds = [decision(false, 0), decision(true, u32::MAX - 1)];
    assert!(!rejected(&batch, &ds));
    let mut ds = [decision(true, u32::MAX - 1)];
    report_unconsumed(&batch[1..], &mut ds);
    assert_eq!(ds[0].remaining, u32::MAX);
}

fn limited(name: &str, rpu: u32, hits: u64) -> Check {
    check(name, rpu, hits, false)
}

fn window(count: u64) -> State {
    State::FixedWindow(crate::algorithm::fixed_window::State {
        window: NOW / 1_000_000_000,
        count,
    })
}

/// An instant in the middle of a second.
const NOW: u64 = 1_700_000_000_500_000_000;

fn run(batch: &[Check], loaded: &[Option<&State>], call: Call, rules: Rules) -> Outcome {
    decide(batch, &Counters::of(batch), loaded, NOW, call, rules)
}

#[test]
fn counters_are_distinct_keys_under_a_limit_and_blocked_items_have_none() {
    let mut blocked = limited("a", 5, 1);
    blocked.blocked = true;
    let batch = [
        limited("a", 5, 1),
        limited("b", 5, 1),
        blocked,
        limited("a", 5, 2),
        limited("a", 6, 1),
    ];
    let counters = Counters::of(&batch);
    assert_eq!(counters.len(), 3, "a/5, b/5 and a/6");
    let of: Vec<Option<usize>> = (0..batch.len()).map(|i| counters.of_item(i)).collect();
    assert_eq!(of, [Some(0), Some(1), None, Some(0), Some(2)]);
    assert_eq!(counters.check(&batch, 2).map(|c| c.limit.rpu()), Some(6));
}

#[test]
fn a_rejected_request_writes_nothing_and_reports_what_holds() {
    let full = window(1);
    let batch = [limited("a", 10, 3), limited("b", 1, 1)];
    let out = run(&batch, &[None, Some(&full)], Call::Check, Rules::default());
    assert!(out.writes.is_empty());
    assert_eq!(out.decisions.map_ref(), [(true, 10), (false, 0)]);

    // Per-descriptor counting: the item within its limit consumes all the same.
    let rules = Rules {
        counting: Counting::PerDescriptor,
        ..Rules::default()
    };
    let out = run(&batch, &[None, Some(&full)], Call::Check, rules);
    assert_eq!(out.decisions.map_ref(), [(true, 7), (false, 0)]);
    let recorded: Vec<(usize, bool)> = out.writes.iter().map(|w| (w.counter, w.records)).collect();
    assert_eq!(
        recorded,
        [(0, true), (1, false)],
        "b existed: written, recording nothing"
    );
}

#[test]
fn check_only_items_record_nothing_and_make_no_counter() {
    let batch = [limited("probe", 5, 0)];
    let out = run(&batch, &[None], Call::Check, Rules::default());
    assert_eq!(out.decisions.map_ref(), [(true, 5)]);
    assert!(
        out.writes.is_empty(),
        "no state was loaded and nothing records"
    );
    let two = window(2);
    let out = run(&batch, &[Some(&two)], Call::Check, Rules::default());
    assert_eq!(out.writes.len(), 1);
    assert!(!out.writes[0].records);
    let limit = batch[0].limit;
    assert_eq!(
        out.writes[0].applied_to(Some(&two), &limit),
        two,
        "and changes nothing"
    );
}

#[test]
fn the_same_counter_twice_sees_its_earlier_hits_in_one_write() {
    let batch = [limited("a", 5, 2), limited("a", 5, 2), limited("a", 5, 2)];
    let out = run(&batch, &[None], Call::Check, Rules::default());
    // The third sees 4 taken and is over: the request consumes nothing, so the first
    // two report the 5 that still remain.
    assert_eq!(out.decisions.map_ref(), [(true, 5), (true, 5), (false, 1)]);
    assert!(out.writes.is_empty());
    let out = run(&batch[..2], &[None], Call::Check, Rules::default());
    assert_eq!(out.writes.len(), 1);
    assert_eq!(out.writes[0].updates.len(), 2);
    let limit = batch[0].limit;
    assert_eq!(out.writes[0].applied_to(None, &limit), window(4));
}

#[test]
fn a_charge_counts_everything_into_debt_and_grants_nothing() {
    let mut asks = limited("a", 5, 9);
    asks.quota = Some(crate::algorithm::lease::Quota {
        requests: NonZeroU32::MIN,
        valid_ms: 100,
    });
    let out = run(&[asks.clone()], &[None], Call::Charge, Rules::default());
    assert_eq!(out.decisions.map_ref(), [(false, 0)]);
    assert!(out.decisions[0].grant.is_none());
    assert_eq!(out.writes[0].applied_to(None, &asks.limit), window(9));
}

#[test]
fn a_grant_takes_at_most_its_share_of_what_remains() {
    let mut asks = limited("a", 10, 1);
    asks.quota = Some(crate::algorithm::lease::Quota {
        requests: NonZeroU32::new(8).unwrap(),
        valid_ms: 100,
    });
    let granted = |share| {
        let rules = Rules {
            share,
            ..Rules::default()
        };
        let out = run(std::slice::from_ref(&asks), &[None], Call::Check, rules);
        (
            out.decisions[0].grant.map(|g| g.hits),
            out.decisions[0].remaining,
        )
    };
    // 9 remain after the admission: the quota caps the grant at 8.
    assert_eq!(granted(Share::All), (Some(8), 1));
    // A third of 9 for each of three nodes.
    assert_eq!(
        granted(Share::OneIn(NonZeroU32::new(3).unwrap())),
        (Some(3), 6)
    );
    // Ten nodes: less than one hit each, no grant at all.
    assert_eq!(
        granted(Share::OneIn(NonZeroU32::new(10).unwrap())),
        (None, 9)
    );
}

/// `(allowed, remaining)` of each decision.
trait MapRef {
    fn map_ref(&self) -> Vec<(bool, u32)>;
}

impl MapRef for Vec<Decision> {
    fn map_ref(&self) -> Vec<(bool, u32)> {
        self.iter().map(|d| (d.allowed, d.remaining)).collect()
    }
}
