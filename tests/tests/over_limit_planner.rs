//! The over-limit cache never rejects a request the service would admit: a property test
//! of the filter's own decision code (`floodgate::limiter::Limiter`, over an in-memory
//! shared data) against floodgate-server's own planner and memory store
//! (`RlsService::decide_asking`), sharing one fake clock.
//!
//! Each case is a random server configuration (a limit per descriptor key and some per
//! value, each maybe `replaces`-ing others, in `quota_mode`, in `shadow_mode`, granting
//! quota leases; the server maybe in global shadow mode), a random filter configuration
//! (three global rules, each maybe a shadow rule, leasing or not, with a cost header or
//! not) and a random sequence of requests bringing random subsets of descriptors and
//! costs, time moving on between them. Every call the filter asks for (and every
//! background lease refill) is answered by the service. Whenever the filter rejects a
//! request without a call, the same request is put to the service, which must deny it.

use floodgate::config::Config;
use floodgate::limiter::{Limiter, Pass, Verdict};
use floodgate::metrics::Tally;
use floodgate::shared::placement::PlacementKey;
use floodgate::wire::call::Call;
use floodgate::wire::rls::{Answer, QUOTA_HEADER};
use floodgate_server::clock::Clock;
use floodgate_server::config::source::Files;
use floodgate_server::metrics::Metrics;
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::{RateLimitRequest, RateLimitResponse};
use floodgate_server::rls::{Options, RlsService};
use floodgate_server::store::memory::MemoryStore;
use proptest::prelude::*;
use prost::Message;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[path = "over_limit_planner/configs.rs"]
mod configs;
#[path = "over_limit_planner/host.rs"]
mod host;
use configs::{limit, plugin, server_yaml, Limit};
use host::{FakeClock, Request, Shared};

/// The descriptor keys, the request header each comes from, and the values requests use.
const KEYS: [(&str, &str, [&str; 2]); 3] = [
    ("tenant", "x-tenant", ["acme", "beta"]),
    ("plan", "x-plan", ["premium", "basic"]),
    ("team", "x-team", ["alpha", "omega"]),
];

const START_NS: u64 = 1_700_000_000_250_000_000;

/// One request: for each key, the value it brings (or none), its cost, and the time
/// before it (ms).
type Step = ([Option<usize>; 3], u32, u64);

fn step() -> impl Strategy<Value = Step> {
    (
        [
            prop::option::of(0usize..2),
            prop::option::of(0usize..2),
            prop::option::of(0usize..2),
        ],
        1u32..3,
        prop::sample::select(vec![0u64, 0, 0, 10, 200, 700, 1_100, 61_000]),
    )
}

fn headers(step: &Step) -> Request {
    let mut h: Vec<(String, String)> = KEYS
        .iter()
        .zip(step.0)
        .filter_map(|(&(_, header, values), v)| Some((header.to_owned(), values[v?].to_owned())))
        .collect();
    h.push(("x-cost".into(), step.1.to_string()));
    Request(h)
}

struct World {
    limiter: Limiter,
    /// The same configuration with the cache off: what the filter would send for a
    /// request, to put it to the service when the cache rejected it.
    asker: Limiter,
    shared: Shared,
    tally: Tally,
    service: RlsService<MemoryStore<FakeClock>>,
    clock: FakeClock,
}

