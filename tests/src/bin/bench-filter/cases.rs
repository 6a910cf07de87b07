//! The configurations `make bench` compares: their filters, names and the plugin and
//! server configurations they use.

use floodgate_costs::plugins;
use floodgate_integration::configs::{self, floodgate_filter};
use floodgate_integration::paths::repo_root;
use serde_json::{json, Value};

mod calibration;
pub use calibration::{calibration_case, calibration_cases, CALIBRATION_CALLS, CALIBRATION_KINDS};

/// One configuration under test.
pub struct Case {
    pub name: String,
    pub filters: Vec<Value>,
    /// Route-level `rate_limits` (Envoy's native rate limit filter needs them).
    pub rate_limits: Option<Value>,
    /// Every request is rejected (compare CPU per request with the native reject path).
    pub rejects: bool,
    /// Copies of the filter in the chain (CPU only: see [`stacked_cases`]).
    pub stack: usize,
}

fn native_local_ratelimit(max_tokens: u64, fill_seconds: u64) -> Value {
    json!({
        "name": "envoy.filters.http.local_ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
            "stat_prefix": "native",
            "token_bucket": {
                "max_tokens": max_tokens,
                "tokens_per_fill": max_tokens,
                "fill_interval": format!("{fill_seconds}s")
            },
            "filter_enabled": {"default_value": {"numerator": 100, "denominator": "HUNDRED"},
                               "runtime_key": "native_enabled"},
            "filter_enforced": {"default_value": {"numerator": 100, "denominator": "HUNDRED"},
                                "runtime_key": "native_enforced"}
        }
    })
}

/// Envoy's own local rate limit keeping one bucket per tenant, as floodgate's bench rule
/// does: the filter's own `rate_limits` make the `tenant` descriptor from the header the
/// bench sends, and the descriptor with no value is dynamic (a bucket per value met, at
/// most `max_dynamic_descriptors`), each of `max_tokens` refilled every `fill_seconds`.
/// Requests without the header would take the filter's own bucket, never emptied.
fn native_local_ratelimit_per_tenant(max_tokens: u64, fill_seconds: u64) -> Value {
    let mut filter = native_local_ratelimit(4_000_000_000, 1);
    let config = &mut filter["typed_config"];
    config["rate_limits"] = json!([{"actions": [{"request_headers": {
        "header_name": "x-tenant-id", "descriptor_key": "tenant"
    }}]}]);
    config["descriptors"] = json!([{
        "entries": [{"key": "tenant"}],
        "token_bucket": {
            "max_tokens": max_tokens,
            "tokens_per_fill": max_tokens,
            "fill_interval": format!("{fill_seconds}s")
        }
    }]);
    config["max_dynamic_descriptors"] = json!(1000);
    filter
}

/// A bench-only module from `bench/`, built by `make bench`.
fn bench_module(name: &str, file: &str) -> Value {
    let wasm = repo_root().join("target/wasm32-wasip1/release").join(file);
    assert!(
        wasm.exists(),
        "{} missing: run `make bench-wasm`",
        wasm.display()
    );
    configs::wasm_filter(name, &wasm.display().to_string(), "")
}

fn noop() -> Value {
    bench_module("noop", "floodgate_noop_filter.wasm")
}

fn raw_noop() -> Value {
    bench_module("raw-noop", "floodgate_raw_noop.wasm")
}

/// `bench/host-calls` running `plan`, in a VM of its own named `name` (the module keeps
/// its plan per VM).
fn host_calls(name: &str, plan: &str) -> Value {
    plan_module("floodgate_host_calls.wasm", name, plan)
}

/// `bench/callback-floor` running `plan`: the same, in a module that also exports the
/// callbacks floodgate enters on every request (context create, response headers,
/// delete) and does nothing in them.
fn with_callbacks(name: &str, plan: &str) -> Value {
    plan_module("floodgate_callback_floor.wasm", name, plan)
}

