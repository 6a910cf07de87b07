//! `make bench`: floodgate's local mode against Envoy without a filter, Envoy's native
//! `local_ratelimit`, and a no-op wasm filter, side by side in one run.
//!
//! Every configuration is a listener of one Envoy whose single worker is pinned to CPU 0;
//! wrk and a `direct_response` upstream Envoy share CPU 1. Configurations take turns over several
//! rounds so that machine noise spreads over all of them. For each we report requests
//! per second, wrk's p50/p99 and the worker thread's CPU per request from /proc (V8
//! compiles on other threads, so the worker thread is what requests cost).
//!
//! Global mode is measured the same way: floodgate's global mode, Envoy's native
//! `envoy.filters.http.ratelimit` filter and the wasm call floor (`bench/call-floor`: the
//! least any wasm filter must do for the same call), all asking the same floodgate-server
//! (pinned to CPU 1 with wrk and the upstream) about every request, with a limit never
//! reached. Each wasm global case is also reported as the median of its per-round
//! differences from the native filter, which machine noise disturbs less than medians
//! taken apart.
//!
//! Environment: `BENCH_ROUNDS` (default 5), `BENCH_SECONDS` (default 5),
//! `BENCH_CONNECTIONS` (default 16), `BENCH_ONLY` (comma-separated name fragments: run
//! only those configurations, plus "no filter").

use floodgate_integration::configs::{
    self, bootstrap, cluster, floodgate_filter, listener_with_route,
};
use floodgate_integration::paths::repo_root;
use floodgate_integration::{Envoy, Server};
use serde_json::{json, Value};
use std::process::Command;

/// One configuration under test.
struct Case {
    name: String,
    filters: Vec<Value>,
    /// Route-level `rate_limits` (Envoy's native rate limit filter needs them).
    rate_limits: Option<Value>,
    /// Every request is rejected (compare CPU per request with the native reject path).
    rejects: bool,
    /// Copies of the filter in the chain (CPU only: see [`stacked_cases`]).
    stack: usize,
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

/// floodgate's configuration for the local cases: one bucket per tenant.
fn local_plugin(capacity: u64, refill: u64) -> Value {
    json!({"rules": [{
        "name": "bench",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": capacity, "refill_per_second": refill}
    }]})
}

fn floodgate(capacity: u64, refill: u64) -> Value {
    floodgate_filter(&local_plugin(capacity, refill))
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

const NOOP: &str = "no-op wasm (reads 1 header)";
const FLOODGATE_ALLOWED: &str = "floodgate local, allowed";
const NATIVE_REJECTED: &str = "native local_ratelimit, all rejected";
const FLOODGATE_REJECTED: &str = "floodgate local, all rejected";
const NATIVE_GLOBAL: &str = "native ratelimit -> floodgate-server";
const FLOODGATE_GLOBAL: &str = "floodgate global -> floodgate-server";
const FLOODGATE_FALLBACK: &str = "floodgate global with a fallback -> floodgate-server";
const CALL_FLOOR: &str = "wasm call floor -> floodgate-server";

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
const STACK: usize = 8;

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
fn stacked_cases() -> Vec<Case> {
    [
        (
            "native local_ratelimit",
            native_local_ratelimit(4_000_000_000, 1),
        ),
        (NOOP, noop()),
        (FLOODGATE_ALLOWED, floodgate(4_000_000_000, 1_000_000_000)),
    ]
    .into_iter()
    .map(|(name, filter)| Case {
        stack: STACK,
        ..case(&format!("{name} x{STACK}"), stacked(&filter, STACK), false)
    })
    .collect()
}

/// The limit the global cases ask about: never reached.
const SERVER_CONFIG: &str = "
domain: bench
descriptors:
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 4000000000
";

/// floodgate's configuration for the global cases: one descriptor, fail closed.
fn global_plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "bench", "timeout_ms": 1000, "failure_mode": "deny"},
        "rules": [{
            "name": "bench",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {}
        }]
    })
}

