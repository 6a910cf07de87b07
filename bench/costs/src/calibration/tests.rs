use super::*;
use crate::cost::ALLOCATE;

/// A request through `filters` filters, with `entries` other entries, `calls` local
/// replies, `instructions` and `http` HTTP calls.
fn cost(filters: u64, entries: u64, calls: u64, instructions: u64, http: u64) -> Cost {
    let mut c = Cost {
        instructions,
        ..Cost::default()
    };
    for _ in 0..filters {
        c.enter("proxy_on_request_headers");
    }
    for _ in 0..entries {
        c.enter("proxy_on_delete");
    }
    for _ in 0..calls {
        c.call("proxy_send_local_response");
    }
    for _ in 0..http {
        c.call("proxy_http_call");
    }
    c
}

/// `c` with `clock` clock reads and `maps` header maps (each allocated) more.
fn with_priced(mut c: Cost, clock: u64, maps: u64) -> Cost {
    for _ in 0..clock {
        c.call("proxy_get_current_time_nanoseconds");
    }
    for _ in 0..maps {
        c.call("proxy_get_header_map_pairs");
        c.enter(ALLOCATE);
    }
    c
}

const PRICES: Prices = [1.2, 2.2, 1.1, 0.9, 1.0];
const ALLOCATION: f64 = 0.7;

#[test]
fn the_fit_recovers_the_coefficients_of_exact_data() {
    let truth = Model {
        per_filter: 2.5,
        entry: 0.5,
        prices: PRICES,
        allocation: ALLOCATION,
        local_reply: 0.3,
        kilo_instructions: 0.02,
        http_call: 18.0,
        baseline: 30.0,
    };
    let rows: Vec<(Cost, f64)> = [
        (1, 1, 1, 200, 0, 1, 0),
        (8, 8, 8, 1700, 0, 0, 8),
        (1, 5, 4, 9000, 0, 1, 1),
        (1, 4, 8, 25000, 1, 2, 1),
        (8, 56, 8, 14000, 0, 0, 0),
        (1, 2, 0, 3000, 0, 0, 0),
    ]
    .iter()
    .map(|&(f, e, c, i, h, clock, maps)| {
        let cost = with_priced(cost(f, e, c, i, h), clock, maps);
        let y = truth.expected_us(&cost);
        (cost, y)
    })
    .collect();
    let fitted = fit(&rows, PRICES, ALLOCATION).expect("determined");
    for (got, want) in [
        (fitted.per_filter, truth.per_filter),
        (fitted.entry, truth.entry),
        (fitted.local_reply, truth.local_reply),
        (fitted.kilo_instructions, truth.kilo_instructions),
        (fitted.http_call, truth.http_call),
    ] {
        assert!((got - want).abs() < 1e-6, "{fitted:?}");
    }
    assert_eq!(fitted.prices, PRICES);
    assert_eq!(fitted.allocation, ALLOCATION);
}

#[test]
fn a_priced_call_costs_its_price_and_its_allocation_is_not_counted_again() {
    let model = Model {
        per_filter: 0.0,
        entry: 0.5,
        prices: PRICES,
        allocation: ALLOCATION,
        local_reply: 0.0,
        kilo_instructions: 0.0,
        http_call: 0.0,
        baseline: 1.0,
    };
    // One header map (2.2, its allocation held) and two clock reads (1.1 each).
    let c = with_priced(Cost::default(), 2, 1);
    assert!(
        (model.expected_us(&c) - 4.4).abs() < 1e-9,
        "{}",
        model.expected_us(&c)
    );
    // A found shared-data value's allocation is priced on its own, not as a callback.
    let mut found = Cost::default();
    found.call("proxy_get_shared_data");
    found.enter(ALLOCATE);
    assert!((model.expected_us(&found) - 1.6).abs() < 1e-9);
    // A callback is an entry at the fitted price.
    let mut callback = Cost::default();
    callback.enter("proxy_on_delete");
    assert!((model.expected_us(&callback) - 0.5).abs() < 1e-9);
}