fn plan_module(file: &str, name: &str, plan: &str) -> Value {
    let wasm = repo_root().join("target/wasm32-wasip1/release").join(file);
    assert!(
        wasm.exists(),
        "{} missing: run `make bench-wasm`",
        wasm.display()
    );
    configs::wasm_filter(name, &wasm.display().to_string(), plan)
}

/// The raw-ABI no-op's work (one header's value) with floodgate's callbacks.
fn callback_noop() -> Value {
    with_callbacks("callback-noop", "value 1")
}

fn reject_floor() -> Value {
    host_calls("reject-floor", "reply")
}

/// The limit floor: the host calls of a shared-data limit admitting a request.
fn limit_floor() -> Value {
    host_calls("limit-floor", "limit")
}

// The names the report looks configurations up by.
/// The SDK no-op (`bench/noop-filter`): the floor the local-mode target is set against.
pub const NOOP: &str = "no-op wasm (reads 1 header)";
/// The raw-ABI no-op (`bench/raw-noop`): the floor that exports what floodgate does not either.
pub const RAW_NOOP: &str = "raw-ABI no-op wasm (reads 1 header)";
/// The raw-ABI no-op exporting floodgate's per-request callbacks too: the floor of the
/// local allowed target (1.2 x the raw-ABI no-op plus the callbacks floodgate must have).
pub const CALLBACK_NOOP: &str = "raw-ABI no-op with floodgate's callbacks (reads 1 header)";
/// floodgate local mode with a limit never reached.
pub const FLOODGATE_ALLOWED: &str = "floodgate local, allowed";
/// A concurrency rule never full: a slot taken and given back per request. Paired with
/// [`FLOODGATE_ALLOWED`]: what holding a slot adds.
pub const FLOODGATE_CONCURRENCY: &str = "floodgate local concurrency, allowed";
/// Envoy's own local rate limit, rejecting every request.
pub const NATIVE_REJECTED: &str = "native local_ratelimit, all rejected";
/// The same limit as floodgate's bench rule: a bucket per tenant, made from the request's
/// `x-tenant-id` (Envoy 1.40's dynamic descriptors), rejecting every request. The single
/// bucket of [`NATIVE_REJECTED`] reads no header; this one does the job floodgate's rule
/// does, so the two are compared like for like.
pub const NATIVE_REJECTED_PER_TENANT: &str = "native local_ratelimit per tenant, all rejected";
/// The least any wasm filter does to reject (`bench/host-calls` with the `reply` plan:
/// one local reply, nothing else): the floor of the rejecting paths.
pub const REJECT_FLOOR: &str = "raw-ABI reject floor (one local reply)";
/// What any filter keeping a shared-data limit must ask the host for on an admitted
/// request (`bench/host-calls`, plan `limit`): the header map, the clock, the bucket's
/// read and its compare-and-swap, and nothing else. floodgate's local allowed path over it
/// is floodgate's own work.
pub const LIMIT_FLOOR: &str = "raw-ABI limit floor (header map, clock, read, write)";
/// The same on a rejected request (plan `limit-reject`): the three reads, then floodgate's
/// default reply (its body and draft-03 fields).
pub const LIMIT_REJECT_FLOOR: &str =
    "raw-ABI limit floor, rejecting (header map, clock, read, reply)";
/// The limit floor rejecting in a module that exports floodgate's per-request callbacks:
/// what any filter exporting them pays to reject, with no logic.
pub const CALLBACK_LIMIT_REJECT_FLOOR: &str =
    "raw-ABI limit floor, rejecting, with floodgate's callbacks";
