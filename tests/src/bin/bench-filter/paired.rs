//! The paired figures of `make bench`: each configuration against its floor or its
//! native counterpart, round by round. The configurations of one round ran back to back,
//! so they share the machine's state; a ratio or difference is taken within each round,
//! then the median over rounds, which machine noise disturbs less than medians taken
//! apart.

use crate::cases::{
    calibration_case, Case, CALIBRATION_CALLS, CALIBRATION_KINDS, CALLBACK_LIMIT_REJECT_FLOOR,
    CALLBACK_NOOP, CALL_FLOOR, FLOODGATE_ALLOWED, FLOODGATE_CACHED, FLOODGATE_CONCURRENCY,
    FLOODGATE_FALLBACK, FLOODGATE_GLOBAL, FLOODGATE_GLOBAL_NO_CACHE, FLOODGATE_LEAN,
    FLOODGATE_LEASED, FLOODGATE_NO_QUOTA, FLOODGATE_REJECTED, LIMIT_FLOOR, LIMIT_REJECT_FLOOR,
    NATIVE_GLOBAL, NATIVE_REJECTED, NATIVE_REJECTED_PER_TENANT, NOOP, RAW_NOOP, REJECT_FLOOR,
    STACK,
};
use crate::wrk::{Sample, Spread};

/// One run's figures: per configuration, its samples (one a round), their medians, and
/// the calls floodgate-server decided and the requests sent over every round.
pub struct Run<'a> {
    pub cases: &'a [Case],
    pub samples: &'a [Vec<Sample>],
    pub summary: &'a [Sample],
    pub calls: &'a [(f64, f64)],
    pub rounds: usize,
    pub connections: u64,
}

