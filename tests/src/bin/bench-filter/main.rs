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
mod paired;
mod provenance;
mod wrk;

use cases::{
    calibration_cases, cases, global_cases, stacked_cases, variants, Case, SERVER_CONFIG, STACK,
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
    for (url, case) in urls.iter().zip(&cases) {
        // Warm up: connections, V8 tiers, the bucket's first write. And a check that each
        // configuration does what its name says: a rejecting one that let requests through
        // (or an admitting one that rejected them) would time the wrong path.
        let warm = parse_wrk(&wrk(url, 1, connections));
        let rejected = warm.non_success / warm.requests.max(1.0);
        let expected = if case.rejects {
            rejected > 0.99
        } else {
            rejected == 0.0
        };
        assert!(
            expected,
            "{}: {:.1} % of the warm-up's responses were rejected",
            case.name,
            rejected * 100.0
        );
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
            // Read only at the warm-up, where it decides whether the run goes on.
            ..Sample::default()
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

    paired::print(&paired::Run {
        cases: &cases,
        samples: &samples,
        summary: &summary,
        calls: &calls,
        rounds: rounds as usize,
        connections,
    });
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
