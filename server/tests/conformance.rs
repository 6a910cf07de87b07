//! One conformance suite, every store: the same scenarios must give the same answers on
//! the memory store, a single Redis, a Redis Cluster and the gossip store (one node), to
//! the nanosecond.
//!
//! A store declares the algorithms it supports ([`Harness::supports`]: the gossip store
//! holds only fixed window and sliding window counter). A scenario that needs another says
//! so ([`Harness::needs`]) and is skipped on that store with a line on stderr naming what
//! it lacks; loops over every algorithm run over the supported ones ([`Harness::algorithms`]).
//!
//! Time is a fake clock: the memory store reads it, and the Redis store passes it to its
//! script in place of Redis's `TIME` (see `RedisStore::with_clock`). Instants are whole
//! microseconds, Redis's clock resolution. Each scenario works in its own domain, so
//! scenarios can share a server. Expected answers are written out, or come from the pure
//! algorithms in `floodgate_server::algorithm` (the definition both stores implement).
//! A property test then compares the memory store and Redis on random traffic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "conformance/basics.rs"]
mod basics;
#[path = "conformance/blocked.rs"]
mod blocked;
#[path = "conformance/charge.rs"]
mod charge;
#[path = "conformance/check_only.rs"]
mod check_only;
#[path = "conformance/concurrency.rs"]
mod concurrency;
#[path = "conformance/month_year.rs"]
mod month_year;
#[path = "conformance/one_hit.rs"]
mod one_hit;
#[path = "conformance/quota.rs"]
mod quota;
#[path = "conformance/quota_mode.rs"]
mod quota_mode;
#[path = "conformance/random.rs"]
mod random;
#[path = "conformance/rejected.rs"]
mod rejected;
mod support;
#[path = "conformance/windows.rs"]
mod windows;

use basics::*;
use blocked::*;
use charge::*;
use check_only::*;
use concurrency::*;
use floodgate_server::algorithm::{Algorithm, Decision, Limit, Unit};
use floodgate_server::clock::ManualClock;
use floodgate_server::store::gossip::{part, GossipStore};
use floodgate_server::store::health::Health;
use floodgate_server::store::memory::{MemoryStore, DEFAULT_CAPACITY};
use floodgate_server::store::redis::{RedisOptions, RedisStore, Target};
use floodgate_server::store::{Check, CounterKey, Counting, Store};
use month_year::*;
use one_hit::*;
use quota::*;
use quota_mode::*;
use rejected::*;
use std::num::{NonZeroU16, NonZeroU32};
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
    /// The algorithms the store supports.
    supports: fn(Algorithm) -> bool,
}

/// A store that supports every algorithm.
fn every(_: Algorithm) -> bool {
    true
}

/// A harness on `store` for `domain`, its store supporting every algorithm.
fn harness_of<St>(store: St, clock: Arc<ManualClock>, domain: &str) -> Harness<St> {
    Harness {
        store,
        clock,
        domain: domain.to_owned(),
        supports: every,
    }
}

impl<St: Store> Harness<St> {
    /// Whether the store supports `algorithm`.
    fn supports(&self, algorithm: Algorithm) -> bool {
        (self.supports)(algorithm)
    }

    /// Whether the store supports every one of `algorithms`; if not, says on stderr which
    /// this scenario (in `domain`) lacks, so that a skip is never silent.
    fn needs(&self, algorithms: &[Algorithm]) -> bool {
        let missing: Vec<&str> = algorithms
            .iter()
            .filter(|a| !self.supports(**a))
            .map(|a| a.name())
            .collect();
        if !missing.is_empty() {
            eprintln!(
                "skipped on the {} store: {} needs {}",
                self.store.name(),
                self.domain,
                missing.join(", ")
            );
        }
        missing.is_empty()
    }

    /// Every algorithm (token buckets of `burst`) the store supports; the others named on
    /// stderr as skipped.
    fn algorithms(&self, burst: u32) -> Vec<Algorithm> {
        let (run, skip): (Vec<Algorithm>, Vec<Algorithm>) = all_algorithms(burst)
            .into_iter()
            .partition(|a| self.supports(*a));
        if !skip.is_empty() {
            let names: Vec<&str> = skip.iter().map(|a| a.name()).collect();
            eprintln!(
                "skipped on the {} store: {} with {}",
                self.store.name(),
                self.domain,
                names.join(", ")
            );
        }
        run
    }

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
            hold: None,
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
            no_grant_for_shadow_over_limit_or_repeated_counters,
            holds_are_taken_to_the_limit_and_released_once,
            a_hold_expires_at_its_deadline,
            holds_are_all_or_nothing_with_the_rest_of_the_call,
            concurrency_is_never_charged_or_leased
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
        key_prefix: String::new(),
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
        (harness_of(store, clock, domain), ())
    }

    for_each_scenario!(test_per_scenario);

    #[tokio::test]
    async fn per_descriptor_counting_consumes_what_fits_in_a_rejected_request() {
        let clock = Arc::new(ManualClock::new(W));
        let store = Arc::new(
            MemoryStore::with_clock(DEFAULT_CAPACITY, clock.clone())
                .with_counting(Counting::PerDescriptor),
        );
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&harness_of(
            store,
            clock,
            "per-descriptor",
        ))
        .await;
    }
}

#[path = "conformance/gossip.rs"]
mod gossip;

mod redis {
    use super::*;

    async fn harness(domain: &str) -> (Harness<RedisStore>, RedisServer) {
        let server = RedisServer::start();
        let clock = Arc::new(ManualClock::new(W));
        let store = redis_store(Target::Single(server.url()), &clock).await;
        (harness_of(store, clock, domain), server)
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
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&harness_of(
            store,
            clock,
            "per-descriptor",
        ))
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
                    super::$scenario(&harness_of(store, clock, stringify!($scenario))).await;
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
        super::per_descriptor_counting_consumes_what_fits_in_a_rejected_request(&harness_of(
            store,
            clock,
            "per-descriptor",
        ))
        .await;
    }
}
