//! Criterion: one decision of each algorithm alone (pure math, no store, no locking), and
//! the counter fingerprint every limited descriptor costs.
//!
//! Steady state: a limit of 1,000 per second with a request every 1.1 ms, so every call
//! is admitted and the state keeps moving (windows roll, the log trims, the bucket refills).

use criterion::{criterion_group, criterion_main, Criterion};
use floodgate_server::algorithm::{decide, Algorithm, Limit, State, Unit};
use floodgate_server::store::CounterKey;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

fn algorithms(c: &mut Criterion) {
    let rpu = NonZeroU32::new(1_000).unwrap_or(NonZeroU32::MIN);
    let all = [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket { burst: rpu },
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
    ];
    let mut group = c.benchmark_group("decide");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    for algorithm in all {
        let limit = Limit {
            requests_per_unit: rpu,
            unit: Unit::Second,
            algorithm,
        };
        let mut state = State::fresh(&limit);
        let mut now: u64 = 1_700_000_000_000_000_000;
        group.bench_function(algorithm.name(), |b| {
            b.iter(|| {
                now += 1_100_000;
                let (d, u) = decide(black_box(&state), now, &limit, 1);
                state.apply(u);
                black_box(d)
            })
        });
    }
    group.finish();
}

/// The counter's fingerprint (SHA-256 of the descriptor), computed once per limited
/// descriptor of every request: a typical descriptor, and a 50 KB value.
fn counter_key(c: &mut Criterion) {
    let mut group = c.benchmark_group("counter_key");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    group.bench_function("two_entries", |b| {
        b.iter(|| {
            CounterKey::new(
                black_box("web"),
                [("remote_address", "10.0.0.1"), ("path", "/api/v1/orders")],
            )
        })
    });
    let big = "v".repeat(50 * 1024);
    group.bench_function("value_50k", |b| {
        b.iter(|| CounterKey::new(black_box("web"), [("tenant", big.as_str())]))
    });
    group.finish();
}

criterion_group!(benches, algorithms, counter_key);
criterion_main!(benches);