/// The global configuration with a fallback bucket on its rule: what a fallback costs a
/// request the service answers.
fn fallback_plugin() -> Value {
    let mut plugin = global_plugin();
    plugin["rules"][0]["global"] = json!({"fallback": {"capacity": 100, "refill_per_second": 10}});
    plugin
}

fn global_cases() -> Vec<Case> {
    let floodgate = floodgate_filter(&global_plugin());
    let fallback = floodgate_filter(&fallback_plugin());
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
        // The least any wasm filter can do for the same call (bench/call-floor).
        case(
            CALL_FLOOR,
            vec![bench_module("call-floor", "floodgate_call_floor.wasm")],
            false,
        ),
    ]
}

/// Extra builds of the filter to compare, from `BENCH_VARIANTS=path,path,...`: each runs
/// with the "allowed" configuration and the global one. For trying an optimisation side
/// by side.
fn variants() -> Vec<Case> {
    let list = std::env::var("BENCH_VARIANTS").unwrap_or_default();
    list.split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|path| {
            let local = local_plugin(4_000_000_000, 1_000_000_000).to_string();
            let local = configs::wasm_filter("floodgate", path, &local);
            let global = configs::wasm_filter("floodgate", path, &global_plugin().to_string());
            [
                case(&format!("variant {path}"), vec![local], false),
                case(&format!("variant {path} global"), vec![global], false),
            ]
        })
        .collect()
}

fn cases() -> Vec<Case> {
    vec![
        case("no filter", vec![], false),
        case(
            "native local_ratelimit",
            vec![native_local_ratelimit(4_000_000_000, 1)],
            false,
        ),
        case(NOOP, vec![noop()], false),
        case(
            FLOODGATE_ALLOWED,
            vec![floodgate(4_000_000_000, 1_000_000_000)],
            false,
        ),
        case(NATIVE_REJECTED, vec![native_local_ratelimit(1, 3600)], true),
        case(FLOODGATE_REJECTED, vec![floodgate(1, 0)], true),
    ]
}

