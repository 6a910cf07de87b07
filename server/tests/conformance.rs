//! One conformance suite, every store: the same scenarios must give the same answers on
//! the memory store, a single Redis and a Redis Cluster, to the nanosecond.
//!
//! Time is a fake clock: the memory store reads it, and the Redis store passes it to its
//! script in place of Redis's `TIME` (see `RedisStore::with_clock`). Instants are whole
//! microseconds, Redis's clock resolution. Each scenario works in its own domain, so
//! scenarios can share a server. Expected answers are written out, or come from the pure
//! algorithms in `floodgate_server::algorithm` (the definition both stores implement).
//! A property test then compares the memory store and Redis on random traffic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "conformance/blocked.rs"]
mod blocked;
#[path = "conformance/charge.rs"]
mod charge;
#[path = "conformance/check_only.rs"]
mod check_only;
#[path = "conformance/month_year.rs"]
mod month_year;
#[path = "conformance/one_hit.rs"]
mod one_hit;
#[path = "conformance/quota.rs"]
mod quota;
#[path = "conformance/quota_mode.rs"]
mod quota_mode;
#[path = "conformance/rejected.rs"]
mod rejected;
mod support;
#[path = "conformance/windows.rs"]
mod windows;

use blocked::*;
use charge::*;
use check_only::*;
use floodgate_server::algorithm::lease::Quota;
use floodgate_server::algorithm::{self, Algorithm, Decision, Limit, State, Unit};
use floodgate_server::clock::ManualClock;
use floodgate_server::store::health::Health;
use floodgate_server::store::memory::{MemoryStore, DEFAULT_CAPACITY};
use floodgate_server::store::redis::{RedisOptions, RedisStore, Target};
use floodgate_server::store::{Check, CounterKey, Counting, Store};
use month_year::*;
use one_hit::*;
use proptest::prelude::*;
use quota::*;
use quota_mode::*;
use rejected::*;
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::redis::{RedisCluster, RedisServer};
use windows::*;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;
/// A whole second.
const W: u64 = 1_700_000_000 * S;

/// A store, its fake clock and the domain a scenario writes in.
struct Harness<St> {
    store: St,
    clock: Arc<ManualClock>,
    domain: String,
}

impl<St: Store> Harness<St> {
    fn key(&self, name: &str) -> CounterKey {
        CounterKey::new(&self.domain, [("k", name)])
    }

    fn check(&self, name: &str, limit: Limit) -> Check {
        Check {
            key: self.key(name),
            limit,
            hits: 1,
            shadow: false,
            quota: None,
            quota_mode: false,
            blocked: false,
        }
    }

    async fn ask(&self, batch: &[Check]) -> Vec<Decision> {
        self.store.check(batch).await.unwrap()
    }

    async fn one(&self, c: &Check) -> Decision {
        self.ask(std::slice::from_ref(c)).await.remove(0)
    }

    /// A stream-end charge of one item.
    async fn charge(&self, c: &Check) -> Decision {
        self.store
            .charge(std::slice::from_ref(c))
            .await
            .unwrap()
            .remove(0)
    }

    async fn allowed(&self, batch: &[Check]) -> Vec<bool> {
        self.ask(batch).await.iter().map(|d| d.allowed).collect()
    }

    fn at(&self, now_ns: u64) {
        assert_eq!(now_ns % US, 0, "instants are whole microseconds");
        self.clock.set(now_ns);
    }
}

fn limit(rpu: u32, unit: Unit, algorithm: Algorithm) -> Limit {
    Limit {
        requests_per_unit: NonZeroU32::new(rpu).unwrap(),
        unit,
        unit_multiplier: NonZeroU16::MIN,
        algorithm,
    }
}

fn bucket(burst: u32) -> Algorithm {
    Algorithm::TokenBucket {
        burst: NonZeroU32::new(burst).unwrap(),
    }
}

fn d(allowed: bool, remaining: u32, reset_in_ns: u64) -> Decision {
    Decision {
        allowed,
        remaining,
        reset_in_ns,
        grant: None,
    }
}

fn all_algorithms(burst: u32) -> [Algorithm; 4] {
    [
        Algorithm::FixedWindow,
        bucket(burst),
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
    ]
}

// ---- The scenarios ----