/// floodgate local mode, rejecting every request.
pub const FLOODGATE_REJECTED: &str = "floodgate local, all rejected";
/// Envoy's own rate limit filter asking floodgate-server: what the wasm global cases pair with.
pub const NATIVE_GLOBAL: &str = "native ratelimit -> floodgate-server";
/// floodgate global mode asking floodgate-server.
pub const FLOODGATE_GLOBAL: &str = "floodgate global -> floodgate-server";
/// floodgate global mode with a fallback bucket on its rule.
pub const FLOODGATE_FALLBACK: &str = "floodgate global with a fallback -> floodgate-server";
/// floodgate global mode with `rls.cache_over_limit: false`: against [`FLOODGATE_GLOBAL`],
/// what the over-limit cache's look-up (one shared-data read) costs an allowed request.
pub const FLOODGATE_GLOBAL_NO_CACHE: &str = "floodgate global, cache off -> floodgate-server";
/// floodgate global mode on a rule that asks for no lease (`"quota": false`): no lease
/// look-up, no quota header on the call. Beside [`FLOODGATE_GLOBAL`], what asking costs.
pub const FLOODGATE_NO_QUOTA: &str = "floodgate global, no lease asked -> floodgate-server";
/// floodgate global mode with neither a lease nor the over-limit cache: a call per
/// request and nothing in shared data, the least its global mode does.
pub const FLOODGATE_LEAN: &str = "floodgate global, no lease, cache off -> floodgate-server";
/// floodgate global mode over its limit: every request but the first rejected from the
/// over-limit cache, with no call. Paired with [`NATIVE_REJECTED`].
pub const FLOODGATE_CACHED: &str = "floodgate global, over limit (cached)";
/// floodgate global mode on a descriptor the server leases 100 hits at a time, with a
/// limit never reached: most requests are decided from a grant, with no call. Paired with
/// [`NATIVE_GLOBAL`].
pub const FLOODGATE_LEASED: &str = "floodgate global, leased";
/// The least a wasm filter can do for the same call (`bench/call-floor`).
pub const CALL_FLOOR: &str = "wasm call floor -> floodgate-server";

fn case(name: &str, filters: Vec<Value>, rejects: bool) -> Case {
    Case {
        name: name.to_string(),
        filters,
        rate_limits: None,
        rejects,
        stack: 1,
    }
}

/// How many copies of a filter the stacked cases chain.
pub const STACK: usize = 8;

/// `filter` chained `n` times; wasm copies get their own plugin name and root id (same
/// VM), as several plugins on one proxy would.
fn stacked(filter: &Value, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut copy = filter.clone();
            let config = copy.pointer_mut("/typed_config/config");
            if let Some(config) = config.filter(|c| c.get("root_id").is_some()) {
                let root = config["root_id"].as_str().unwrap_or("wasm").to_string();
                config["root_id"] = json!(format!("{root}-{i}"));
                config["name"] = json!(format!("{root}-{i}"));
            }
            copy
        })
        .collect()
}

/// The allowed paths again with each filter chained [`STACK`] times. A filter's own cost
/// is a few microseconds against about thirty for proxying the request, about the size
/// of the machine's noise; chaining copies multiplies the signal, not the noise, so the
/// per-filter ratio is what these measure best.
pub fn stacked_cases() -> Vec<Case> {
    [
        (
            "native local_ratelimit",
            native_local_ratelimit(4_000_000_000, 1),
        ),
        (NOOP, noop()),
        (RAW_NOOP, raw_noop()),
        (CALLBACK_NOOP, callback_noop()),
        (LIMIT_FLOOR, limit_floor()),
        (
            FLOODGATE_ALLOWED,
            floodgate_filter(&plugins::local_allowed()),
        ),
        (
            FLOODGATE_CONCURRENCY,
            floodgate_filter(&plugins::local_concurrency()),
        ),
    ]
    .into_iter()
    .map(|(name, filter)| Case {
        stack: STACK,
        ..case(&format!("{name} x{STACK}"), stacked(&filter, STACK), false)
    })
    .collect()
}

/// floodgate-server's configuration for the global cases (shared with the cost model).
pub const SERVER_CONFIG: &str = plugins::SERVER_CONFIG;

