//! The request paths the cost model drives, each with the module, configuration, service
//! and upstream that make it happen, and what must be true of the measured request (so a
//! path that stops being itself, e.g. a cached rejection that starts calling, is an error
//! rather than a quiet change of counts).

use crate::envoy::{Outcome, Response};
use crate::plugins;
use crate::rls::Limit;
use serde_json::Value;

mod module;
mod traffic;
pub use module::Module;
pub use traffic::{bench_request, ok_upstream};
use traffic::{llm_json, llm_sse};

/// Which part of the run is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// The first request after the warm-up.
    NextRequest,
    /// The first request after the warm-up that makes this many calls (found within
    /// 1 000 requests).
    FirstRequestWithCalls(u64),
    /// One tick of every root context, after one more request.
    Tick,
}

/// One path.
#[derive(Debug, Clone)]
pub struct Path {
    /// Its name, as the budget file and the tables know it.
    pub name: &'static str,
    /// What it is, in a few words (the table's note).
    pub about: &'static str,
    /// The module.
    pub module: Module,
    /// The plugin configuration of each filter in the chain.
    pub chain: Vec<Value>,
    /// The rate limit service's limits.
    pub limits: Vec<Limit>,
    /// What the upstream answers.
    pub upstream: Response,
    /// Requests before the measured one (the first creates keys, takes a lease...).
    pub warm_up: usize,
    /// What is measured.
    pub measure: Measure,
    /// How the measured request must end (not checked for ticks).
    pub outcome: Outcome,
    /// Rate limit calls the measured request must make, background ones included.
    pub calls: u64,
}

/// The bench's service limits (see [`plugins::SERVER_CONFIG`]).
fn bench_limits() -> Vec<Limit> {
    vec![
        Limit::never_reached("tenant"),
        Limit {
            key: "over",
            requests_per_unit: 1,
            unit_seconds: 3600,
            over: true,
            lease: None,
        },
        Limit {
            key: "leased",
            unit_seconds: 3600,
            lease: Some((100, 1_000)),
            ..Limit::never_reached("leased")
        },
        Limit {
            unit_seconds: 60,
            ..Limit::never_reached("streams")
        },
    ]
}

/// How many copies the chained paths chain (as `make bench` does).
pub const CHAIN: usize = 8;