async fn fixed_window_counts_to_the_limit_then_resets<St: Store>(h: &Harness<St>) {
    let l = limit(3, Unit::Second, Algorithm::FixedWindow);
    let c = h.check("a", l);
    h.at(W + S / 4);
    for left in [2, 1, 0] {
        assert_eq!(h.one(&c).await, d(true, left, 750 * MS));
    }
    assert_eq!(h.one(&c).await, d(false, 0, 750 * MS));
    h.at(W + S - US);
    assert_eq!(h.one(&c).await, d(false, 0, US));
    h.at(W + S);
    assert_eq!(h.one(&c).await, d(true, 2, S), "a new window starts empty");
}

async fn token_bucket_keeps_fractional_tokens_exactly<St: Store>(h: &Harness<St>) {
    // 3 per second: a token every 333,333,333.3 ns.
    let c = h.check("third", limit(3, Unit::Second, bucket(1)));
    h.at(W);
    assert_eq!(h.one(&c).await, d(true, 0, 333_333_334));
    h.at(W + 333_333 * US);
    assert_eq!(h.one(&c).await, d(false, 0, 334), "rounded up to the ns");
    h.at(W + 333_334 * US);
    assert_eq!(h.one(&c).await, d(true, 0, 333_333_334));

    let c = h.check("burst", limit(2, Unit::Second, bucket(4)));
    for (left, reset) in [(3, 500), (2, 1000), (1, 1500), (0, 2000)] {
        assert_eq!(h.one(&c).await, d(true, left, reset * MS));
    }
    assert_eq!(h.one(&c).await, d(false, 0, 500 * MS));
    h.at(W + 333_334 * US + 500 * MS);
    assert_eq!(h.one(&c).await, d(true, 0, 2 * S));

    let c = Check {
        hits: 5,
        ..h.check("too-many", limit(10, Unit::Second, bucket(4)))
    };
    assert_eq!(
        h.one(&c).await,
        d(false, 4, 0),
        "more than the burst never fits"
    );
}

async fn sliding_window_log_has_no_boundary_burst<St: Store>(h: &Harness<St>) {
    let c = h.check("log", limit(2, Unit::Second, Algorithm::SlidingWindowLog));
    h.at(W - 2 * US);
    assert_eq!(h.one(&c).await, d(true, 1, S));
    h.at(W - US);
    assert_eq!(h.one(&c).await, d(true, 0, S));
    h.at(W);
    assert_eq!(
        h.one(&c).await,
        d(false, 0, S - 2 * US),
        "the oldest leaves at W+1s-2us"
    );
    h.at(W + S - 3 * US);
    assert_eq!(h.one(&c).await, d(false, 0, US));
    h.at(W + S - 2 * US);
    assert_eq!(h.one(&c).await, d(true, 0, S));
    // Denied, whatever the cost, the answer is when one hit fits: the oldest leaves.
    let two = Check {
        hits: 2,
        ..c.clone()
    };
    assert_eq!(h.one(&two).await, d(false, 0, US));
    let three = Check { hits: 3, ..c };
    assert_eq!(
        h.one(&three).await,
        d(false, 0, US),
        "even if it never fits"
    );
}

async fn sliding_window_counter_weighs_the_previous_window<St: Store>(h: &Harness<St>) {
    let l = limit(10, Unit::Second, Algorithm::SlidingWindowCounter);
    let ten = Check {
        hits: 10,
        ..h.check("c", l)
    };
    h.at(W);
    assert_eq!(h.one(&ten).await, d(true, 0, 2 * S));
    // A quarter into the next window, 7.5 of the 10 still count: 2 more fit, not 3.
    h.at(W + S + S / 4);
    let three = Check {
        hits: 3,
        ..ten.clone()
    };
    assert_eq!(h.one(&three).await, d(false, 2, 0), "one hit fits now");
    let two = Check {
        hits: 2,
        ..ten.clone()
    };
    assert_eq!(h.one(&two).await, d(true, 0, 3 * S - (S + S / 4)));
    // 9.5 counted: one more fits once the weight is 7/10, at 0.3 s into the window.
    let one = Check { hits: 1, ..ten };
    assert_eq!(h.one(&one).await, d(false, 0, 50 * MS));

    // A full current window: the retry is in the next one, once 3 of its 4 weigh ≤ 3.
    let four = Check {
        hits: 4,
        ..h.check(
            "full",
            limit(4, Unit::Second, Algorithm::SlidingWindowCounter),
        )
    };
    h.at(W + 2 * S);
    assert_eq!(h.one(&four).await, d(true, 0, 2 * S));
    h.at(W + 2 * S + S / 2);
    let one = Check { hits: 1, ..four };
    assert_eq!(h.one(&one).await, d(false, 0, 750 * MS));
}