/// The global cases: native, floodgate (with and without a fallback, leased, and over its
/// limit from the over-limit cache), the call floor.
pub fn global_cases() -> Vec<Case> {
    let floodgate = floodgate_filter(&plugins::global());
    let cached = floodgate_filter(&plugins::over_limit());
    let no_cache = floodgate_filter(&plugins::global_no_cache());
    let fallback = floodgate_filter(&plugins::fallback());
    let native = json!({
        "name": "envoy.filters.http.ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
            "domain": "bench",
            "failure_mode_deny": true,
            "timeout": "1s",
            "rate_limit_service": {
                "grpc_service": {"envoy_grpc": {"cluster_name": "ratelimit"}},
                "transport_api_version": "V3"
            }
        }
    });
    let actions = json!([{"actions": [{"request_headers": {
        "header_name": "x-tenant-id", "descriptor_key": "tenant"
    }}]}]);
    vec![
        Case {
            rate_limits: Some(actions),
            ..case(NATIVE_GLOBAL, vec![native], false)
        },
        case(FLOODGATE_GLOBAL, vec![floodgate], false),
        case(FLOODGATE_FALLBACK, vec![fallback], false),
        case(FLOODGATE_GLOBAL_NO_CACHE, vec![no_cache], false),
        case(
            FLOODGATE_NO_QUOTA,
            vec![floodgate_filter(&plugins::global_no_quota())],
            false,
        ),
        case(
            FLOODGATE_LEAN,
            vec![floodgate_filter(&plugins::global_lean())],
            false,
        ),
        case(FLOODGATE_CACHED, vec![cached], true),
        case(
            FLOODGATE_LEASED,
            vec![floodgate_filter(&plugins::leased())],
            false,
        ),
        // The least any wasm filter can do for the same call (bench/call-floor).
        case(
            CALL_FLOOR,
            vec![bench_module("call-floor", "floodgate_call_floor.wasm")],
            false,
        ),
    ]
}

/// Extra builds of the filter to compare, from `BENCH_VARIANTS=path,path,...`: each runs
/// with the "allowed" configuration (alone and chained [`STACK`] times, where a small
/// difference stands out of the noise) and the global one. For trying an optimisation
/// (a build flag, a `wasm-opt` pass) side by side.
pub fn variants() -> Vec<Case> {
    let list = std::env::var("BENCH_VARIANTS").unwrap_or_default();
    list.split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|path| {
            let local = plugins::local_allowed().to_string();
            let local = configs::wasm_filter("floodgate", path, &local);
            let global = configs::wasm_filter("floodgate", path, &plugins::global().to_string());
            [
                Case {
                    stack: STACK,
                    ..case(
                        &format!("variant {path} x{STACK}"),
                        stacked(&local, STACK),
                        false,
                    )
                },
                case(&format!("variant {path}"), vec![local], false),
                case(&format!("variant {path} global"), vec![global], false),
            ]
        })
        .collect()
}

/// The single-filter cases: no filter first (every "added" figure is against it), then
/// local mode and its floors, allowed and rejected.
pub fn cases() -> Vec<Case> {
    vec![
        case("no filter", vec![], false),
        case(
            "native local_ratelimit",
            vec![native_local_ratelimit(4_000_000_000, 1)],
            false,
        ),
        case(NOOP, vec![noop()], false),
        case(RAW_NOOP, vec![raw_noop()], false),
        case(CALLBACK_NOOP, vec![callback_noop()], false),
        case(LIMIT_FLOOR, vec![limit_floor()], false),
        case(
            FLOODGATE_ALLOWED,
            vec![floodgate_filter(&plugins::local_allowed())],
            false,
        ),
        case(
            FLOODGATE_CONCURRENCY,
            vec![floodgate_filter(&plugins::local_concurrency())],
            false,
        ),
        case(NATIVE_REJECTED, vec![native_local_ratelimit(1, 3600)], true),
        case(
            NATIVE_REJECTED_PER_TENANT,
            vec![native_local_ratelimit_per_tenant(1, 3600)],
            true,
        ),
        case(REJECT_FLOOR, vec![reject_floor()], true),
        case(
            LIMIT_REJECT_FLOOR,
            vec![host_calls("limit-reject-floor", "limit-reject")],
            true,
        ),
        case(
            CALLBACK_LIMIT_REJECT_FLOOR,
            vec![with_callbacks("callback-limit-reject", "limit-reject")],
            true,
        ),
        case(
            FLOODGATE_REJECTED,
            vec![floodgate_filter(&plugins::local_rejecting())],
            true,
        ),
    ]
}
