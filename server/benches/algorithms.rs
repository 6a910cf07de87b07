//! Criterion: one decision of each algorithm alone (pure math, no store, no locking), and
//! the counter fingerprint every limited descriptor costs.
//!
//! Steady state: a limit of 1,000 per second with a request every 1.1 ms, so every call
//! is admitted and the state keeps moving (windows roll, the log trims, the bucket refills).

use criterion::{criterion_group, criterion_main, Criterion};
use floodgate_server::algorithm::{decide, Algorithm, Limit, State, Unit};
use floodgate_server::store::CounterKey;
use std::hint::black_box;
use std::num::{NonZeroU16, NonZeroU32};
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
            unit_multiplier: NonZeroU16::MIN,
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

/// A configuration both the old (trailing `*` only) and the new matcher load: 20 wildcard
/// paths under a tenant, exact values, a key-only fallback.
fn lookup_config(extra: &str) -> Option<floodgate_server::config::Config> {
    let mut yaml = String::from(
        "domain: web\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: 9 }\n    descriptors:\n",
    );
    for i in 0..20 {
        yaml.push_str(&format!(
            "      - key: path\n        value: /api/v{i}/*\n        rate_limit: {{ unit: second, requests_per_unit: 5 }}\n"
        ));
    }
    yaml.push_str(
        "      - key: path\n        value: /healthz\n        rate_limit: { unlimited: true }\n",
    );
    yaml.push_str(
        "      - key: path\n        rate_limit: { unit: second, requests_per_unit: 7 }\n",
    );
    yaml.push_str(extra);
    let files = floodgate_server::config::source::Files {
        root: "web.yaml".into(),
        files: vec![("web.yaml".into(), yaml)],
    };
    floodgate_server::config::parse(&files)
        .map_err(|e| eprintln!("bench configuration refused: {e}"))
        .ok()
}

/// Matching one request descriptor against the tree (what every descriptor costs before
/// any counter): an exact value, the last of 20 wildcards, the key-only fallback.
fn lookup(c: &mut Criterion) {
    let Some(config) = lookup_config("") else {
        return;
    };
    let Some(domain) = config.domain("web") else {
        return;
    };
    let mut group = c.benchmark_group("lookup");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    for (name, path) in [
        ("exact", "/healthz"),
        ("wildcard_20th", "/api/v19/orders/42"),
        ("key_only", "/other/path"),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                domain
                    .find(black_box([("tenant", "acme"), ("path", path)]))
                    .is_some()
            })
        });
    }
    group.finish();
}

/// Wildcards with `*` in the middle (as the reference matches them): one after the
/// 20 prefix wildcards, and a pattern of many stars against a long value that misses it.
fn lookup_wildcards(c: &mut Criterion) {
    let extra = "      - key: path\n        value: /files/*/v*/raw\n        rate_limit: { unit: second, requests_per_unit: 3 }\n      - key: path\n        value: '*a*a*a*a*a*a*a*a*b'\n        rate_limit: { unit: second, requests_per_unit: 3 }\n";
    let Some(config) = lookup_config(extra) else {
        return;
    };
    let Some(domain) = config.domain("web") else {
        return;
    };
    let long = "a".repeat(4096);
    let mut group = c.benchmark_group("lookup");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    for (name, path) in [
        ("middle_wildcard", "/files/abc/v2/raw"),
        ("many_stars_4k_value", long.as_str()),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                domain
                    .find(black_box([("tenant", "acme"), ("path", path)]))
                    .is_some()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, algorithms, counter_key, lookup, lookup_wildcards);
criterion_main!(benches);
