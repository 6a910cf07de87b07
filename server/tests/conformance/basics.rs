//! The algorithms' own scenarios (each counts, resets and reports as its definition says),
//! and the batch rules every store shares: a rejected request consumes nothing, shadow
//! limits never block, a counter used twice counts twice, a changed limit starts afresh,
//! idle counters are fresh, huge limits stay exact, concurrent callers admit exactly.

use super::{bucket, d, limit, Harness, MS, S, US, W};
use floodgate_server::algorithm::{self, Algorithm, State, Unit};
use floodgate_server::store::{Check, Store};

pub async fn fixed_window_counts_to_the_limit_then_resets<St: Store>(h: &Harness<St>) {
    let l = limit(3, Unit::Second, Algorithm::FixedWindow);
    let c = h.check("a", l);
    h.at(W + S / 4);
    for left in [2, 1, 0] {
        assert_eq!(h.one(&c).await, d(true, left, 750 * MS));
    }
    assert_eq!(h.one(&c).await, d(false, 0, 750 * MS));
    h.at(W + S - US);
    assert_eq!(h.one(&c).await, d(false, 0, US));
    h.at(W + S);
    assert_eq!(h.one(&c).await, d(true, 2, S), "a new window starts empty");
}

pub async fn token_bucket_keeps_fractional_tokens_exactly<St: Store>(h: &Harness<St>) {
    if !h.needs(&[bucket(1)]) {
        return;
    }
    // 3 per second: a token every 333,333,333.3 ns.
    let c = h.check("third", limit(3, Unit::Second, bucket(1)));
    h.at(W);
    assert_eq!(h.one(&c).await, d(true, 0, 333_333_334));
    h.at(W + 333_333 * US);
    assert_eq!(h.one(&c).await, d(false, 0, 334), "rounded up to the ns");
    h.at(W + 333_334 * US);
    assert_eq!(h.one(&c).await, d(true, 0, 333_333_334));

    let c = h.check("burst", limit(2, Unit::Second, bucket(4)));
    for (left, reset) in [(3, 500), (2, 1000), (1, 1500), (0, 2000)] {
        assert_eq!(h.one(&c).await, d(true, left, reset * MS));
    }
    assert_eq!(h.one(&c).await, d(false, 0, 500 * MS));
    h.at(W + 333_334 * US + 500 * MS);
    assert_eq!(h.one(&c).await, d(true, 0, 2 * S));

    let c = Check {
        hits: 5,
        ..h.check("too-many", limit(10, Unit::Second, bucket(4)))
    };
    assert_eq!(
        h.one(&c).await,
        d(false, 4, 0),
        "more than the burst never fits"
    );
}

pub async fn sliding_window_log_has_no_boundary_burst<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::SlidingWindowLog]) {
        return;
    }
    let c = h.check("log", limit(2, Unit::Second, Algorithm::SlidingWindowLog));
    h.at(W - 2 * US);
    assert_eq!(h.one(&c).await, d(true, 1, S));
    h.at(W - US);
    assert_eq!(h.one(&c).await, d(true, 0, S));
    h.at(W);
    assert_eq!(
        h.one(&c).await,
        d(false, 0, S - 2 * US),
        "the oldest leaves at W+1s-2us"
    );
    h.at(W + S - 3 * US);
    assert_eq!(h.one(&c).await, d(false, 0, US));
    h.at(W + S - 2 * US);
    assert_eq!(h.one(&c).await, d(true, 0, S));
    // Denied, whatever the cost, the answer is when one hit fits: the oldest leaves.
    let two = Check {
        hits: 2,
        ..c.clone()
    };
    assert_eq!(h.one(&two).await, d(false, 0, US));
    let three = Check { hits: 3, ..c };
    assert_eq!(
        h.one(&three).await,
        d(false, 0, US),
        "even if it never fits"
    );
}

