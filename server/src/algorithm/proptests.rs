//! Property tests: each algorithm against an independent model of its definition, with a
//! fake clock (times are generated, never read). The token bucket's own properties (a
//! token-count model, clients at the rate) are the shared math's, in
//! `floodgate_common::gcra`'s suite on this server's units; here it takes part in those of
//! every algorithm (exact retry, check-only probes). Every model property runs with windows of
//! one second and of several seconds (`unit_multiplier`: 30 s, 5 min, 90 min, 7 s), the
//! model's window being the whole `unit × unit_multiplier`, epoch-aligned.

use super::test_support::limit_per;
use super::{decide, Algorithm, Decision, Limit, State, Unit};
use proptest::prelude::*;
use std::num::NonZeroU32;

const S: u64 = 1_000_000_000;

/// A window of `m` seconds, as `unit: second` with `unit_multiplier: m`.
fn window_multiplier() -> impl Strategy<Value = u16> {
    prop_oneof![Just(1u16), Just(30), Just(300), Just(5400), Just(7)]
}

/// A window multiplier and a run for it: request times (non-decreasing, ns) and their hits
/// (0: a check-only probe, which is admitted when one hit fits and counts nothing).
fn windowed_run() -> impl Strategy<Value = (u16, Vec<(u64, u64)>)> {
    window_multiplier().prop_flat_map(|m| (Just(m), run_strategy(u64::from(m) * S)))
}

/// A run for a window of `p` ns.
fn run_strategy(p: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..(3 * p / 2), 0u64..=3), 1..80).prop_map(move |steps| {
        let mut now = 1_000 * p + 123_456_789;
        steps
            .into_iter()
            .map(|(gap, hits)| {
                // Mostly small gaps so limits are reached, sometimes long ones.
                now += if gap > p { gap } else { gap / 50 };
                (now, hits)
            })
            .collect()
    })
}

/// `rpu` per window of `m` seconds.
fn limit_s(rpu: u32, m: u16, algorithm: Algorithm) -> Limit {
    limit_per(rpu, m, Unit::Second, algorithm)
}

/// Runs `requests` through `decide`, returning each decision.
fn replay(l: &Limit, requests: &[(u64, u64)]) -> Vec<Decision> {
    let mut state = State::fresh(l);
    requests
        .iter()
        .map(|&(now, hits)| {
            let (d, u) = decide(&state, now, l, hits);
            // Exact retry time, what the filter's over-limit cache relies on: a one-hit
            // request is admitted then, and not a nanosecond before (0: one hit fits now).
            if !d.allowed {
                let one_hit_at = |t: u64| decide(&state, t, l, 1).0.allowed;
                assert!(
                    one_hit_at(now + d.reset_in_ns),
                    "{l:?} at {now} + {}",
                    d.reset_in_ns
                );
                if d.reset_in_ns > 0 {
                    assert!(
                        !one_hit_at(now + d.reset_in_ns - 1),
                        "{l:?} at {now} + {} - 1",
                        d.reset_in_ns
                    );
                }
            }
            state.apply(u);
            d
        })
        .collect()
}

/// The state after `requests`.
fn replay_state(l: &Limit, requests: &[(u64, u64)]) -> State {
    let mut state = State::fresh(l);
    for &(now, hits) in requests {
        state.apply(decide(&state, now, l, hits).1);
    }
    state
}

/// One of the four algorithms, by index (a token bucket's burst follows the limit).
fn any_algorithm(i: usize, rpu: u32) -> Algorithm {
    match i {
        0 => Algorithm::FixedWindow,
        1 => Algorithm::TokenBucket {
            burst: NonZeroU32::new(rpu).unwrap(),
        },
        2 => Algorithm::SlidingWindowLog,
        _ => Algorithm::SlidingWindowCounter,
    }
}

/// Hits admitted in the window `(end − p, end]`.
fn admitted_in(p: u64, requests: &[(u64, u64)], ds: &[Decision], end: u64) -> u64 {
    requests
        .iter()
        .zip(ds)
        .filter(|((t, _), d)| d.allowed && *t + p > end && *t <= end)
        .map(|((_, h), _)| h)
        .sum()
}

/// The most hits admitted in any window of length `p` (windows ending at an admission).
fn worst_window(p: u64, requests: &[(u64, u64)], ds: &[Decision]) -> u64 {
    requests
        .iter()
        .map(|&(t, _)| admitted_in(p, requests, ds, t))
        .max()
        .unwrap_or(0)
}

