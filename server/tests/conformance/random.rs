//! Memory and Redis on random traffic: the same steps, the same answers.

use super::support::redis::RedisServer;
use super::{bucket, limit_per, redis_store, Target, US, W};
use floodgate_server::algorithm::concurrency::{HoldId, HoldOp};
use floodgate_server::algorithm::lease::Quota;
use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::clock::ManualClock;
use floodgate_server::store::memory::{MemoryStore, DEFAULT_CAPACITY};
use floodgate_server::store::{Check, CounterKey, Store};
use proptest::prelude::*;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A random limit, small (so limits are reached) or at the edges of the types.
fn limit_strategy() -> impl Strategy<Value = Limit> {
    let rpu = prop_oneof![4 => 1u32..=5, 1 => Just(u32::MAX)];
    // Plain units, and windows of several (`unit_multiplier`): 30 s, 5 and 90 minutes.
    let unit = prop_oneof![
        Just((Unit::Second, 1)),
        Just((Unit::Minute, 1)),
        Just((Unit::Week, 1)),
        Just((Unit::Second, 30)),
        Just((Unit::Minute, 5)),
        Just((Unit::Minute, 90)),
    ];
    let alg = prop_oneof![
        Just(Algorithm::FixedWindow),
        prop_oneof![3 => 1u32..=5, 1 => Just(u32::MAX)].prop_map(bucket),
        Just(Algorithm::SlidingWindowLog),
        Just(Algorithm::SlidingWindowCounter),
        Just(Algorithm::Concurrency),
    ];
    (rpu, unit, alg).prop_map(|(rpu, (unit, m), algorithm)| {
        let rpu = if algorithm == Algorithm::SlidingWindowLog {
            rpu.min(100_000)
        } else {
            rpu
        };
        limit_per(rpu, m, unit, algorithm)
    })
}

/// How an item takes part in its request.
#[derive(Debug, Clone, Copy)]
enum Role {
    Enforced,
    Shadow,
    Quota,
    /// `requests_per_unit: 0`, enforced.
    Blocked,
}

/// A step: microseconds to wait, whether it is a stream-end charge, the call's hold on its
/// concurrency items (release or acquire, of one of four ids; none: check-only there),
/// then a request of 1–3 items (limit index, key, hits, role, lease asked: 0 none, else
/// the quota's requests).
type Step = (
    u64,
    bool,
    Option<(bool, u8)>,
    Vec<(usize, u8, u64, Role, u32)>,
);

fn steps_strategy() -> impl Strategy<Value = Vec<Step>> {
    let gap = prop_oneof![6 => 0u64..50_000, 3 => 0u64..1_500_000, 1 => 0u64..700_000_000_000];
    // 0: a check-only item.
    let hits = prop_oneof![8 => 1u64..=3, 1 => Just(0u64), 1 => Just(7u64), 1 => Just(u64::MAX)];
    let role = prop_oneof![
        12 => Just(Role::Enforced),
        2 => Just(Role::Shadow),
        4 => Just(Role::Quota),
        1 => Just(Role::Blocked),
    ];
    let asks = prop_oneof![2 => Just(0u32), 1 => 1u32..=4];
    let item = (0usize..3, 0u8..2, hits, role, asks);
    let charge = prop::bool::weighted(0.2);
    let hold = prop::option::weighted(0.9, (prop::bool::weighted(0.3), 0u8..4));
    prop::collection::vec(
        (gap, charge, hold, prop::collection::vec(item, 1..=3)),
        1..40,
    )
}

#[test]
fn redis_and_memory_agree_on_random_traffic() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(W));
    let redis = rt.block_on(redis_store(Target::Single(server.url()), &clock));
    let case = AtomicU64::new(0);
    let config = ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(limits in prop::collection::vec(limit_strategy(), 3), steps in steps_strategy())| {
        // A fresh domain per case: Redis keeps earlier cases' keys.
        let domain = format!("case-{}", case.fetch_add(1, Ordering::Relaxed));
        let memory = MemoryStore::with_clock(DEFAULT_CAPACITY, clock.clone());
        let mut now = W + 123 * US;
        clock.set(now);
        for (i, (gap, charge, hold, items)) in steps.iter().enumerate() {
            let hold = hold.map(|(release, n)| {
                let id = HoldId::parse(format!("id-{n}").as_bytes()).unwrap();
                if release { HoldOp::Release(id) } else { HoldOp::Acquire(id) }
            });
            now += gap * US;
            clock.set(now);
            let batch: Vec<Check> = items
                .iter()
                .map(|&(l, key, hits, role, asks)| Check {
                    // One limit per counter, as a configuration gives (a limit changed by a
                    // reload starts afresh in both stores, but Redis keeps the old one's
                    // key until it expires, so A → B → A differs by design).
                    key: CounterKey::new(&domain, [("k", format!("{l}-{key}").as_str())]),
                    limit: limits[l],
                    hits,
                    shadow: matches!(role, Role::Shadow),
                    // As the RLS layer sets it: asked, and enforced (the stores also refuse
                    // a lease to quota-mode and blocked items themselves).
                    quota: NonZeroU32::new(asks)
                        .filter(|_| !matches!(role, Role::Shadow))
                        .map(|requests| Quota {
                            requests,
                            valid_ms: 700,
                        }),
                    quota_mode: matches!(role, Role::Quota),
                    blocked: matches!(role, Role::Blocked),
                    hold: hold.filter(|_| limits[l].algorithm == Algorithm::Concurrency),
                })
                .collect();
            let (want, got) = if *charge {
                (memory.charge_now(&batch).unwrap(), rt.block_on(redis.charge(&batch)).unwrap())
            } else {
                (memory.check_now(&batch).unwrap(), rt.block_on(redis.check(&batch)).unwrap())
            };
            prop_assert_eq!(got, want, "step {} at {} ns: {:?}", i, now, batch);
        }
    });
}
