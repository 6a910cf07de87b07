//! A rejection whose standings all reject, in rule order, is built from them as they are;
//! any other is built from a sorted copy of the rejecting ones. Both ways give one reply;
//! and the parts that read one limit directly say what their search over several says.

use super::*;
use proptest::prelude::*;

/// A standing of rule 0, 1 or 2 (2 has no rule: a name the configuration lacks), any
/// figures, rejecting or not.
fn standing() -> impl Strategy<Value = Standing> {
    let wait = prop::option::of(0u64..5_000_000_000);
    (
        (0usize..3, 0u32..5, prop::option::of(0u64..100), 0u32..3),
        (wait.clone(), wait.clone(), wait),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                (rule, limit, window_s, remaining),
                (reset_ns, next_ns, retry_ns),
                (allowed, shadow),
            )| {
                Standing {
                    rule,
                    limit,
                    window_s,
                    remaining,
                    reset_ns,
                    next_ns,
                    allowed,
                    shadow,
                    retry_ns,
                }
            },
        )
}

fn protocol() -> impl Strategy<Value = Protocol> {
    prop_oneof![
        Just(Protocol::Http),
        Just(Protocol::Grpc),
        Just(Protocol::GrpcWeb {
            content_type: "application/grpc-web-text",
            text: true
        }),
    ]
}

proptest! {
    #[test]
    fn standings_read_as_they_are_give_the_reply_a_sorted_copy_gives(
        standings in prop::collection::vec(standing(), 0..5),
        problem in any::<bool>(),
        protocol in protocol(),
    ) {
        let config = ResponseConfig {
            headers: crate::config::HeaderFields::Both,
            body_format: if problem { BodyFormat::ProblemJson } else { BodyFormat::Text },
            ..config()
        };
        let reply = |standings: &[Standing]| {
            rejection(&config, &rules(), standings, None, Headers::new(), protocol, NO_SEED)
        };
        // The rejecting ones in rule order (stable): always read as they are.
        let mut sorted: Vec<Standing> = standings.iter().filter(|s| s.rejects()).copied().collect();
        sorted.sort_by_key(|s| s.rule);
        // With one that admits the request: always copied.
        let mut with_allowed = standings.clone();
        with_allowed.push(Standing { allowed: true, shadow: false, ..after(quota(9, 1), 0) });
        let expected = reply(&sorted);
        prop_assert_eq!(&reply(&standings), &expected);
        prop_assert_eq!(&reply(&with_allowed), &expected);
    }

    #[test]
    fn one_limit_read_directly_is_what_the_search_finds(s in standing()) {
        // A shadow limit is never shown, an admitting one never waited for: each makes
        // the list two long without changing what it says.
        let shadow = Standing { shadow: true, ..s };
        let admits = Standing { allowed: true, shadow: false, ..s };
        prop_assert_eq!(ratelimit_headers(&[s]), ratelimit_headers(&[s, shadow]));
        prop_assert_eq!(retry_after_seconds(&[s]), retry_after_seconds(&[s, admits]));
    }
}
