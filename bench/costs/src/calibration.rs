//! From counts to microseconds: a linear model of Envoy 1.40 (V8) worker CPU per request,
//! fitted by least squares to `make bench` figures.
//!
//! A request's expected added CPU is `entries × e + calls × c + instructions / 1000 × k +
//! http_calls × h`: `e` per entry into the VM (callbacks and allocations), `c` per host
//! call other than `proxy_http_call`, `k` per thousand wasm instructions, `h` per
//! `proxy_http_call`, which includes everything Envoy does for the call (its HTTP/2
//! client, the codec, the answer). Host calls of other kinds appear together in every
//! configuration `make bench` runs (a local request always reads the clock and shared
//! data and writes it back), so their costs cannot be told apart from these runs: `c` is
//! their average. `fit` prints each configuration's residual, which says how far to trust
//! the model.

use crate::cost::Cost;
use std::collections::BTreeMap;

/// The fitted coefficients, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Per VM entry.
    pub entry: f64,
    /// Per host call other than `proxy_http_call`.
    pub call: f64,
    /// Per thousand wasm instructions.
    pub kilo_instructions: f64,
    /// Per `proxy_http_call`, Envoy's side of the call included.
    pub http_call: f64,
    /// What a request with no filter cost the worker in the same run: the machine's
    /// speed then, against which the coefficients carry over to another machine.
    pub baseline: f64,
}

/// The model fitted from `make bench` (`docs/costs.md` has the run and each
/// configuration's residual): `BENCH_ROUNDS=8 make bench` on 2026-12-04, modules from
/// `01bf14f`, nothing else running, on a slow day (a request with no filter cost its
/// worker 73.1 µs, against 29.1 µs on the quietest day measured), so read these as
/// fractions of [`Model::baseline`] ([`Model::share`]) rather than as microseconds
/// anywhere else.
pub const FITTED: Option<Model> = Some(Model {
    entry: 0.476,
    call: 2.112,
    kilo_instructions: 0.279,
    http_call: 83.548,
    baseline: 73.1,
});

/// A cost's figures in the model's order.
fn features(cost: &Cost) -> [f64; 4] {
    let http = cost.host_calls.get("proxy_http_call").copied().unwrap_or(0);
    [
        cost.vm_entries() as f64,
        (cost.calls() - http) as f64,
        cost.instructions as f64 / 1000.0,
        http as f64,
    ]
}

impl Model {
    /// The expected added worker CPU of `cost`, µs.
    pub fn expected_us(&self, cost: &Cost) -> f64 {
        let f = features(cost);
        f[0] * self.entry + f[1] * self.call + f[2] * self.kilo_instructions + f[3] * self.http_call
    }

    /// [`Model::expected_us`] as a share of a request with no filter (1.0: as much again).
    pub fn share(&self, cost: &Cost) -> f64 {
        self.expected_us(cost) / self.baseline
    }
}

/// The least-squares model for (cost, measured µs) pairs, no coefficient below zero (a
/// negative cost is noise: that feature is set to 0 and the rest fitted again); `None`
/// when the pairs cannot determine it (too few, or always in the same proportions).
pub fn fit(rows: &[(Cost, f64)]) -> Option<Model> {
    let mut active = [true; 4];
    loop {
        let b = solve(rows, &active)?;
        match (0..4).find(|&i| active[i] && b[i] < 0.0) {
            Some(negative) => active[negative] = false,
            None => {
                return Some(Model {
                    entry: b[0],
                    call: b[1],
                    kilo_instructions: b[2],
                    http_call: b[3],
                    baseline: f64::NAN,
                })
            }
        }
    }
}

/// Least squares over the `active` features (the others 0): the normal equations
/// (XᵀX) b = Xᵀy by Gaussian elimination with pivoting.
fn solve(rows: &[(Cost, f64)], active: &[bool; 4]) -> Option<[f64; 4]> {
    let index: Vec<usize> = (0..4).filter(|&i| active[i]).collect();
    let n = index.len();
    let mut a = vec![vec![0.0f64; n + 1]; n];
    for (cost, y) in rows {
        let x = features(cost);
        for (r, &i) in index.iter().enumerate() {
            for (c, &j) in index.iter().enumerate() {
                a[r][c] += x[i] * x[j];
            }
            a[r][n] += x[i] * y;
        }
    }
    for col in 0..n {
        let pivot = (col..n).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (value, above) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * above;
                }
            }
        }
    }
    let mut b = [0.0; 4];
    for (r, &i) in index.iter().enumerate() {
        b[i] = a[r][n] / a[r][r];
    }
    Some(b)
}

/// Which cost path each `make bench` configuration measures, and how its figure is read:
/// (bench row, path, chained copies). Rejecting rows are taken against the native
/// `local_ratelimit`'s rejecting row (both send a local reply; the difference is the
/// filter). Single allowed filters are left out (what they add is the size of the
/// machine's noise: their chained rows measure the same), and so is the leased row (its
/// calls are amortised over the requests that spend a grant, at a rate only the run
/// knows).
pub const ROWS: &[(&str, &str, u32)] = &[
    ("floodgate local, all rejected", "local rejected", 1),
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

#[cfg(test)]
mod tests;