/// Prints every paired figure whose configurations ran.
pub fn print(run: &Run<'_>) {
    let Run {
        cases,
        samples,
        summary,
        calls,
        rounds,
        connections,
    } = *run;
    let index = |name: &str| cases.iter().position(|c| c.name == name);
    let per_round = |f: &dyn Fn(usize) -> f64| Spread::of((0..rounds).map(f).collect());
    println!(
        "\nPaired figures: the median over rounds of each round's ratio or difference, then \
         in parentheses the middle half of the rounds (first to third quartile)."
    );
    let stacked_name = |name: &str| format!("{name} x{STACK}");
    // `ours` against `other`, as one filter and chained: the label, both rows, and what a
    // chained difference is divided by to be one filter's.
    let alone_and_chained = |ours: &str, other: &str| {
        [
            ("one filter", index(ours), index(other), 1.0),
            (
                "chained",
                index(&stacked_name(ours)),
                index(&stacked_name(other)),
                STACK as f64,
            ),
        ]
    };
    // `ours`'s added CPU over `floor`'s, a ratio per round.
    let added_ratio = |ours: usize, floor: usize| {
        per_round(&|r| {
            let none = samples[0][r].cpu_us;
            (samples[ours][r].cpu_us - none) / (samples[floor][r].cpu_us - none)
        })
    };
    // Against each floor: the SDK no-op, the raw-ABI no-op, which pays for no callback
    // floodgate does not export either, and the same exporting the callbacks floodgate
    // must have (the target's reference: at most 1.2 x it, docs/benchmarks.md).
    for (floor_label, floor_name, target) in [
        ("the SDK no-op", NOOP, ""),
        ("the raw-ABI no-op", RAW_NOOP, ""),
        (
            "the raw-ABI no-op with floodgate's callbacks",
            CALLBACK_NOOP,
            "; target <= 1.2 chained",
        ),
    ] {
        for (label, ours, floor, _) in alone_and_chained(FLOODGATE_ALLOWED, floor_name) {
            if let (Some(ours), Some(floor)) = (ours, floor) {
                let ratio = added_ratio(ours, floor);
                println!(
                    "\nfloodgate allowed path ({label}): {ratio:.2} x {floor_label} wasm filter's \
                     added CPU (median of per-round ratios{target})"
                );
            }
        }
    }
    // What the three callbacks cost by themselves: the same module with and without them.
    for (label, with, without, per) in alone_and_chained(CALLBACK_NOOP, RAW_NOOP) {
        if let (Some(with), Some(without)) = (with, without) {
            let added =
                per_round(&|r| (samples[with][r].cpu_us - samples[without][r].cpu_us) / per);
            println!(
                "floodgate's three per-request callbacks ({label}): {added:+.2} µs of worker CPU \
                 per filter, entered and left empty (median of per-round differences)"
            );
        }
    }
    // Against the limit floor: the host calls any shared-data limit makes, and nothing
    // else; what floodgate adds over it is its own code and the callbacks it exports.
    for (label, ours, floor, per) in alone_and_chained(FLOODGATE_ALLOWED, LIMIT_FLOOR) {
        if let (Some(ours), Some(floor)) = (ours, floor) {
            let ratio = added_ratio(ours, floor);
            let added = per_round(&|r| (samples[ours][r].cpu_us - samples[floor][r].cpu_us) / per);
            let label = if per > 1.0 {
                "chained, per filter"
            } else {
                label
            };
            println!(
                "floodgate allowed path ({label}): {ratio:.2} x the raw-ABI limit floor's added \
                 CPU, {added:+.2} µs of worker CPU over it (medians of per-round ratios and \
                 differences)"
            );
        }
    }
    for (label, held, plain, per) in alone_and_chained(FLOODGATE_CONCURRENCY, FLOODGATE_ALLOWED) {
        if let (Some(held), Some(plain)) = (held, plain) {
            let cpu = per_round(&|r| (samples[held][r].cpu_us - samples[plain][r].cpu_us) / per);
            let label = if per > 1.0 {
                "chained, per filter"
            } else {
                label
            };
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
        if let Some(with) = index(CALLBACK_LIMIT_REJECT_FLOOR) {
            let added = per_round(&|r| samples[with][r].cpu_us - samples[floor][r].cpu_us);
            println!(
                "floodgate's three per-request callbacks, rejecting: {added:+.2} µs of worker \
                 CPU per rejected request (the limit floor rejecting with them, less without; \
                 median of per-round differences)"
            );
        }
    }
    if let (Some(floor), Some(ours)) = (
        index(CALLBACK_LIMIT_REJECT_FLOOR),
        index(FLOODGATE_REJECTED),
    ) {
        let added = per_round(&|r| samples[ours][r].cpu_us - samples[floor][r].cpu_us);
        println!(
            "floodgate reject path: {added:+.1} µs of worker CPU per rejected request over the \
             limit floor rejecting with floodgate's callbacks: floodgate's own work (median of \
             per-round differences)"
        );
    }
    if let (Some(ours), Some(native)) = (index(FLOODGATE_CACHED), index(NATIVE_REJECTED)) {
        let ratio = per_round(&|r| samples[ours][r].cpu_us / samples[native][r].cpu_us);
        println!(
            "floodgate cached over-limit path: {ratio:.2} x the native local_ratelimit's CPU \
             per rejected request (median of per-round ratios; target <= 1.5)"
        );
    }
    // Like for like: the same per-tenant limit in Envoy's own filter.
    if let Some(native) = index(NATIVE_REJECTED_PER_TENANT) {
        for (label, name) in [
            ("floodgate reject path", FLOODGATE_REJECTED),
            ("floodgate cached over-limit path", FLOODGATE_CACHED),
            ("raw-ABI reject floor", REJECT_FLOOR),
            ("raw-ABI limit floor, rejecting", LIMIT_REJECT_FLOOR),
            (
                "raw-ABI limit floor, rejecting, with floodgate's callbacks",
                CALLBACK_LIMIT_REJECT_FLOOR,
            ),
        ] {
            if let Some(ours) = index(name) {
                let ratio = per_round(&|r| samples[ours][r].cpu_us / samples[native][r].cpu_us);
                println!(
                    "{label}: {ratio:.2} x native local_ratelimit per tenant (the same limit, a \
                     bucket per x-tenant-id), CPU per rejected request (median of per-round \
                     ratios; target for floodgate <= 1.5)"
                );
            }
        }
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
    // Per call, each configuration that calls on every request: the default (a lease and
    // the over-limit cache looked up first) and those that look up less.
    for name in [FLOODGATE_GLOBAL, FLOODGATE_NO_QUOTA, FLOODGATE_LEAN] {
        let (Some(ours), Some(floor)) = (index(name), index(CALL_FLOOR)) else {
            continue;
        };
        let cpu = per_round(&|r| samples[ours][r].cpu_us - samples[floor][r].cpu_us);
        let (decided, requests) = calls[ours];
        println!(
            "{name}, per call: {cpu:+.1} µs of worker CPU over the wasm call floor \
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
                FLOODGATE_LEAN,
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