#[test]
fn a_coefficient_the_noise_makes_negative_is_set_to_zero() {
    // Local replies cost nothing here, and one row's noise would make them negative.
    let rows = vec![
        (cost(1, 10, 0, 1000, 0), 5.5),
        (cost(0, 0, 0, 10000, 0), 10.0),
        (cost(0, 0, 10, 0, 0), -1.0),
        (cost(0, 0, 0, 0, 1), 20.0),
        (cost(8, 0, 0, 0, 0), 4.0),
    ];
    let fitted = fit(&rows, PRICES, ALLOCATION).expect("determined");
    assert_eq!(fitted.local_reply, 0.0, "{fitted:?}");
    assert!(
        fitted.entry > 0.0 && fitted.kilo_instructions > 0.0 && fitted.http_call > 0.0,
        "{fitted:?}"
    );
}

#[test]
fn rows_in_the_same_proportions_determine_nothing() {
    let rows = vec![(cost(1, 1, 1, 1000, 0), 1.0), (cost(2, 2, 2, 2000, 0), 2.0)];
    assert_eq!(fit(&rows, PRICES, ALLOCATION), None);
}

#[test]
fn prices_come_from_the_run_or_scaled_from_the_measured_ones() {
    let priced = "\
| no filter | 1 | 1 ms | 1 ms | 38.6 µs | +0.0 µs | 1 µs | 1 µs | +0 µs |
host call header: +1.500 µs of worker CPU per call (median of per-round differences)
host call pairs: +2.000 µs of worker CPU per call
host call clock: +1.000 µs of worker CPU per call
host call shared-get: +0.500 µs of worker CPU per call
host call shared-set: -0.100 µs of worker CPU per call
";
    assert_eq!(bench_prices(priced), [1.5, 2.0, 1.0, 0.5, -0.1]);
    // Without its own prices (a line missing), the measured ones at half the baseline.
    let unpriced = priced.replace("host call clock", "host call other");
    let (measured, baseline) = MEASURED_PRICES;
    assert!((baseline / 2.0 - 38.6).abs() < 1e-9);
    let scaled = bench_prices(&unpriced);
    for (got, want) in scaled.iter().zip(measured) {
        assert!((got - want / 2.0).abs() < 1e-9, "{scaled:?}");
    }
}

#[test]
fn a_value_handed_back_is_priced_as_a_present_header_less_a_missing_one() {
    let both = "\
| no filter | 1 | 1 ms | 1 ms | 30.65 µs | +0.0 µs | 1 µs | 1 µs | +0 µs |
host call header: +0.210 (+0.1 to +0.3) µs of worker CPU per call
host call value: +1.000 (+0.9 to +1.1) µs of worker CPU per call
";
    assert!((bench_allocation(both) - 0.79).abs() < 1e-9);
    // Without the present header's row, the measured price at the run's baseline (half).
    let (measured, baseline) = MEASURED_ALLOCATION;
    assert!((baseline / 2.0 - 30.65).abs() < 1e-9);
    let missing = both.replace("host call value", "host call other");
    assert!((bench_allocation(&missing) - measured / 2.0).abs() < 1e-9);
}

#[test]
fn bench_tables_are_read_as_added_cpu_per_request() {
    let output = "\
| configuration | req/s | p50 | p99 | worker CPU/req | CPU added | p50 alone | p99 alone | p50 added alone |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| no filter | 34073 | 0.45 ms | 0.76 ms | 29.1 µs | +0.0 µs | 151 µs | 160 µs | +0 µs |
| floodgate local, allowed | 29026 | 0.54 ms | 0.78 ms | 34.4 µs | +5.4 µs | 169 µs | 180 µs | +18 µs |
| native local_ratelimit, all rejected | 71996 | 0.21 ms | 0.30 ms | 13.9 µs | - | 64 µs | 70 µs | - |
| floodgate local, all rejected | 55503 | 0.28 ms | 0.38 ms | 18.1 µs | - | 75 µs | 80 µs | - |

| configuration | worker CPU/req | CPU added per filter |
|---|---:|---:|
| floodgate local, allowed x8 | 57.0 µs | +3.49 µs |
";
    let figures = bench_figures(output);
    assert_eq!(
        figures.len(),
        2,
        "single allowed filters are left out: {figures:?}"
    );
    assert!((figures["local rejected"] - 4.2).abs() < 1e-9);
    assert!((figures["local allowed x8"] - 27.92).abs() < 1e-9);
    assert_eq!(bench_baseline(output), Some(29.1));
}