async fn a_rejected_request_consumes_nothing<St: Store>(h: &Harness<St>) {
    h.at(W);
    let tight = h.check("tight", limit(1, Unit::Minute, Algorithm::SlidingWindowLog));
    let loose = h.check("loose", limit(10, Unit::Minute, bucket(10)));
    let counter = h.check(
        "counter",
        limit(10, Unit::Minute, Algorithm::SlidingWindowCounter),
    );
    let fixed = h.check("fixed", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let all = [tight, loose.clone(), counter.clone(), fixed.clone()];
    assert_eq!(h.allowed(&all).await, [true; 4]);
    for _ in 0..5 {
        assert_eq!(h.allowed(&all).await, [false, true, true, true]);
    }
    // Only the admitted request counted: 10 - 1 - this one.
    for c in [loose, counter, fixed] {
        assert_eq!(h.one(&c).await.remaining, 8, "{:?}", c.limit.algorithm);
    }
}

async fn a_shadow_limit_never_blocks_the_others<St: Store>(h: &Harness<St>) {
    h.at(W);
    let shadow = Check {
        shadow: true,
        ..h.check("shadow", limit(1, Unit::Minute, Algorithm::FixedWindow))
    };
    let enforced = h.check("enforced", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let both = [shadow, enforced.clone()];
    assert_eq!(h.allowed(&both).await, [true, true]);
    assert_eq!(h.allowed(&both).await, [false, true]);
    assert_eq!(h.one(&enforced).await.remaining, 7);
}

async fn the_same_counter_twice_in_one_request_counts_twice<St: Store>(h: &Harness<St>) {
    h.at(W);
    for algorithm in all_algorithms(1) {
        let one = h.check(algorithm.name(), limit(1, Unit::Second, algorithm));
        assert_eq!(h.allowed(&[one.clone(), one.clone()]).await, [true, false]);
        assert_eq!(
            h.allowed(&[one]).await,
            [true],
            "the rejected pair consumed nothing"
        );
    }
    // Two admitted items on one counter both count.
    for algorithm in all_algorithms(5) {
        let c = h.check(
            &format!("{}-5", algorithm.name()),
            limit(5, Unit::Second, algorithm),
        );
        let two = Check {
            hits: 2,
            ..c.clone()
        };
        let got = h.ask(&[two.clone(), c.clone(), two]).await;
        assert_eq!(
            got.iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(true, 3), (true, 2), (true, 0)],
            "{}",
            algorithm.name()
        );
        assert!(!h.one(&c).await.allowed);
    }
}

async fn a_changed_limit_starts_afresh<St: Store>(h: &Harness<St>) {
    h.at(W);
    let one = h.check("k", limit(1, Unit::Second, Algorithm::FixedWindow));
    assert_eq!(h.allowed(std::slice::from_ref(&one)).await, [true]);
    assert_eq!(h.allowed(&[one]).await, [false]);
    let two = h.check("k", limit(2, Unit::Second, Algorithm::FixedWindow));
    assert_eq!(h.allowed(&[two]).await, [true]);
}

async fn idle_counters_are_as_good_as_fresh<St: Store>(h: &Harness<St>) {
    h.at(W);
    for algorithm in all_algorithms(2) {
        let c = h.check(algorithm.name(), limit(2, Unit::Second, algorithm));
        let two = Check {
            hits: 2,
            ..c.clone()
        };
        assert!(h.one(&two).await.allowed);
        assert!(!h.one(&c).await.allowed);
    }
    h.at(W + 2 * S);
    for algorithm in all_algorithms(2) {
        let c = h.check(algorithm.name(), limit(2, Unit::Second, algorithm));
        assert_eq!(h.one(&c).await.remaining, 1, "{}", algorithm.name());
    }
}

/// Limits and hits at the edges of their types: the Lua arithmetic must not lose a bit
/// where Rust uses u128. Expected answers come from the pure algorithms.
async fn huge_limits_and_hits_stay_exact<St: Store>(h: &Harness<St>) {
    let limits = [
        limit(u32::MAX, Unit::Week, bucket(u32::MAX)),
        limit(7, Unit::Week, bucket(u32::MAX)),
        limit(u32::MAX, Unit::Day, bucket(3)),
        limit(u32::MAX, Unit::Week, Algorithm::SlidingWindowCounter),
        limit(3, Unit::Week, Algorithm::SlidingWindowCounter),
        limit(u32::MAX, Unit::Week, Algorithm::FixedWindow),
        limit(100_000, Unit::Week, Algorithm::SlidingWindowLog),
    ];
    let steps: [(u64, u64); 8] = [
        (0, 3_000_000_000),
        (US, u64::from(u32::MAX)),
        (7 * US, 1),
        (3 * S, 2),
        (86_400 * S + 13 * US, 1 << 31),
        (86_400 * S + 14 * US, u64::MAX),
        (5 * 86_400 * S, 5),
        (9 * 86_400 * S + 999_999 * US, 4),
    ];
    for (i, l) in limits.iter().enumerate() {
        let c = h.check(&format!("huge-{i}"), *l);
        let mut state = State::fresh(l);
        for (offset, hits) in steps {
            let now = W + offset;
            h.at(now);
            let (want, update) = algorithm::decide(&state, now, l, hits);
            if want.allowed {
                state.apply(update);
            }
            let got = h.one(&Check { hits, ..c.clone() }).await;
            assert_eq!(got, want, "{l:?} at +{offset} ns with {hits} hits");
        }
    }
}

async fn concurrent_callers_on_one_key_admit_exactly_the_limit<St: Store + Clone>(h: &Harness<St>) {
    h.at(W);
    for algorithm in all_algorithms(300) {
        let c = h.check(
            &format!("hot-{}", algorithm.name()),
            limit(300, Unit::Minute, algorithm),
        );
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (store, c) = (h.store.clone(), c.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    for _ in 0..25 {
                        n += usize::from(
                            store.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed,
                        );
                    }
                    n
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 300, "{}", algorithm.name());
    }
}

macro_rules! for_each_scenario {
    ($m:ident) => {
        $m!(
            fixed_window_counts_to_the_limit_then_resets,
            token_bucket_keeps_fractional_tokens_exactly,
            sliding_window_log_has_no_boundary_burst,
            sliding_window_counter_weighs_the_previous_window,
            a_rejected_request_consumes_nothing,
            a_rejected_request_reports_the_remaining_that_holds,
            a_shadow_limit_never_blocks_the_others,
            quota_items_block_only_together,
            a_quota_mode_item_gets_no_lease_and_never_refuses_a_charge,
            a_blocked_item_is_always_over_and_consumes_nothing,
            a_charge_counts_nothing_on_a_blocked_item,
            month_and_year_work_with_every_algorithm,
            a_fixed_window_of_several_units_is_one_aligned_window,
            token_bucket_and_log_refill_over_the_whole_window,
            a_sliding_counter_of_several_units_weighs_the_whole_window,
            the_same_counter_twice_in_one_request_counts_twice,
            a_changed_limit_starts_afresh,
            idle_counters_are_as_good_as_fresh,
            huge_limits_and_hits_stay_exact,
            concurrent_callers_on_one_key_admit_exactly_the_limit,
            fixed_window_reports_until_the_window_ends,
            token_bucket_reports_until_one_token_is_back,
            sliding_log_reports_until_the_oldest_that_matters_leaves,
            sliding_counter_reports_until_the_estimate_has_room,
            a_fixed_window_charge_passes_the_limit,
            a_token_bucket_charge_goes_into_debt,
            a_sliding_counter_charge_weighs_on_the_next_window,
            a_sliding_log_charge_joins_the_newest_entry,
            a_charge_counts_every_descriptor,
            a_charge_owes_at_most_one_limit,
            check_only_counts_nothing_on_every_algorithm,
            a_check_only_item_over_its_limit_blocks_and_consumes_nothing,
            a_grant_takes_up_to_its_quota_on_every_algorithm,
            grants_never_take_more_than_remains,
            a_check_only_refill_grants_without_counting_a_hit,
            no_grant_for_shadow_over_limit_or_repeated_counters
        );
    };
}

/// One test per scenario, each on a fresh harness from `harness(domain)`.
macro_rules! test_per_scenario {
    ($($scenario:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                let (h, _server) = harness(stringify!($scenario)).await;
                super::$scenario(&h).await;
            }
        )*
    };
}

