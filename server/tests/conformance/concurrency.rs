//! Scenarios for `concurrency` limits: holds taken to the limit then over, released once
//! (idempotent), the same id one hold, expiry at the deadline, all or nothing with the
//! rate limits of the same call, check-only, no lease and no charge. Memory, a single Redis
//! and a Redis Cluster answer alike; the gossip store holds no concurrency limit.

use super::{d, limit, Harness, MS, S, W};
use floodgate_server::algorithm::concurrency::{HoldId, HoldOp};
use floodgate_server::algorithm::lease::Quota;
use floodgate_server::algorithm::{Algorithm, Unit};
use floodgate_server::store::{Check, Store};
use std::num::NonZeroU32;

fn id(s: &str) -> HoldId {
    HoldId::parse(s.as_bytes()).unwrap()
}

fn acquire(c: &Check, who: &str) -> Check {
    Check {
        hold: Some(HoldOp::Acquire(id(who))),
        ..c.clone()
    }
}

fn release(c: &Check, who: &str) -> Check {
    Check {
        hold: Some(HoldOp::Release(id(who))),
        ..c.clone()
    }
}

/// Acquire to N, then over until the earliest deadline; release frees once; a release of
/// an id never held frees nothing; the same id again is the same hold.
pub async fn holds_are_taken_to_the_limit_and_released_once<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::Concurrency]) {
        return;
    }
    let c = h.check("tenant", limit(2, Unit::Minute, Algorithm::Concurrency));
    h.at(W);
    assert_eq!(h.one(&acquire(&c, "a")).await, d(true, 1, 60 * S));
    h.at(W + 10 * S);
    assert_eq!(h.one(&acquire(&c, "b")).await, d(true, 0, 60 * S));
    assert_eq!(
        h.one(&acquire(&c, "a")).await,
        d(true, 0, 60 * S),
        "the same hold"
    );
    h.at(W + 20 * S);
    assert_eq!(
        h.one(&acquire(&c, "c")).await,
        d(false, 0, 40 * S),
        "until a's deadline"
    );
    assert_eq!(h.one(&release(&c, "nobody")).await, d(true, 0, 50 * S));
    assert_eq!(h.one(&acquire(&c, "c")).await, d(false, 0, 40 * S));
    // Releasing a frees its slot, once.
    assert_eq!(h.one(&release(&c, "a")).await, d(true, 1, 50 * S));
    assert_eq!(
        h.one(&release(&c, "a")).await,
        d(true, 1, 50 * S),
        "idempotent"
    );
    assert_eq!(h.one(&acquire(&c, "c")).await, d(true, 0, 60 * S));
    assert_eq!(h.one(&acquire(&c, "d")).await, d(false, 0, 50 * S));
    // A hold of several slots, and a release of everything.
    for who in ["b", "c"] {
        h.one(&release(&c, who)).await;
    }
    let two = Check {
        hits: 2,
        ..acquire(&c, "big")
    };
    assert_eq!(h.one(&two).await, d(true, 0, 60 * S));
    let one = acquire(&c, "small");
    assert_eq!(h.one(&one).await, d(false, 0, 60 * S));
    assert_eq!(h.one(&release(&c, "big")).await, d(true, 2, 0));
}

/// A hold nobody releases ends at its deadline (now + one unit), and its slot returns.
pub async fn a_hold_expires_at_its_deadline<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::Concurrency]) {
        return;
    }
    let c = h.check("tenant", limit(1, Unit::Second, Algorithm::Concurrency));
    h.at(W + 100 * MS);
    assert!(h.one(&acquire(&c, "a")).await.allowed);
    h.at(W + 1_100 * MS - 1_000);
    assert_eq!(
        h.one(&acquire(&c, "b")).await,
        d(false, 0, 1_000),
        "1 µs before"
    );
    h.at(W + 1_100 * MS);
    assert_eq!(
        h.one(&acquire(&c, "b")).await,
        d(true, 0, S),
        "at the deadline"
    );
    // The expired hold was reclaimed: releasing it frees nothing now.
    assert_eq!(h.one(&release(&c, "a")).await, d(true, 0, S));
}

/// A call rejected by a rate limit takes no hold, and a call rejected by a concurrency
/// limit counts nothing on its rate limits.
pub async fn holds_are_all_or_nothing_with_the_rest_of_the_call<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::Concurrency]) {
        return;
    }
    h.at(W + 250 * MS);
    let rate = h.check("rate", limit(1, Unit::Second, Algorithm::FixedWindow));
    let cc = h.check("cc", limit(1, Unit::Minute, Algorithm::Concurrency));
    assert!(h.one(&rate).await.allowed);
    // The rate limit is over: the hold is not taken.
    let got = h.ask(&[rate.clone(), acquire(&cc, "a")]).await;
    // The hold it would have taken is reported as not taken (one remaining).
    assert_eq!(got, vec![d(false, 0, 750 * MS), d(true, 1, 60 * S)]);
    assert_eq!(
        h.one(&acquire(&cc, "b")).await,
        d(true, 0, 60 * S),
        "the slot was free"
    );
    // The concurrency limit is over: the rate limit counts nothing.
    h.at(W + S + 250 * MS);
    let got = h.ask(&[rate.clone(), acquire(&cc, "c")]).await;
    assert_eq!(got, vec![d(true, 1, 750 * MS), d(false, 0, 59 * S)]);
    assert_eq!(h.one(&rate).await, d(true, 0, 750 * MS), "still one left");
}

/// Check-only (hits 0) takes nothing; a charge counts nothing on a concurrency limit; a
/// lease is never granted on one.
pub async fn concurrency_is_never_charged_or_leased<St: Store>(h: &Harness<St>) {
    if !h.needs(&[Algorithm::Concurrency]) {
        return;
    }
    h.at(W);
    let c = h.check("tenant", limit(2, Unit::Minute, Algorithm::Concurrency));
    let probe = Check {
        hits: 0,
        ..acquire(&c, "p")
    };
    assert_eq!(h.one(&probe).await, d(true, 2, 0));
    assert_eq!(
        h.charge(&Check {
            hits: 5,
            ..acquire(&c, "x")
        })
        .await,
        d(true, 2, 0)
    );
    let asking = Check {
        quota: Some(Quota {
            requests: NonZeroU32::new(10).unwrap(),
            valid_ms: 1_000,
        }),
        ..acquire(&c, "a")
    };
    let got = h.one(&asking).await;
    assert_eq!((got, got.grant), (d(true, 1, 60 * S), None));
    assert_eq!(h.one(&acquire(&c, "b")).await, d(true, 0, 60 * S));
    assert_eq!(h.one(&probe).await, d(false, 0, 60 * S));
    // A charge on a full limit: over, nothing counted, nothing freed.
    assert_eq!(
        h.charge(&Check {
            hits: 1,
            ..c.clone()
        })
        .await,
        d(false, 0, 60 * S)
    );
    assert_eq!(h.one(&release(&c, "a")).await, d(true, 1, 60 * S));
}
