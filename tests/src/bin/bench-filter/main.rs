//! `make bench`: floodgate's local mode against Envoy without a filter, Envoy's native
//! `local_ratelimit`, and two no-op wasm filters, side by side in one run: the SDK no-op
//! (`bench/noop-filter`, which exports every callback, as any `proxy-wasm` crate module
//! does) and the raw-ABI no-op (`bench/raw-noop`, which exports only
//! `proxy_on_request_headers`, as floodgate exports only what it uses). Both read one
//! header; floodgate's ratio is printed against each.
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
//! taken apart. The leased case (most requests decided from a quota lease) also prints
//! the calls it made per request, from the server's own decision counter.
//!
//! Environment: `BENCH_ROUNDS` (default 5), `BENCH_SECONDS` (default 5),
//! `BENCH_CONNECTIONS` (default 16), `BENCH_ONLY` (comma-separated name fragments: run
//! only those configurations, plus "no filter").

mod cases;
mod provenance;
mod wrk;

use cases::{
    calibration_case, calibration_cases, cases, global_cases, stacked_cases, variants, Case,
    CALIBRATION_CALLS, CALIBRATION_KINDS, CALL_FLOOR, FLOODGATE_ALLOWED, FLOODGATE_CACHED,
    FLOODGATE_CONCURRENCY, FLOODGATE_FALLBACK, FLOODGATE_GLOBAL, FLOODGATE_GLOBAL_NO_CACHE,
    FLOODGATE_LEASED, FLOODGATE_NO_QUOTA, FLOODGATE_REJECTED, LIMIT_FLOOR, LIMIT_REJECT_FLOOR,
    NATIVE_GLOBAL, NATIVE_REJECTED, NOOP, RAW_NOOP, REJECT_FLOOR, SERVER_CONFIG, STACK,
};
use floodgate_integration::configs::{self, bootstrap, cluster, listener_with_route};
use floodgate_integration::{Envoy, Server};
use serde_json::{json, Value};
use wrk::{clock_ticks_per_second, median, parse_wrk, wrk, Sample};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
        .chain(calibration_cases())
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
    // Per case: calls the server decided and requests sent, over every round.
    let mut calls: Vec<(f64, f64)> = vec![(0.0, 0.0); cases.len()];
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
            let decided_before = decisions(&server).await;
            let before = envoy
                .thread_cpu_ticks("wrk:worker_0")
                .expect("worker thread");
            let mut sample = parse_wrk(&wrk(url, seconds, connections));
            let after = envoy
                .thread_cpu_ticks("wrk:worker_0")
                .expect("worker thread");
            calls[i].0 += decisions(&server).await - decided_before;
            calls[i].1 += sample.requests;
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
    println!("\n{}", provenance::line(base));
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
    // Against each floor: the SDK no-op (the target's reference) and the raw-ABI no-op,
    // which pays for no callback floodgate does not export either.
    for (floor_label, floor_name) in [("the SDK no-op", NOOP), ("the raw-ABI no-op", RAW_NOOP)] {
        for (label, ours, floor) in [
            ("one filter", index(FLOODGATE_ALLOWED), index(floor_name)),
            (
                "chained",
                index(&stacked_name(FLOODGATE_ALLOWED)),
                index(&stacked_name(floor_name)),
            ),
        ] {
            if let (Some(ours), Some(floor)) = (ours, floor) {
                let ratio = per_round(&|r| {
                    let none = samples[0][r].cpu_us;
                    (samples[ours][r].cpu_us - none) / (samples[floor][r].cpu_us - none)
                });
                println!(
                    "\nfloodgate allowed path ({label}): {ratio:.2} x {floor_label} wasm filter's \
                     added CPU (median of per-round ratios; target <= 1.5 against the SDK no-op)"
                );
            }
        }
    }
    // Against the limit floor: the host calls any shared-data limit makes, and nothing
    // else; what floodgate adds over it is its own code and the callbacks it exports.
    for (label, ours, floor, per) in [
        (
            "one filter",
            index(FLOODGATE_ALLOWED),
            index(LIMIT_FLOOR),
            1.0,
        ),
        (
            "chained, per filter",
            index(&stacked_name(FLOODGATE_ALLOWED)),
            index(&stacked_name(LIMIT_FLOOR)),
            STACK as f64,
        ),
    ] {
        if let (Some(ours), Some(floor)) = (ours, floor) {
            let ratio = per_round(&|r| {
                let none = samples[0][r].cpu_us;
                (samples[ours][r].cpu_us - none) / (samples[floor][r].cpu_us - none)
            });
            let added = per_round(&|r| (samples[ours][r].cpu_us - samples[floor][r].cpu_us) / per);
            println!(
                "floodgate allowed path ({label}): {ratio:.2} x the raw-ABI limit floor's added \
                 CPU, {added:+.2} µs of worker CPU over it (medians of per-round ratios and \
                 differences)"
            );
        }
    }
    for (label, held, plain, per) in [
        (
            "one filter",
            index(FLOODGATE_CONCURRENCY),
            index(FLOODGATE_ALLOWED),
            1.0,
        ),
        (
            "chained, per filter",
            index(&stacked_name(FLOODGATE_CONCURRENCY)),
            index(&stacked_name(FLOODGATE_ALLOWED)),
            STACK as f64,
        ),
    ] {
        if let (Some(held), Some(plain)) = (held, plain) {
            let cpu = per_round(&|r| (samples[held][r].cpu_us - samples[plain][r].cpu_us) / per);
            println!(
                "floodgate concurrency rule ({label}): {cpu:+.2} µs of worker CPU over a local \
                 rule (median of per-round differences)"
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
    if let (Some(floor), Some(native)) = (index(REJECT_FLOOR), index(NATIVE_REJECTED)) {
        let ratio = per_round(&|r| samples[floor][r].cpu_us / samples[native][r].cpu_us);
        println!(
            "raw-ABI reject floor: {ratio:.2} x the native filter's CPU per rejected request \
             (median of per-round ratios: the least any wasm filter costs to reject)"
        );
        for (label, name) in [("reject", FLOODGATE_REJECTED), ("cached", FLOODGATE_CACHED)] {
            if let Some(ours) = index(name) {
                let added = per_round(&|r| samples[ours][r].cpu_us - samples[floor][r].cpu_us);
                println!(
                    "floodgate {label} path: {added:+.1} µs of worker CPU per rejected request \
                     over the reject floor (median of per-round differences)"
                );
            }
        }
    }
    if let (Some(floor), Some(native)) = (index(LIMIT_REJECT_FLOOR), index(NATIVE_REJECTED)) {
        let ratio = per_round(&|r| samples[floor][r].cpu_us / samples[native][r].cpu_us);
        println!(
            "raw-ABI limit floor, rejecting: {ratio:.2} x the native filter's CPU per rejected \
             request (median of per-round ratios: the host calls of a shared-data limit and \
             floodgate's reply, with no logic)"
        );
        if let Some(ours) = index(FLOODGATE_REJECTED) {
            let added = per_round(&|r| samples[ours][r].cpu_us - samples[floor][r].cpu_us);
            println!(
                "floodgate reject path: {added:+.1} µs of worker CPU per rejected request over \
                 the limit floor, rejecting (median of per-round differences)"
            );
        }
    }
    if let (Some(ours), Some(native)) = (index(FLOODGATE_CACHED), index(NATIVE_REJECTED)) {
        let ratio = per_round(&|r| samples[ours][r].cpu_us / samples[native][r].cpu_us);
        println!(
            "floodgate cached over-limit path: {ratio:.2} x the native local_ratelimit's CPU \
             per rejected request (median of per-round ratios; target <= 1.5)"
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
    if let (Some(leased), Some(native)) = (index(FLOODGATE_LEASED), index(NATIVE_GLOBAL)) {
        let cpu = per_round(&|r| {
            let none = samples[0][r].cpu_us;
            (samples[leased][r].cpu_us - none) / (samples[native][r].cpu_us - none)
        });
        let alone = per_round(&|r| {
            let none = samples[0][r].alone_p50_ms;
            (samples[leased][r].alone_p50_ms - none) / (samples[native][r].alone_p50_ms - none)
        });
        let (decided, requests) = calls[leased];
        println!(
            "floodgate global, leased: {cpu:.2} x the native ratelimit filter's added worker CPU, \
             {alone:.2} x its added p50 alone (medians of per-round ratios; targets <= 0.5); \
             {:.4} calls per request (target <= 0.05)",
            decided / requests.max(1.0)
        );
    }
    if let (Some(ours), Some(floor)) = (index(FLOODGATE_GLOBAL), index(CALL_FLOOR)) {
        let cpu = per_round(&|r| samples[ours][r].cpu_us - samples[floor][r].cpu_us);
        let (decided, requests) = calls[ours];
        println!(
            "floodgate global per call: {cpu:+.1} µs of worker CPU over the wasm call floor \
             (median of per-round differences; target <= +2.5 µs), {:.2} calls per request",
            decided / requests.max(1.0)
        );
    }
    // Paired per round: each wasm filter against the native filter it ran beside.
    if let Some(native) = index(NATIVE_GLOBAL) {
        let wasm_global = cases.iter().enumerate().filter(|(_, c)| {
            [
                FLOODGATE_GLOBAL,
                FLOODGATE_GLOBAL_NO_CACHE,
                FLOODGATE_NO_QUOTA,
                FLOODGATE_FALLBACK,
                FLOODGATE_LEASED,
                CALL_FLOOR,
            ]
            .contains(&c.name.as_str())
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
    // Each host-call kind alone: its case minus the module making no call, per round.
    if let Some(none) = index(&calibration_case("none")) {
        for kind in CALIBRATION_KINDS {
            if let Some(ours) = index(&calibration_case(kind)) {
                let each = per_round(&|r| {
                    (samples[ours][r].cpu_us - samples[none][r].cpu_us)
                        / f64::from(CALIBRATION_CALLS)
                });
                println!(
                    "host call {kind}: {each:+.3} µs of worker CPU per call (median of per-round \
                     differences, {CALIBRATION_CALLS} a request, against the same module making none)"
                );
            }
        }
    }
}

/// Calls floodgate-server has decided so far (OK and over limit).
async fn decisions(server: &Server) -> f64 {
    let ok = server
        .metric(r#"floodgate_requests_total{result="ok"}"#)
        .await;
    let over = server
        .metric(r#"floodgate_requests_total{result="over_limit"}"#)
        .await;
    ok + over
}