async fn redis_store(target: Target, clock: &Arc<ManualClock>) -> RedisStore {
    redis_store_counting(target, clock, Counting::AllOrNothing).await
}

async fn redis_store_counting(
    target: Target,
    clock: &Arc<ManualClock>,
    counting: Counting,
) -> RedisStore {
    let options = RedisOptions {
        target,
        access: Default::default(),
        // Generous: tests share two cores with Redis and each other.
        timeout: Duration::from_secs(5),
        max_in_flight: 1024,
        counting,
    };
    let store = RedisStore::connect(options, Arc::new(Health::default()))
        .await
        .unwrap();
    assert!(store.is_up(), "the probe at connect reached Redis");
    store.with_clock(clock.clone())
}

mod memory {
    use super::*;

    async fn harness(domain: &str) -> (Harness<Arc<MemoryStore<Arc<ManualClock>>>>, ()) {
        let clock = Arc::new(ManualClock::new(W));
        let store = Arc::new(MemoryStore::with_clock(DEFAULT_CAPACITY, clock.clone()));
        let domain = domain.to_owned();
        (
            Harness {
                store,
                clock,
                domain,
            },
            (),
        )
    }

    for_each_scenario!(test_per_scenario);

    #[tokio::test]
    async fn per_descriptor_counting_consumes_what_fits_in_a_rejected_request() {
        let clock = Arc::new(ManualClock::new(W));
        let store = Arc::new(
            MemoryStore::with_clock(DEFAULT_CAPACITY, clock.clone())
                .with_counting(Counting::PerDescriptor),
        );
        let domain = "per-descriptor".to_owned();
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&Harness {
            store,
            clock,
            domain,
        })
        .await;
    }
}

