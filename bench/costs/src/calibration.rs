//! From counts to microseconds: a linear model of Envoy 1.40 (V8) worker CPU per request,
//! fitted by least squares to `make bench` figures.
//!
//! A request's expected added CPU is
//!
//! `filters × f + callbacks × e + allocations × a + Σ priced calls × their price +
//! other calls × c + instructions / 1000 × k + http_calls × h`:
//!
//! - `f` per wasm filter the request passes, whatever the filter does: Envoy makes a
//!   context per filter per request and runs its C++ side even for callbacks the module
//!   does not export (without this term the raw-ABI no-op chained ×8 was 22 µs above its
//!   fit);
//! - `e` per callback Envoy enters;
//! - `a` per value handed back (the allocation the host enters the module for), priced
//!   alone as a present header's read less a missing one's, except where a priced
//!   call's price already holds it (the header map's);
//! - the host calls floodgate makes on every path are priced one kind at a time
//!   ([`PRICED`]): `make bench` times a raw-ABI module making 16 calls of one kind per
//!   request beside itself making none, which tells the kinds apart where the
//!   configurations cannot (a local request always reads the header map, the clock and
//!   shared data, and writes it back, so a fit sees only their average);
//! - `r` per local reply (`proxy_send_local_response`);
//! - `k` per thousand wasm instructions;
//! - `h` per `proxy_http_call` and what taking its answer takes ([`ANSWER_CALLS`]: they
//!   come with every call, so no run can tell them from it), which includes everything
//!   Envoy does for the call (its HTTP/2 client, the codec, the answer);
//! - a host call of any other kind at the priced kinds' mean price (no configuration
//!   `make bench` runs makes one).
//!
//! The prices are taken as measured and the rest is fitted. `fit` prints each
//! configuration's residual, which says how far to trust the model.

use crate::cost::{Cost, ALLOCATE};

mod bench;
pub use bench::{
    bench_allocation, bench_baseline, bench_figures, bench_prices, NATIVE_REJECTED, ROWS,
};

/// A host-call kind priced alone by `make bench`'s `host calls: KIND x16` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priced {
    /// Its name in `make bench`'s output.
    pub kind: &'static str,
    /// The import it calls.
    pub import: &'static str,
    /// Allocations (VM entries) each call of the priced row made, which its price holds.
    pub allocations: u64,
}

/// The kinds priced alone, in `make bench`'s order. The header row reads a missing
/// header and the shared-data row a missing key (nothing handed back), so a found value's
/// allocation is priced on its own ([`Model::allocation`]); the header map always comes
/// back, allocated.
pub const PRICED: [Priced; 5] = [
    Priced {
        kind: "header",
        import: "proxy_get_header_map_value",
        allocations: 0,
    },
    Priced {
        kind: "pairs",
        import: "proxy_get_header_map_pairs",
        allocations: 1,
    },
    Priced {
        kind: "clock",
        import: "proxy_get_current_time_nanoseconds",
        allocations: 0,
    },
    Priced {
        kind: "shared-get",
        import: "proxy_get_shared_data",
        allocations: 0,
    },
    Priced {
        kind: "shared-set",
        import: "proxy_set_shared_data",
        allocations: 0,
    },
];

/// The host calls that take a call's answer and resume the request: counted in the
/// `proxy_http_call` coefficient.
pub const ANSWER_CALLS: [&str; 3] = [
    "proxy_get_buffer_bytes",
    "proxy_set_effective_context",
    "proxy_continue_stream",
];

/// The local reply's import.
const LOCAL_REPLY: &str = "proxy_send_local_response";

/// µs per call of each [`PRICED`] kind, in its order.
pub type Prices = [f64; PRICED.len()];

/// What a value handed back costs beyond the call that asked for it (µs): the `value`
/// row of `BENCH_ONLY="host calls" BENCH_ROUNDS=8 make bench` on 2026-12-07 at 21:02 UTC
/// (a present header, 1.00 µs a call) less its `header` row (the same header missing,
/// 0.21 µs), and that run's baseline (61.3 µs): used, scaled to a run's own baseline, when
/// that run did not price both rows itself.
pub const MEASURED_ALLOCATION: (f64, f64) = (0.79, 61.3);

/// The prices of `BENCH_ONLY="host calls" BENCH_ROUNDS=8 make bench` on 2026-12-04 at
/// 03:45 UTC, and that run's no-filter baseline (77.2 µs): used, scaled to a run's own
/// baseline, when that run did not price the kinds itself.
pub const MEASURED_PRICES: (Prices, f64) = ([1.248, 2.227, 1.116, 0.865, 0.978], 77.2);

/// The model: coefficients in µs of the run it was fitted to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Per wasm filter a request passes.
    pub per_filter: f64,
    /// Per callback Envoy enters.
    pub entry: f64,
    /// Per call of each [`PRICED`] kind (measured, not fitted).
    pub prices: Prices,
    /// Per value handed back, its allocation entered, where no priced call's price holds
    /// it (measured, not fitted).
    pub allocation: f64,
    /// Per local reply (`proxy_send_local_response`).
    pub local_reply: f64,
    /// Per thousand wasm instructions.
    pub kilo_instructions: f64,
    /// Per `proxy_http_call` with its [`ANSWER_CALLS`], Envoy's side of the call included.
    pub http_call: f64,
    /// What a request with no filter cost the worker in the same run: the machine's
    /// speed then, against which the coefficients carry over to another machine.
    pub baseline: f64,
}