/// Every path, floors first.
pub fn all() -> Vec<Path> {
    let one = |name, about, module, plugin: Value, outcome, calls| Path {
        name,
        about,
        module,
        chain: vec![plugin],
        limits: bench_limits(),
        upstream: ok_upstream(),
        warm_up: 2,
        measure: Measure::NextRequest,
        outcome,
        calls,
    };
    let chained = |path: Path| Path {
        chain: vec![path.chain[0].clone(); CHAIN],
        ..path
    };
    let none = Value::Null;
    let fwd = Outcome::Forwarded;
    let rejected = Outcome::Replied(429);
    vec![
        one(
            "raw-noop",
            "raw-ABI no-op: reads 1 header",
            Module::RawNoop,
            none.clone(),
            fwd,
            0,
        ),
        chained(one(
            "raw-noop x8",
            "raw-ABI no-op chained 8 times",
            Module::RawNoop,
            none.clone(),
            fwd,
            0,
        )),
        one(
            "callback-noop",
            "raw-ABI no-op exporting floodgate's per-request callbacks",
            Module::CallbackFloor,
            Value::String("value 1".to_string()),
            fwd,
            0,
        ),
        chained(one(
            "callback-noop x8",
            "the same chained 8 times",
            Module::CallbackFloor,
            Value::String("value 1".to_string()),
            fwd,
            0,
        )),
        one(
            "sdk-noop",
            "SDK no-op: reads 1 header",
            Module::SdkNoop,
            none.clone(),
            fwd,
            0,
        ),
        chained(one(
            "sdk-noop x8",
            "SDK no-op chained 8 times",
            Module::SdkNoop,
            none.clone(),
            fwd,
            0,
        )),
        one(
            "call-floor",
            "one call, its status and body read",
            Module::CallFloor,
            none,
            fwd,
            1,
        ),
        one(
            "reject-floor",
            "raw-ABI reject floor: a local 429, nothing else",
            Module::HostCalls,
            Value::String("reply".to_string()),
            rejected,
            0,
        ),
        one(
            "limit-floor",
            "raw-ABI limit floor: header map, clock, read, compare-and-swap",
            Module::HostCalls,
            Value::String("limit".to_string()),
            fwd,
            0,
        ),
        chained(one(
            "limit-floor x8",
            "raw-ABI limit floor chained 8 times",
            Module::HostCalls,
            Value::String("limit".to_string()),
            fwd,
            0,
        )),
        one(
            "limit-reject-floor",
            "raw-ABI limit floor rejecting: header map, clock, read, floodgate's reply",
            Module::HostCalls,
            Value::String("limit-reject".to_string()),
            rejected,
            0,
        ),
        one(
            "callback-limit-reject-floor",
            "the limit floor rejecting, exporting floodgate's per-request callbacks",
            Module::CallbackFloor,
            Value::String("limit-reject".to_string()),
            rejected,
            0,
        ),
        one(
            "local allowed",
            "local mode, limit never reached",
            Module::Floodgate,
            plugins::local_allowed(),
            fwd,
            0,
        ),
        chained(one(
            "local allowed x8",
            "local allowed chained 8 times",
            Module::Floodgate,
            plugins::local_allowed(),
            fwd,
            0,
        )),
        one(
            "local rejected",
            "local mode, every request rejected",
            Module::Floodgate,
            plugins::local_rejecting(),
            rejected,
            0,
        ),
        one(
            "local concurrency",
            "a concurrency rule: a slot taken, given back at the stream's end",
            Module::Floodgate,
            plugins::local_concurrency(),
            fwd,
            0,
        ),
        one(
            "global",
            "global mode, one call, OK",
            Module::Floodgate,
            plugins::global(),
            fwd,
            1,
        ),
        one(
            "global cache off",
            "global, rls.cache_over_limit false",
            Module::Floodgate,
            plugins::global_no_cache(),
            fwd,
            1,
        ),
        one(
            "global no lease",
            "global, a rule with global.quota false",
            Module::Floodgate,
            plugins::global_no_quota(),
            fwd,
            1,
        ),
        one(
            "global lean",
            "global, no lease and the cache off: nothing in shared data",
            Module::Floodgate,
            plugins::global_lean(),
            fwd,
            1,
        ),
        one(
            "global fallback",
            "global with a fallback bucket, OK",
            Module::Floodgate,
            plugins::fallback(),
            fwd,
            1,
        ),
        one(
            "global over limit",
            "over limit, answered by the call (cache off)",
            Module::Floodgate,
            {
                let mut p = plugins::over_limit();
                p["rls"]["cache_over_limit"] = Value::Bool(false);
                p
            },
            rejected,
            1,
        ),
        one(
            "global concurrency",
            "a fleet-wide concurrency rule: the call takes a hold, its release at the stream's end",
            Module::Floodgate,
            plugins::global_concurrency(),
            fwd,
            2,
        ),
        one(
            "global cached",
            "over limit, rejected from the over-limit cache",
            Module::Floodgate,
            plugins::over_limit(),
            rejected,
            0,
        ),
        one(
            "global leased",
            "decided from a quota lease, no call",
            Module::Floodgate,
            plugins::leased(),
            fwd,
            0,
        ),
        Path {
            measure: Measure::FirstRequestWithCalls(1),
            ..one(
                "global leased refill",
                "the lease spend that starts a background refill, and its answer",
                Module::Floodgate,
                plugins::leased(),
                fwd,
                1,
            )
        },
        Path {
            upstream: llm_json(),
            ..one(
                "llm local json",
                "floodgate-llm: local budget charged a JSON answer's usage",
                Module::FloodgateLlm,
                plugins::llm_local(),
                fwd,
                0,
            )
        },
        Path {
            upstream: llm_sse(),
            ..one(
                "llm local sse",
                "floodgate-llm: local budget charged an event stream's usage",
                Module::FloodgateLlm,
                plugins::llm_local(),
                fwd,
                0,
            )
        },
        Path {
            upstream: llm_json(),
            ..one(
                "llm global json",
                "floodgate-llm: check-only call, stream-end charge call",
                Module::FloodgateLlm,
                plugins::llm_global(),
                fwd,
                2,
            )
        },
        Path {
            measure: Measure::Tick,
            ..one(
                "local tick",
                "one metric flush after an allowed request",
                Module::Floodgate,
                plugins::local_allowed(),
                fwd,
                0,
            )
        },
    ]
}