proptest! {
    #[test]
    fn fixed_window_counts_per_aligned_window(rpu in 1u32..20, (m, reqs) in windowed_run()) {
        let l = limit_s(rpu, m, Algorithm::FixedWindow);
        let p = l.period_ns();
        let ds = replay(&l, &reqs);
        for (i, &(t, hits)) in reqs.iter().enumerate() {
            // Windows of the whole length, aligned to the epoch: [k × p, (k + 1) × p).
            let used: u64 = reqs[..i].iter().zip(&ds)
                .filter(|((u, _), d)| d.allowed && u / p == t / p)
                .map(|((_, h), _)| h).sum();
            prop_assert_eq!(ds[i].allowed, used + hits.max(1) <= u64::from(rpu));
            if ds[i].allowed {
                prop_assert_eq!(ds[i].reset_in_ns, (t / p + 1) * p - t, "until the window ends");
            }
        }
        // Across a boundary it may admit twice the limit, never more.
        prop_assert!(worst_window(p, &reqs, &ds) <= 2 * u64::from(rpu));
    }

    #[test]
    fn sliding_log_is_exact_over_any_window(rpu in 1u32..20, (m, reqs) in windowed_run()) {
        let l = limit_s(rpu, m, Algorithm::SlidingWindowLog);
        let p = l.period_ns();
        let ds = replay(&l, &reqs);
        for (i, &(t, hits)) in reqs.iter().enumerate() {
            let used = admitted_in(p, &reqs[..i], &ds[..i], t);
            prop_assert_eq!(ds[i].allowed, used + hits.max(1) <= u64::from(rpu));
            if ds[i].allowed {
                prop_assert_eq!(u64::from(ds[i].remaining), u64::from(rpu) - used - hits);
            }
        }
        prop_assert!(worst_window(p, &reqs, &ds) <= u64::from(rpu));
    }

    #[test]
    fn sliding_counter_follows_its_estimate_and_bound(rpu in 1u32..20, (m, reqs) in windowed_run()) {
        let l = limit_s(rpu, m, Algorithm::SlidingWindowCounter);
        let p = l.period_ns();
        let ds = replay(&l, &reqs);
        let r = u128::from(rpu);
        for (i, &(t, hits)) in reqs.iter().enumerate() {
            let in_window = |w: u64| -> u128 {
                reqs[..i].iter().zip(&ds[..i])
                    .filter(|((u, _), d)| d.allowed && u / p == w)
                    .map(|((_, h), _)| u128::from(*h)).sum()
            };
            let w = t / p;
            let previous = if w == 0 { 0 } else { in_window(w - 1) };
            let current = in_window(w);
            let f_left = u128::from(p - t % p);
            // previous × (1 − f) + current + hits ≤ limit, multiplied through by p.
            let fits = previous * f_left + (current + u128::from(hits.max(1))) * u128::from(p) <= r * u128::from(p);
            prop_assert_eq!(ds[i].allowed, fits);
        }
        // Never more than the limit in one aligned window, and strictly under twice it in any.
        prop_assert!(worst_window(p, &reqs, &ds) < 2 * u64::from(rpu));
    }

    #[test]
    fn a_check_only_probe_changes_nothing(alg in 0usize..4, rpu in 1u32..20, (m, reqs) in windowed_run()) {
        let l = limit_s(rpu, m, any_algorithm(alg, rpu));
        // The same run with a probe (hits 0) just before every request decides alike.
        let probed: Vec<(u64, u64)> = reqs.iter().flat_map(|&(t, h)| [(t, 0), (t, h)]).collect();
        let plain = replay(&l, &reqs);
        let with_probes = replay(&l, &probed);
        for (i, d) in plain.iter().enumerate() {
            prop_assert_eq!(*d, with_probes[2 * i + 1], "request {}", i);
            // A probe is admitted exactly when one hit would be, and reports what remains.
            let (one, _) = decide(&replay_state(&l, &reqs[..i]), reqs[i].0, &l, 1);
            let probe = with_probes[2 * i];
            prop_assert_eq!(probe.allowed, one.allowed, "probe {}", i);
            if one.allowed {
                prop_assert_eq!(probe.remaining, one.remaining + 1, "probe {}", i);
            }
        }
    }
}

#[test]
fn fixed_window_admits_twice_the_limit_across_a_boundary() {
    // Documented behaviour, pinned: the reason the other algorithms exist.
    let l = limit_s(5, 1, Algorithm::FixedWindow);
    let reqs: Vec<(u64, u64)> = (0..5)
        .map(|i| (10 * S - 5 + i, 1))
        .chain((0..5).map(|i| (10 * S + i, 1)))
        .collect();
    let ds = replay(&l, &reqs);
    assert!(ds.iter().all(|d| d.allowed));
    assert_eq!(worst_window(S, &reqs, &ds), 10);
}

#[test]
fn sliding_counter_worst_case_approaches_but_stays_under_twice() {
    let l = limit_s(10, 1, Algorithm::SlidingWindowCounter);
    // The whole previous window's traffic at its last nanosecond, then as much as allowed
    // just before the sliding window stops covering it.
    let mut reqs: Vec<(u64, u64)> = vec![(11 * S - 1, 10)];
    reqs.extend((0..10).map(|_| (12 * S - 2, 1)));
    let ds = replay(&l, &reqs);
    let worst = worst_window(S, &reqs, &ds);
    assert_eq!(worst, 19, "10 + 9: the bound 2 × limit − 1 is reached");
}

#[test]
fn huge_hits_are_denied_without_overflow() {
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket {
            burst: NonZeroU32::MAX,
        },
        Algorithm::SlidingWindowLog,
        Algorithm::SlidingWindowCounter,
    ] {
        let l = limit_per(u32::MAX, 520, Unit::Week, algorithm);
        let mut state = State::fresh(&l);
        let (d, u) = decide(&state, u64::MAX / 2, &l, u64::from(u32::MAX));
        assert!(d.allowed, "{}", algorithm.name());
        state.apply(u);
        let (d, _) = decide(&state, u64::MAX, &l, u64::MAX);
        assert!(!d.allowed, "{}", algorithm.name());
    }
}

#[test]
fn a_state_of_another_algorithm_reads_as_fresh() {
    let fixed = limit_s(1, 1, Algorithm::FixedWindow);
    let (_, u) = decide(&State::fresh(&fixed), S, &fixed, 1);
    let mut state = State::fresh(&fixed);
    state.apply(u);
    let counter = limit_s(1, 1, Algorithm::SlidingWindowCounter);
    assert!(decide(&state, S, &counter, 1).0.allowed);
}