pub async fn sliding_window_counter_weighs_the_previous_window<St: Store>(h: &Harness<St>) {
    let l = limit(10, Unit::Second, Algorithm::SlidingWindowCounter);
    let ten = Check {
        hits: 10,
        ..h.check("c", l)
    };
    h.at(W);
    assert_eq!(h.one(&ten).await, d(true, 0, 2 * S));
    // A quarter into the next window, 7.5 of the 10 still count: 2 more fit, not 3.
    h.at(W + S + S / 4);
    let three = Check {
        hits: 3,
        ..ten.clone()
    };
    assert_eq!(h.one(&three).await, d(false, 2, 0), "one hit fits now");
    let two = Check {
        hits: 2,
        ..ten.clone()
    };
    assert_eq!(h.one(&two).await, d(true, 0, 3 * S - (S + S / 4)));
    // 9.5 counted: one more fits once the weight is 7/10, at 0.3 s into the window.
    let one = Check { hits: 1, ..ten };
    assert_eq!(h.one(&one).await, d(false, 0, 50 * MS));

    // A full current window: the retry is in the next one, once 3 of its 4 weigh ≤ 3.
    let four = Check {
        hits: 4,
        ..h.check(
            "full",
            limit(4, Unit::Second, Algorithm::SlidingWindowCounter),
        )
    };
    h.at(W + 2 * S);
    assert_eq!(h.one(&four).await, d(true, 0, 2 * S));
    h.at(W + 2 * S + S / 2);
    let one = Check { hits: 1, ..four };
    assert_eq!(h.one(&one).await, d(false, 0, 750 * MS));
}

pub async fn a_rejected_request_consumes_nothing<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::SlidingWindowLog, bucket(10)]) {
        return;
    }
    h.at(W);
    let tight = h.check("tight", limit(1, Unit::Minute, Algorithm::SlidingWindowLog));
    let loose = h.check("loose", limit(10, Unit::Minute, bucket(10)));
    let counter = h.check(
        "counter",
        limit(10, Unit::Minute, Algorithm::SlidingWindowCounter),
    );
    let fixed = h.check("fixed", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let all = [tight, loose.clone(), counter.clone(), fixed.clone()];
    assert_eq!(h.allowed(&all).await, [true; 4]);
    for _ in 0..5 {
        assert_eq!(h.allowed(&all).await, [false, true, true, true]);
    }
    // Only the admitted request counted: 10 - 1 - this one.
    for c in [loose, counter, fixed] {
        assert_eq!(h.one(&c).await.remaining, 8, "{:?}", c.limit.algorithm);
    }
}

pub async fn a_shadow_limit_never_blocks_the_others<St: Store>(h: &Harness<St>) {
    h.at(W);
    let shadow = Check {
        shadow: true,
        ..h.check("shadow", limit(1, Unit::Minute, Algorithm::FixedWindow))
    };
    let enforced = h.check("enforced", limit(10, Unit::Minute, Algorithm::FixedWindow));
    let both = [shadow, enforced.clone()];
    assert_eq!(h.allowed(&both).await, [true, true]);
    assert_eq!(h.allowed(&both).await, [false, true]);
    assert_eq!(h.one(&enforced).await.remaining, 7);
}

pub async fn the_same_counter_twice_in_one_request_counts_twice<St: Store>(h: &Harness<St>) {
    h.at(W);
    for algorithm in h.algorithms(1) {
        let one = h.check(algorithm.name(), limit(1, Unit::Second, algorithm));
        assert_eq!(h.allowed(&[one.clone(), one.clone()]).await, [true, false]);
        assert_eq!(
            h.allowed(&[one]).await,
            [true],
            "the rejected pair consumed nothing"
        );
    }
    // Two admitted items on one counter both count.
    for algorithm in h.algorithms(5) {
        let c = h.check(
            &format!("{}-5", algorithm.name()),
            limit(5, Unit::Second, algorithm),
        );
        let two = Check {
            hits: 2,
            ..c.clone()
        };
        let got = h.ask(&[two.clone(), c.clone(), two]).await;
        assert_eq!(
            got.iter()
                .map(|d| (d.allowed, d.remaining))
                .collect::<Vec<_>>(),
            [(true, 3), (true, 2), (true, 0)],
            "{}",
            algorithm.name()
        );
        assert!(!h.one(&c).await.allowed);
    }
}