impl World {
    fn new(limits: &[Limit], rules: &[(bool, bool, bool)], shadow_mode: bool) -> World {
        let files = Files {
            root: PathBuf::from("limits.yaml"),
            files: vec![(PathBuf::from("limits.yaml"), server_yaml(limits))],
        };
        let config = floodgate_server::config::parse(&files).expect("the generated config loads");
        let clock = FakeClock(Arc::new(AtomicU64::new(START_NS)));
        let options = Options {
            shadow_mode,
            ..Options::default()
        };
        let service = RlsService::new(
            floodgate_server::config::Shared::new(config),
            MemoryStore::with_clock(10_000, clock.clone()),
            Arc::new(Metrics::new("memory")),
            options,
        );
        let json = plugin(rules);
        let parse = |json: &str| Config::parse(json.as_bytes()).expect("the plugin config");
        let key = PlacementKey::from_bytes([9; 16]);
        let limiter = Limiter::new(parse(&json), key);
        let off = json.replace(
            r#""domain":"edge""#,
            r#""domain":"edge","cache_over_limit":false"#,
        );
        let asker = Limiter::new(parse(&off), key);
        let shared = Shared::default();
        if let Some(leases) = limiter.lease_table() {
            leases.prepare(&shared).expect("lease table");
        }
        if let Some(cache) = limiter.over_limit_cache() {
            cache.prepare(&shared).expect("cache");
        }
        let tally = Tally::new(limiter.config().rules.len());
        World {
            limiter,
            asker,
            shared,
            tally,
            service,
            clock,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Hands `call` to the service, with its quota header unless `quota` is false.
    async fn call(&self, call: &Call, quota: bool) -> RateLimitResponse {
        let request =
            RateLimitRequest::decode(call.message()).expect("the filter's request decodes");
        let value = call.header(QUOTA_HEADER).filter(|_| quota);
        let header: Vec<&[u8]> = value.iter().map(Vec::as_slice).collect();
        self.service
            .decide_asking(request, &header)
            .await
            .expect("the service answers")
    }

    async fn refill(&mut self, pass: Pass) {
        if let Some(refill) = pass.refill {
            let answer = self.call(&refill.call, true).await;
            let now = self.now();
            let answer = Answer::Response(answer.encode_to_vec());
            let (limiter, shared, tally) = (&self.limiter, &self.shared, &mut self.tally);
            limiter.refilled(&refill.keys, answer, || Some(now), shared, tally);
        }
    }

    /// One request through the filter: whether the cache rejected it (and the service,
    /// asked the same, denies it too); `Err` when the cache rejected what the service
    /// admits.
    async fn request(&mut self, step: &Step) -> Result<bool, String> {
        self.clock.0.fetch_add(step.2 * 1_000_000, Ordering::SeqCst);
        let now = self.now();
        let mut req = headers(step);
        let verdict = {
            let (limiter, shared, tally) = (&self.limiter, &self.shared, &mut self.tally);
            limiter.check(&mut req, || Some(now), shared, tally)
        };
        match verdict {
            Verdict::Continue(pass) => {
                self.refill(pass).await;
                Ok(false)
            }
            Verdict::Ask(ask) => {
                let answer = self.call(&ask.call, true).await;
                let answer = Answer::Response(answer.encode_to_vec());
                let verdict = {
                    let (limiter, shared, tally) = (&self.limiter, &self.shared, &mut self.tally);
                    limiter.answer(ask.pending, answer, &mut req, || Some(now), shared, tally)
                };
                if let Verdict::Continue(pass) = verdict {
                    self.refill(pass).await;
                }
                Ok(false)
            }
            Verdict::Reject(_) => {
                // Rejected without a call: by the over-limit cache (only global rules).
                let mut fresh = Tally::new(self.asker.config().rules.len());
                let scratch = Shared::default();
                let Verdict::Ask(ask) =
                    self.asker
                        .check(&mut req, || Some(now), &scratch, &mut fresh)
                else {
                    return Err("the cache-less filter did not ask".into());
                };
                let answer = self.call(&ask.call, false).await;
                if answer.overall_code != Code::OverLimit as i32 {
                    return Err(format!(
                        "rejected from the cache, but the service admits it: {:?} -> {answer:?}",
                        req.0
                    ));
                }
                Ok(true)
            }
        }
    }
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// The property is not vacuous: the harness sees the cache reject (the reported case, with
/// `replaces`: plain requests are denied and then rejected from the cache, premium ones,
/// whose limit replaces the plain one, are not).
#[test]
fn the_harness_sees_rejections_from_the_cache() {
    let limit = |key, value, requests_per_unit, replaces: Vec<usize>| Limit {
        key,
        value,
        requests_per_unit,
        per_minute: true,
        algorithm: "fixed_window",
        quota_mode: false,
        shadow_mode: false,
        replaces,
        quota: None,
    };
    let limits = [limit(0, None, 2, vec![]), limit(1, Some(0), 100, vec![0])];
    let rules = [(false, false, false); 3];
    let plain: Step = ([Some(0), None, None], 1, 0);
    let premium: Step = ([Some(0), Some(0), None], 1, 0);
    let cached = run(async {
        let mut world = World::new(&limits, &rules, false);
        let mut cached = Vec::new();
        for step in [
            premium, premium, plain, plain, plain, plain, premium, premium,
        ] {
            cached.push(world.request(&step).await.expect("sound"));
        }
        cached
    });
    assert_eq!(
        cached,
        [false, false, false, false, false, true, false, false]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_cache_never_rejects_what_the_service_admits(
        limits in prop::collection::vec(limit(), 1..7),
        rules in prop::array::uniform3((prop::bool::weighted(0.2), any::<bool>(), any::<bool>())),
        shadow_mode in prop::bool::weighted(0.1),
        steps in prop::collection::vec(step(), 1..50),
    ) {
        let outcome = run(async {
            let mut world = World::new(&limits, &rules, shadow_mode);
            for (i, step) in steps.iter().enumerate() {
                world
                    .request(step)
                    .await
                    .map_err(|e| format!("request {i}: {e}\n{}", server_yaml(&limits)))?;
            }
            Ok::<(), String>(())
        });
        prop_assert!(outcome.is_ok(), "{}", outcome.err().unwrap_or_default());
    }
}
