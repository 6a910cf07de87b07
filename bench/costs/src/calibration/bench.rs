//! Reading `make bench`'s printed output: the figures the model is fitted to, the run's
//! baseline, and the prices of the host-call kinds when the run measured them.

use super::{Prices, MEASURED_ALLOCATION, MEASURED_PRICES, PRICED};
use std::collections::BTreeMap;

/// Which cost path each `make bench` configuration measures, and how its figure is read:
/// (bench row, path, chained copies). Rejecting rows are taken against the native
/// `local_ratelimit`'s rejecting row (both send a local reply; the difference is the
/// filter). Single allowed filters are left out (what they add is the size of the
/// machine's noise: their chained rows measure the same), and so is the leased row (its
/// calls are amortised over the requests that spend a grant, at a rate only the run
/// knows).
pub const ROWS: &[(&str, &str, u32)] = &[
    ("floodgate local, all rejected", "local rejected", 1),
    ("raw-ABI reject floor (one local reply)", "reject-floor", 1),
    (
        "raw-ABI limit floor, rejecting (header map, clock, read, reply)",
        "limit-reject-floor",
        1,
    ),
    ("floodgate global -> floodgate-server", "global", 1),
    (
        "floodgate global, cache off -> floodgate-server",
        "global cache off",
        1,
    ),
    (
        "floodgate global with a fallback -> floodgate-server",
        "global fallback",
        1,
    ),
    ("floodgate global, over limit (cached)", "global cached", 1),
    ("wasm call floor -> floodgate-server", "call-floor", 1),
    ("raw-ABI no-op wasm (reads 1 header) x8", "raw-noop x8", 8),
    ("no-op wasm (reads 1 header) x8", "sdk-noop x8", 8),
    ("floodgate local, allowed x8", "local allowed x8", 8),
    (
        "raw-ABI limit floor (header map, clock, read, write) x8",
        "limit-floor x8",
        8,
    ),
];

/// The native rejecting row the rejecting rows are taken against.
pub const NATIVE_REJECTED: &str = "native local_ratelimit, all rejected";

/// The worker CPU of a request with no filter (µs) in `make bench`'s printed table.
pub fn bench_baseline(output: &str) -> Option<f64> {
    let line = output.lines().find(|l| l.starts_with("| no filter |"))?;
    let cell = line.split('|').nth(5)?.trim();
    cell.trim_end_matches(" µs").parse().ok()
}

/// Each configuration's added worker CPU per request (µs) from `make bench`'s printed
/// tables: "CPU added" for allowed rows (× copies for chained ones), CPU per request
/// minus the native rejecting row's for rejecting ones. Keyed by cost path.
pub fn bench_figures(output: &str) -> BTreeMap<&'static str, f64> {
    let cells: BTreeMap<String, Vec<String>> = output
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("|---"))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            (cells[0].clone(), cells[1..].to_vec())
        })
        .collect();
    let micros = |text: &str| {
        text.trim_end_matches(" µs")
            .trim_start_matches('+')
            .parse::<f64>()
            .ok()
    };
    let native_rejected = cells.get(NATIVE_REJECTED).and_then(|c| micros(c.get(3)?));
    let mut out = BTreeMap::new();
    for (row, path, copies) in ROWS {
        let Some(c) = cells.get(*row) else { continue };
        let figure = if *copies > 1 {
            c.get(1)
                .and_then(|v| micros(v))
                .map(|per| per * f64::from(*copies))
        } else if c.get(4).map(String::as_str) == Some("-") {
            c.get(3)
                .and_then(|v| micros(v))
                .zip(native_rejected)
                .map(|(ours, native)| ours - native)
        } else {
            c.get(4).and_then(|v| micros(v))
        };
        if let Some(figure) = figure {
            out.insert(*path, figure);
        }
    }
    out
}

/// µs per call of each [`PRICED`] kind, from the run's `host call KIND: +X µs` lines when
/// it priced every kind; otherwise [`MEASURED_PRICES`] scaled to the run's baseline (the
/// kinds' share of a proxied request carries over, their µs do not).
pub fn bench_prices(output: &str) -> Prices {
    let mut own = [0.0; PRICED.len()];
    let mut all = true;
    for (price, kind) in own.iter_mut().zip(&PRICED) {
        match line_price(output, kind.kind) {
            Some(us) => *price = us,
            None => all = false,
        }
    }
    if all {
        return own;
    }
    let (measured, measured_baseline) = MEASURED_PRICES;
    let scale = to_this_run(output, measured_baseline);
    measured.map(|us| us * scale)
}

/// What a value handed back costs (µs): the run's `host call value` line (a present
/// header) less its `host call header` line (the same header missing) when it printed
/// both; otherwise [`MEASURED_ALLOCATION`] scaled to the run's baseline.
pub fn bench_allocation(output: &str) -> f64 {
    if let (Some(present), Some(missing)) =
        (line_price(output, "value"), line_price(output, "header"))
    {
        return present - missing;
    }
    let (measured, measured_baseline) = MEASURED_ALLOCATION;
    measured * to_this_run(output, measured_baseline)
}

/// What carries a µs figure measured at `measured_baseline` over to the run in `output`:
/// the ratio of their baselines (a figure's share of a proxied request carries over, its
/// µs do not); 1 when the output has no baseline.
fn to_this_run(output: &str, measured_baseline: f64) -> f64 {
    bench_baseline(output).map_or(1.0, |b| b / measured_baseline)
}

/// The µs per call of `make bench`'s `host call KIND: +X µs` line, if it printed one.
fn line_price(output: &str, kind: &str) -> Option<f64> {
    let head = format!("host call {kind}: ");
    let line = output.lines().find(|l| l.starts_with(&head))?;
    let figure = line[head.len()..].split(' ').next()?;
    figure.trim_start_matches('+').parse::<f64>().ok()
}
