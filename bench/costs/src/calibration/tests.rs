use super::*;

fn cost(entries: u64, calls: u64, instructions: u64, http: u64) -> Cost {
    let mut c = Cost {
        instructions,
        ..Cost::default()
    };
    for _ in 0..entries {
        c.enter("proxy_on_request_headers");
    }
    for _ in 0..calls {
        c.call("proxy_get_shared_data");
    }
    for _ in 0..http {
        c.call("proxy_http_call");
    }
    c
}

#[test]
fn the_fit_recovers_the_coefficients_of_exact_data() {
    let truth = Model {
        entry: 0.5,
        call: 0.3,
        kilo_instructions: 0.02,
        http_call: 18.0,
        baseline: 30.0,
    };
    let rows: Vec<(Cost, f64)> = [
        (2, 1, 200, 0),
        (16, 8, 1700, 0),
        (6, 4, 9000, 0),
        (5, 8, 25000, 1),
        (64, 8, 14000, 0),
    ]
    .iter()
    .map(|&(e, c, i, h)| {
        let cost = cost(e, c, i, h);
        let y = truth.expected_us(&cost);
        (cost, y)
    })
    .collect();
    let fitted = fit(&rows).expect("determined");
    for (got, want) in [
        (fitted.entry, truth.entry),
        (fitted.call, truth.call),
        (fitted.kilo_instructions, truth.kilo_instructions),
        (fitted.http_call, truth.http_call),
    ] {
        assert!((got - want).abs() < 1e-6, "{fitted:?}");
    }
}

#[test]
fn a_coefficient_the_noise_makes_negative_is_set_to_zero() {
    // Calls cost nothing here, and one row's noise would make them negative.
    let rows = vec![
        (cost(10, 0, 1000, 0), 5.0),
        (cost(0, 0, 10000, 0), 10.0),
        (cost(0, 10, 0, 0), -1.0),
        (cost(0, 0, 0, 1), 20.0),
    ];
    let fitted = fit(&rows).expect("determined");
    assert_eq!(fitted.call, 0.0, "{fitted:?}");
    assert!(
        fitted.entry > 0.0 && fitted.kilo_instructions > 0.0 && fitted.http_call > 0.0,
        "{fitted:?}"
    );
}

#[test]
fn rows_in_the_same_proportions_determine_nothing() {
    let rows = vec![(cost(1, 1, 1000, 0), 1.0), (cost(2, 2, 2000, 0), 2.0)];
    assert_eq!(fit(&rows), None);
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