pub async fn a_changed_limit_starts_afresh<St: Store>(h: &Harness<St>) {
    h.at(W);
    let one = h.check("k", limit(1, Unit::Second, Algorithm::FixedWindow));
    assert_eq!(h.allowed(std::slice::from_ref(&one)).await, [true]);
    assert_eq!(h.allowed(&[one]).await, [false]);
    let two = h.check("k", limit(2, Unit::Second, Algorithm::FixedWindow));
    assert_eq!(h.allowed(&[two]).await, [true]);
}

pub async fn idle_counters_are_as_good_as_fresh<St: Store>(h: &Harness<St>) {
    h.at(W);
    for algorithm in h.algorithms(2) {
        let c = h.check(algorithm.name(), limit(2, Unit::Second, algorithm));
        let two = Check {
            hits: 2,
            ..c.clone()
        };
        assert!(h.one(&two).await.allowed);
        assert!(!h.one(&c).await.allowed);
    }
    h.at(W + 2 * S);
    for algorithm in h.algorithms(2) {
        let c = h.check(algorithm.name(), limit(2, Unit::Second, algorithm));
        assert_eq!(h.one(&c).await.remaining, 1, "{}", algorithm.name());
    }
}

/// Limits and hits at the edges of their types: the Lua arithmetic must not lose a bit
/// where Rust uses u128. Expected answers come from the pure algorithms.
pub async fn huge_limits_and_hits_stay_exact<St: Store>(h: &Harness<St>) {
    let limits = [
        limit(u32::MAX, Unit::Week, bucket(u32::MAX)),
        limit(7, Unit::Week, bucket(u32::MAX)),
        limit(u32::MAX, Unit::Day, bucket(3)),
        limit(u32::MAX, Unit::Week, Algorithm::SlidingWindowCounter),
        limit(3, Unit::Week, Algorithm::SlidingWindowCounter),
        limit(u32::MAX, Unit::Week, Algorithm::FixedWindow),
        limit(100_000, Unit::Week, Algorithm::SlidingWindowLog),
    ];
    let steps: [(u64, u64); 8] = [
        (0, 3_000_000_000),
        (US, u64::from(u32::MAX)),
        (7 * US, 1),
        (3 * S, 2),
        (86_400 * S + 13 * US, 1 << 31),
        (86_400 * S + 14 * US, u64::MAX),
        (5 * 86_400 * S, 5),
        (9 * 86_400 * S + 999_999 * US, 4),
    ];
    for (i, l) in limits.iter().enumerate() {
        if !h.needs(&[l.algorithm]) {
            continue;
        }
        let c = h.check(&format!("huge-{i}"), *l);
        let mut state = State::fresh(l);
        for (offset, hits) in steps {
            let now = W + offset;
            h.at(now);
            let (want, update) = algorithm::decide(&state, now, l, hits);
            if want.allowed {
                state.apply(update);
            }
            let got = h.one(&Check { hits, ..c.clone() }).await;
            assert_eq!(got, want, "{l:?} at +{offset} ns with {hits} hits");
        }
    }
}

pub async fn concurrent_callers_on_one_key_admit_exactly_the_limit<St: Store + Clone>(
    h: &Harness<St>,
) {
    h.at(W);
    for algorithm in h.algorithms(300) {
        let c = h.check(
            &format!("hot-{}", algorithm.name()),
            limit(300, Unit::Minute, algorithm),
        );
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (store, c) = (h.store.clone(), c.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    for _ in 0..25 {
                        n += usize::from(
                            store.check(std::slice::from_ref(&c)).await.unwrap()[0].allowed,
                        );
                    }
                    n
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 300, "{}", algorithm.name());
    }
}
