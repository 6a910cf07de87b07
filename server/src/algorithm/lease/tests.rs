//! Grants: never more than remain, admitted plus granted within the limit, and the
//! validity rule per algorithm.

use super::*;
use crate::algorithm::test_support::limit;
use crate::algorithm::{decide, Decision, State, Unit};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const P: u64 = S;

fn quota(requests: u32, valid_ms: u64) -> Quota {
    Quota {
        requests: NonZeroU32::new(requests).unwrap(),
        valid_ms,
    }
}

fn algorithm(i: usize, burst: u32) -> Algorithm {
    match i {
        0 => Algorithm::FixedWindow,
        1 => Algorithm::TokenBucket {
            burst: NonZeroU32::new(burst).unwrap(),
        },
        2 => Algorithm::SlidingWindowLog,
        _ => Algorithm::SlidingWindowCounter,
    }
}

/// Runs requests `(now, hits, asks)`; an admitted request that asks takes its grant in the
/// same step, as a store does. Returns each request's hits taken (own + granted).
fn replay(l: &Limit, q: &Quota, reqs: &[(u64, u64, bool)]) -> Result<Vec<u64>, TestCaseError> {
    let mut state = State::fresh(l);
    let mut taken = Vec::with_capacity(reqs.len());
    for &(now, hits, asks) in reqs {
        let (d, u) = decide(&state, now, l, hits);
        if !d.allowed {
            taken.push(0);
            continue;
        }
        let g = if asks { grant_hits(q, d.remaining) } else { 0 };
        prop_assert!(g <= d.remaining, "never more than remain");
        if g == 0 {
            state.apply(u);
            taken.push(hits);
            continue;
        }
        let (with_grant, u): (Decision, _) = decide(&state, now, l, hits + u64::from(g));
        prop_assert!(with_grant.allowed, "the grant fits by construction");
        prop_assert_eq!(with_grant.remaining, d.remaining - g);
        state.apply(u);
        taken.push(hits + u64::from(g));
    }
    Ok(taken)
}

fn run_strategy() -> impl Strategy<Value = Vec<(u64, u64, bool)>> {
    prop::collection::vec(
        (0u64..(3 * S / 2), 0u64..=3, prop::bool::weighted(0.7)),
        1..60,
    )
    .prop_map(|steps| {
        let mut now = 1_000 * S + 123_456_789;
        steps
            .into_iter()
            .map(|(gap, hits, asks)| {
                now += if gap > S { gap } else { gap / 50 };
                (now, hits, asks)
            })
            .collect()
    })
}

/// Hits taken (own and granted) in `(end − P, end]`, or in the aligned window of `end`.
fn taken_in(reqs: &[(u64, u64, bool)], taken: &[u64], keep: impl Fn(u64) -> bool) -> u64 {
    reqs.iter()
        .zip(taken)
        .filter(|((t, _, _), _)| keep(*t))
        .map(|(_, n)| n)
        .sum()
}

proptest! {
    #[test]
    fn admitted_plus_granted_never_exceeds_the_limit(
        alg in 0usize..4, rpu in 1u32..30, requests in 1u32..12, reqs in run_strategy()
    ) {
        let l = limit(rpu, Unit::Second, algorithm(alg, rpu));
        let q = quota(requests, 500);
        let taken = replay(&l, &q, &reqs)?;
        let rpu = u64::from(rpu);
        for &(t, _, _) in &reqs {
            match l.algorithm {
                Algorithm::FixedWindow | Algorithm::SlidingWindowCounter => {
                    let w = t / P;
                    prop_assert!(taken_in(&reqs, &taken, |u| u / P == w) <= rpu);
                }
                Algorithm::SlidingWindowLog => {
                    prop_assert!(taken_in(&reqs, &taken, |u| u + P > t && u <= t) <= rpu);
                }
                Algorithm::TokenBucket { burst } => {
                    // From any request on: at most burst + rate × elapsed.
                    let cap = u128::from(burst.get()) * u128::from(P);
                    let later = taken_in(&reqs, &taken, |u| u >= t);
                    let last = reqs.last().map_or(t, |r| r.0);
                    prop_assert!(
                        u128::from(later) * u128::from(P) <= cap + u128::from(last - t) * u128::from(rpu)
                    );
                }
                // Never leased; not generated here.
                Algorithm::Concurrency => {}
            }
        }
    }
}

#[test]
fn a_grant_takes_what_remains_at_most() {
    let q = quota(10, 1_000);
    assert_eq!(grant_hits(&q, 25), 10);
    assert_eq!(grant_hits(&q, 4), 4);
    assert_eq!(grant_hits(&q, 0), 0);
    let l = limit(25, Unit::Minute, Algorithm::FixedWindow);
    assert_eq!(
        grant(&l, &q, 0, S),
        None,
        "nothing left: no grant, never one of 0"
    );
}

#[test]
fn windowed_grants_end_with_their_window() {
    let q = quota(10, 1_000);
    let now = 100 * S + 300 * MS;
    for alg in [Algorithm::FixedWindow, Algorithm::SlidingWindowCounter] {
        let l = limit(100, Unit::Second, alg);
        assert_eq!(lease_ends_at(&l, &q, now), 101 * S, "{}", alg.name());
        let l = limit(100, Unit::Minute, alg);
        assert_eq!(lease_ends_at(&l, &q, now), now + S, "{}", alg.name());
    }
    for alg in [algorithm(1, 5), Algorithm::SlidingWindowLog] {
        let l = limit(100, Unit::Second, alg);
        assert_eq!(lease_ends_at(&l, &q, now), now + S, "{}", alg.name());
    }
}