/// The model fitted from `make bench` (`docs/costs.md` has the run and each
/// configuration's residual): `BENCH_ROUNDS=8 make bench` on 2026-12-07 at 23:45 UTC,
/// modules from `92efe8b` (the counts are of the very modules it timed), every price
/// from the run's own `host calls` rows, a value handed back as its `value` row less its
/// `header` row. A slow, noisy day: a request with no filter cost its worker 122.6 µs,
/// against 53.7 µs at 16:07 the same day and 29.1 µs on the quietest day measured. Read
/// these as fractions of [`Model::baseline`] ([`Model::share`]) rather than as
/// microseconds anywhere else: as shares, this fit and the 16:07 one (allocations then
/// fitted as entries) agree within a factor of about 1.3 on every coefficient but the
/// filter's (3.4 % against 1.6 %).
///
/// Fits from different runs disagree by factors in µs (2026-12-04: a filter 3.8 µs, an
/// entry 0, a thousand instructions 0.64 µs, at a 73.1 µs baseline): few rows, noisy,
/// with features that move together. The model ranks paths; the counts are what is held.
pub const FITTED: Option<Model> = Some(Model {
    per_filter: 4.199,
    entry: 0.627,
    prices: [0.608, 2.374, 0.755, 0.789, -0.001],
    allocation: 1.698,
    local_reply: 14.734,
    kilo_instructions: 0.395,
    http_call: 136.400,
    baseline: 122.6,
});

/// Features the fit weighs, in this order: filters, callbacks, local replies, thousands
/// of instructions, HTTP calls.
const FITTED_FEATURES: usize = 5;

/// `cost`'s µs at `prices` and `allocation` (fixed), and its fitted features.
fn features(cost: &Cost, prices: &Prices, allocation: f64) -> (f64, [f64; FITTED_FEATURES]) {
    let count = |import: &str| cost.host_calls.get(import).copied().unwrap_or(0);
    let http = count("proxy_http_call");
    let replies = count(LOCAL_REPLY);
    let answers: u64 = ANSWER_CALLS.iter().map(|import| count(import)).sum();
    let mut fixed_us = 0.0;
    let mut priced_calls = 0;
    let mut held_allocations = 0;
    for (kind, price) in PRICED.iter().zip(prices) {
        let n = count(kind.import);
        fixed_us += n as f64 * price;
        priced_calls += n;
        held_allocations += n * kind.allocations;
    }
    let others = cost.calls() - http - replies - answers - priced_calls;
    fixed_us += others as f64 * prices.iter().sum::<f64>() / prices.len() as f64;
    // A request enters the filter's request headers once per filter it passes.
    let filters = cost
        .entries
        .get("proxy_on_request_headers")
        .copied()
        .unwrap_or(0);
    let allocations = cost.entries.get(ALLOCATE).copied().unwrap_or(0);
    fixed_us += allocations.saturating_sub(held_allocations) as f64 * allocation;
    let callbacks = cost.vm_entries() - allocations;
    (
        fixed_us,
        [
            filters as f64,
            callbacks as f64,
            replies as f64,
            cost.instructions as f64 / 1000.0,
            http as f64,
        ],
    )
}

impl Model {
    fn coefficients(&self) -> [f64; FITTED_FEATURES] {
        [
            self.per_filter,
            self.entry,
            self.local_reply,
            self.kilo_instructions,
            self.http_call,
        ]
    }

    /// The expected added worker CPU of `cost`, µs.
    pub fn expected_us(&self, cost: &Cost) -> f64 {
        let (priced, f) = features(cost, &self.prices, self.allocation);
        priced
            + f.iter()
                .zip(self.coefficients())
                .map(|(x, b)| x * b)
                .sum::<f64>()
    }

    /// [`Model::expected_us`] as a share of a request with no filter (1.0: as much again).
    pub fn share(&self, cost: &Cost) -> f64 {
        self.expected_us(cost) / self.baseline
    }
}

/// The least-squares model for (cost, measured µs) pairs with the priced kinds at
/// `prices` and a value handed back at `allocation`, no coefficient below zero (a
/// negative cost is noise: that feature is set to 0 and the rest fitted again); `None`
/// when the pairs cannot determine it (too few, or always in the same proportions).
pub fn fit(rows: &[(Cost, f64)], prices: Prices, allocation: f64) -> Option<Model> {
    let xy: Vec<([f64; FITTED_FEATURES], f64)> = rows
        .iter()
        .map(|(cost, y)| {
            let (priced, x) = features(cost, &prices, allocation);
            (x, y - priced)
        })
        .collect();
    // A feature no row has says nothing: its coefficient is 0.
    let mut active = [false; FITTED_FEATURES];
    for (i, on) in active.iter_mut().enumerate() {
        *on = xy.iter().any(|(x, _)| x[i] != 0.0);
    }
    loop {
        let b = solve(&xy, &active)?;
        match (0..FITTED_FEATURES).find(|&i| active[i] && b[i] < 0.0) {
            Some(negative) => active[negative] = false,
            None => {
                return Some(Model {
                    per_filter: b[0],
                    entry: b[1],
                    prices,
                    allocation,
                    local_reply: b[2],
                    kilo_instructions: b[3],
                    http_call: b[4],
                    baseline: f64::NAN,
                })
            }
        }
    }
}

/// Least squares over the `active` features (the others 0): the normal equations
/// (XᵀX) b = Xᵀy by Gaussian elimination with pivoting.
fn solve(
    rows: &[([f64; FITTED_FEATURES], f64)],
    active: &[bool; FITTED_FEATURES],
) -> Option<[f64; FITTED_FEATURES]> {
    let index: Vec<usize> = (0..FITTED_FEATURES).filter(|&i| active[i]).collect();
    let n = index.len();
    let mut a = vec![vec![0.0f64; n + 1]; n];
    for (x, y) in rows {
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
    let mut b = [0.0; FITTED_FEATURES];
    for (r, &i) in index.iter().enumerate() {
        b[i] = a[r][n] / a[r][r];
    }
    Some(b)
}

#[cfg(test)]
mod tests;
