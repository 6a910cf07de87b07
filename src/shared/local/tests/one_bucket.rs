//! `take_one`, the single-bucket path of `take_all`, against `take_many`, the path for
//! any number of buckets: the same verdicts, decisions, held tokens, table events and
//! stored bytes, step after step.

use super::*;
use proptest::prelude::*;

/// One request: its bucket's shape and cost, whether its rule is a shadow, and how long
/// after the previous one it comes.
fn request() -> impl Strategy<Value = (u32, u64, u32, bool, u64)> {
    (
        1u32..4,
        prop_oneof![Just(0u64), 1u64..3_000_000],
        0u32..3,
        any::<bool>(),
        0u64..2_000_000_000,
    )
}

proptest! {
    #[test]
    fn one_bucket_is_taken_as_from_a_list_of_any_length(
        requests in prop::collection::vec(request(), 1..40)
    ) {
        let (t, one) = prepared(4);
        let many = MemoryShared::default();
        t.prepare(&many).unwrap();
        let mut now = NOW;
        for (i, (capacity, rate, cost, shadow, gap)) in requests.into_iter().enumerate() {
            now += gap;
            let take = Take {
                // Few fingerprints on few slots: existing, new, idle and evicted buckets.
                fingerprint: (i % 5) as u128,
                quota: Quota::new(capacity, rate).unwrap(),
                shadow,
                cost,
            };
            let (mut events_one, mut events_many) = (TableEvents::default(), TableEvents::default());
            let by_one = take_one(&t, &one, &take, now, &mut events_one);
            let by_many = take_many(&t, &many, &[take], now, &mut events_many);
            prop_assert_eq!(by_one, by_many);
            prop_assert_eq!(events_one, events_many);
            for index in 0..4 {
                prop_assert_eq!(t.read(&one, index).unwrap(), t.read(&many, index).unwrap());
            }
        }
    }
}

#[test]
fn a_shadow_bucket_that_conflicts_forever_is_contention_on_both_paths() {
    let (t, store) = prepared(64);
    let shadow = Take {
        shadow: true,
        ..take(1, 5, 0)
    };
    let conflicting = AlwaysConflicting(store);
    let one = take_one(&t, &conflicting, &shadow, NOW, &mut TableEvents::default());
    let many = take_many(
        &t,
        &conflicting,
        &[shadow],
        NOW,
        &mut TableEvents::default(),
    );
    assert_eq!(one, Err(LocalError::Contention));
    assert_eq!(one, many);
}