/// What one wrk run measured.
#[derive(Default, Clone, Copy)]
struct Sample {
    requests: f64,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_us: f64,
    /// p50 and p99 with one connection: each request alone, no queueing behind others.
    alone_p50_ms: f64,
    alone_p99_ms: f64,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn wrk(url: &str, seconds: u64, connections: u64) -> String {
    let out = Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1", "--latency"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .args(["-H", "x-tenant-id: bench", url])
        .output()
        .expect("run wrk (apt-get install wrk)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A wrk latency like `1.23ms`, `850.00us` or `1.01s`, in milliseconds.
fn millis(text: &str) -> f64 {
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * factor
}

fn parse_wrk(text: &str) -> Sample {
    let mut s = Sample::default();
    for line in text.lines().map(str::trim) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["50%", v] => s.p50_ms = millis(v),
            ["99%", v] => s.p99_ms = millis(v),
            ["Requests/sec:", v] => s.rps = v.parse().unwrap_or(0.0),
            [n, "requests", "in", ..] => s.requests = n.parse().unwrap_or(0.0),
            _ => {}
        }
    }
    s
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let rounds = env_or("BENCH_ROUNDS", 5);
    let seconds = env_or("BENCH_SECONDS", 5);
    let connections = env_or("BENCH_CONNECTIONS", 16);
    let tick_us = 1e6 / clock_ticks_per_second();

    let upstream_yaml = json!({
        "static_resources": {"listeners": [{
            "name": "upstream",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "upstream",
                    "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                        {"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": "ok\n"}}}
                    ]}]},
                    "http_filters": [configs::router()]
                }
            }]}]
        }]},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}}
    })
    .to_string();
    let upstream = Envoy::start_pinned(&upstream_yaml, 1, Some("1")).await;

    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let cases: Vec<Case> = cases()
        .into_iter()
        .chain(global_cases())
        .chain(stacked_cases())
        .chain(variants())
        .enumerate()
        .filter(|(i, c)| only.is_empty() || *i == 0 || only.split(',').any(|w| c.name.contains(w)))
        .map(|(_, c)| c)
        .collect();
    let server = Server::start_pinned(SERVER_CONFIG, &[], Some("1"));
    // One Envoy, one listener per configuration: every configuration runs on the same
    // worker thread of the same process, so process-to-process differences (memory
    // layout, caches) do not masquerade as differences between filters.
    let listeners: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let mut route = json!({"cluster": "upstream", "timeout": "5s"});
            if let Some(rate_limits) = &case.rate_limits {
                route["rate_limits"] = rate_limits.clone();
            }
            listener_with_route(&format!("case{i}"), case.filters.clone(), route)
        })
        .collect();
    let yaml = bootstrap(
        listeners,
        vec![
            cluster("upstream", upstream.listener("upstream"), false),
            cluster("ratelimit", server.grpc(), true),
        ],
    );
    let envoy = Envoy::start_pinned(&yaml, 1, Some("0")).await;
    let urls: Vec<String> = (0..cases.len())
        .map(|i| envoy.url(&format!("case{i}"), "/"))
        .collect();
    for url in &urls {
        // Warm up: connections, V8 tiers, the bucket's first write.
        wrk(url, 1, connections);
    }

    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cases.len()];
    for round in 1..=rounds {
        eprintln!("round {round}/{rounds}");
        // Each round starts one configuration later and every other round runs backwards,
        // so no configuration keeps its place or its neighbour (the machine's state after
        // one run colours the next).
        let mut order: Vec<usize> = (0..urls.len())
            .map(|k| (k + round as usize - 1) % urls.len())
            .collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for i in order {
            let url = &urls[i];
            let before = envoy
                .thread_cpu_ticks("wrk:worker_0")
                .expect("worker thread");
            let mut sample = parse_wrk(&wrk(url, seconds, connections));
            let after = envoy
                .thread_cpu_ticks("wrk:worker_0")
                .expect("worker thread");
            sample.cpu_us = (after - before) as f64 * tick_us / sample.requests.max(1.0);
            if cases[i].stack == 1 {
                let alone = parse_wrk(&wrk(url, seconds.div_ceil(2), 1));
                sample.alone_p50_ms = alone.p50_ms;
                sample.alone_p99_ms = alone.p99_ms;
            }
            samples[i].push(sample);
        }
    }

    let summary: Vec<Sample> = samples
        .iter()
        .map(|runs| Sample {
            requests: runs.iter().map(|s| s.requests).sum(),
            rps: median(runs.iter().map(|s| s.rps).collect()),
            p50_ms: median(runs.iter().map(|s| s.p50_ms).collect()),
            p99_ms: median(runs.iter().map(|s| s.p99_ms).collect()),
            cpu_us: median(runs.iter().map(|s| s.cpu_us).collect()),
            alone_p50_ms: median(runs.iter().map(|s| s.alone_p50_ms).collect()),
            alone_p99_ms: median(runs.iter().map(|s| s.alone_p99_ms).collect()),
        })
        .collect();
    let base = summary[0].cpu_us;
    println!(
        "\n{rounds} rounds x {seconds}s, wrk -t1 -c{connections}, Envoy 1 worker pinned to CPU 0, \
         wrk and upstream on CPU 1 (medians over rounds)\n"
    );
    println!(
        "| configuration | req/s | p50 | p99 | worker CPU/req | CPU added | \
         p50 alone | p99 alone | p50 added alone |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let base_alone = summary[0].alone_p50_ms;
    for (case, s) in cases.iter().zip(&summary).filter(|(c, _)| c.stack == 1) {
        let (added, added_alone) = if case.rejects {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!("{:+.1} µs", s.cpu_us - base),
                format!("{:+.0} µs", (s.alone_p50_ms - base_alone) * 1000.0),
            )
        };
        println!(
            "| {} | {:.0} | {:.2} ms | {:.2} ms | {:.1} µs | {} | {:.0} µs | {:.0} µs | {} |",
            case.name,
            s.rps,
            s.p50_ms,
            s.p99_ms,
            s.cpu_us,
            added,
            s.alone_p50_ms * 1000.0,
            s.alone_p99_ms * 1000.0,
            added_alone
        );
    }
    println!(
        "\n\"alone\": the same after each round with one connection (wrk -c1), so latency is a \
         request's own path with nothing queued ahead of it."
    );
    println!(
        "\nEach filter chained {STACK} times (CPU per request, per filter = added / {STACK}):\n"
    );
    println!("| configuration | worker CPU/req | CPU added per filter |");
    println!("|---|---:|---:|");
    for (case, s) in cases.iter().zip(&summary).filter(|(c, _)| c.stack > 1) {
        println!(
            "| {} | {:.1} µs | {:+.2} µs |",
            case.name,
            s.cpu_us,
            (s.cpu_us - base) / case.stack as f64
        );
    }

    // Ratios are taken within each round (the configurations of one round ran back to
    // back, so they share the machine's state), then the median over rounds.
    let index = |name: &str| cases.iter().position(|c| c.name == name);
    let per_round = |f: &dyn Fn(usize) -> f64| median((0..rounds as usize).map(f).collect());
    let stacked_name = |name: &str| format!("{name} x{STACK}");
    for (label, ours, floor) in [
        ("one filter", index(FLOODGATE_ALLOWED), index(NOOP)),
        (
            "chained",
            index(&stacked_name(FLOODGATE_ALLOWED)),
            index(&stacked_name(NOOP)),
        ),
    ] {
        if let (Some(ours), Some(floor)) = (ours, floor) {
            let ratio = per_round(&|r| {
                let none = samples[0][r].cpu_us;
                (samples[ours][r].cpu_us - none) / (samples[floor][r].cpu_us - none)
            });
            println!(
                "\nfloodgate allowed path ({label}): {ratio:.2} x the no-op wasm filter's added CPU \
                 (median of per-round ratios; target <= 1.5)"
            );
        }
    }
    if let (Some(ours), Some(native)) = (index(FLOODGATE_REJECTED), index(NATIVE_REJECTED)) {
        let ratio = per_round(&|r| samples[ours][r].cpu_us / samples[native][r].cpu_us);
        println!(
            "floodgate reject path: {ratio:.2} x the native filter's CPU per rejected request \
             (median of per-round ratios; target <= 1.5)"
        );
    }
    let at = |name: &str| {
        cases
            .iter()
            .position(|c| c.name == name)
            .map(|i| summary[i])
    };
    if let (Some(ours), Some(native)) = (at(FLOODGATE_GLOBAL), at(NATIVE_GLOBAL)) {
        let none = summary[0];
        println!(
            "global mode, added p50 latency alone: floodgate {:+.0} µs, native ratelimit filter \
             {:+.0} µs; at saturation (-c{connections}): floodgate {:+.0} µs, native {:+.0} µs \
             (target: floodgate <= native)",
            (ours.alone_p50_ms - none.alone_p50_ms) * 1000.0,
            (native.alone_p50_ms - none.alone_p50_ms) * 1000.0,
            (ours.p50_ms - none.p50_ms) * 1000.0,
            (native.p50_ms - none.p50_ms) * 1000.0,
        );
    }
    // Paired per round: each wasm filter against the native filter it ran beside.
    if let Some(native) = index(NATIVE_GLOBAL) {
        let wasm_global = cases.iter().enumerate().filter(|(_, c)| {
            [FLOODGATE_GLOBAL, FLOODGATE_FALLBACK, CALL_FLOOR].contains(&c.name.as_str())
                || c.name.ends_with(" global")
        });
        for (ours, case) in wasm_global {
            let label = &case.name;
            let cpu = per_round(&|r| samples[ours][r].cpu_us - samples[native][r].cpu_us);
            let alone = per_round(&|r| {
                (samples[ours][r].alone_p50_ms - samples[native][r].alone_p50_ms) * 1000.0
            });
            let busy =
                per_round(&|r| (samples[ours][r].p50_ms - samples[native][r].p50_ms) * 1000.0);
            println!(
                "{label} minus native ratelimit (median of per-round differences): worker CPU \
                 {cpu:+.1} µs/request, p50 alone {alone:+.0} µs, p50 at -c{connections} {busy:+.0} µs"
            );
        }
    }
}