mod redis {
    use super::*;

    async fn harness(domain: &str) -> (Harness<RedisStore>, RedisServer) {
        let server = RedisServer::start();
        let clock = Arc::new(ManualClock::new(W));
        let store = redis_store(Target::Single(server.url()), &clock).await;
        let domain = domain.to_owned();
        (
            Harness {
                store,
                clock,
                domain,
            },
            server,
        )
    }

    for_each_scenario!(test_per_scenario);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn per_descriptor_counting_consumes_what_fits_in_a_rejected_request() {
        let server = RedisServer::start();
        let clock = Arc::new(ManualClock::new(W));
        let store = redis_store_counting(
            Target::Single(server.url()),
            &clock,
            Counting::PerDescriptor,
        )
        .await;
        let domain = "per-descriptor".to_owned();
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&Harness {
            store,
            clock,
            domain,
        })
        .await;
    }
}

mod redis_cluster {
    use super::*;

    /// One cluster (three masters) for every scenario, run one after the other: most
    /// multi-descriptor scenarios span slots here, so they go through peek and commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_on_a_three_node_cluster() {
        let cluster = tokio::task::spawn_blocking(RedisCluster::start)
            .await
            .unwrap();
        macro_rules! run_all {
            ($($scenario:ident),*) => {
                $(
                    let clock = Arc::new(ManualClock::new(W));
                    let store = redis_store(Target::Cluster(cluster.seeds()), &clock).await;
                    let domain = stringify!($scenario).to_owned();
                    super::$scenario(&Harness { store, clock, domain }).await;
                )*
            };
        }
        for_each_scenario!(run_all);
        // Per-descriptor counting: a request spanning slots skips the peek phase.
        let clock = Arc::new(ManualClock::new(W));
        let store = redis_store_counting(
            Target::Cluster(cluster.seeds()),
            &clock,
            Counting::PerDescriptor,
        )
        .await;
        let domain = "per-descriptor".to_owned();
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&Harness {
            store,
            clock,
            domain,
        })
        .await;
    }
}

// ---- Memory and Redis on random traffic ----

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

/// A step: microseconds to wait, whether it is a stream-end charge, then a request of 1–3
/// items (limit index, key, hits, role, lease asked: 0 none, else the quota's requests).
type Step = (u64, bool, Vec<(usize, u8, u64, Role, u32)>);

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
    prop::collection::vec((gap, charge, prop::collection::vec(item, 1..=3)), 1..40)
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
        for (i, (gap, charge, items)) in steps.iter().enumerate() {
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
