//! The filter and floodgate-server write the same draft-03 `x-ratelimit-*` bytes for the
//! same limits: the server's `--response-headers draft03` from its statuses, and the
//! filter's headers from the same statuses once they have crossed the wire as an RLS
//! answer (encoded by prost, read by the filter's own decoder). Host code only, no Envoy:
//! both sides' real rendering, over random statuses.

use floodgate::reply::ratelimit_headers;
use floodgate::wire::grpc::Answer;
use floodgate::wire::rls::interpret;
use floodgate_server::proto::rls::rate_limit_response::{Code, DescriptorStatus, RateLimit};
use floodgate_server::proto::rls::RateLimitResponse;
use floodgate_server::rls::ResponseHeaders;
use proptest::prelude::*;
use prost::Message;

/// One enforced limit's status as a service may send it.
fn status() -> impl Strategy<Value = DescriptorStatus> {
    (
        prop_oneof![Just(1u32), Just(10), Just(100), 1..u32::MAX],
        0..12u32,
        // Few distinct resets, so that ties on remaining and reset both happen.
        prop_oneof![
            Just(None),
            (0..3i64, prop_oneof![Just(0i32), Just(1), Just(999_999_999)]).prop_map(Some)
        ],
        any::<bool>(),
    )
        .prop_map(|(limit, remaining, reset, over)| DescriptorStatus {
            code: if over { Code::OverLimit } else { Code::Ok } as i32,
            current_limit: Some(RateLimit {
                requests_per_unit: limit,
                unit: 2, // a minute; the fields do not show the window
                ..Default::default()
            }),
            limit_remaining: if over { 0 } else { remaining },
            duration_until_reset: reset
                .map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
            ..Default::default()
        })
}

fn pairs<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect()
}

proptest! {
    #[test]
    fn the_filter_writes_what_the_server_writes(statuses in proptest::collection::vec(status(), 0..6)) {
        let server = ResponseHeaders::Draft03.render(&statuses);
        let server = pairs(server.iter().map(|h| (h.key.as_str(), h.value.as_str())));

        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        let answer = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses: statuses.clone(),
            ..Default::default()
        };
        let shadows = vec![false; statuses.len()];
        let decided = interpret(&Answer::Response(answer.encode_to_vec()), &shadows)
            .map_err(|f| TestCaseError::fail(format!("{f:?}")))?;
        let filter = ratelimit_headers(&decided.standings);
        let filter = pairs(filter.iter());

        prop_assert_eq!(filter, server);
    }
}

#[test]
fn a_tie_shows_the_later_reset_on_both_sides() {
    let limit = |rpu, reset_s| DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: Some(RateLimit {
            requests_per_unit: rpu,
            unit: 2,
            ..Default::default()
        }),
        limit_remaining: 1,
        duration_until_reset: Some(prost_types::Duration {
            seconds: reset_s,
            nanos: 0,
        }),
        ..Default::default()
    };
    let statuses = [limit(5, 10), limit(7, 50)];
    let server = ResponseHeaders::Draft03.render(&statuses);
    let values: Vec<&str> = server.iter().map(|h| h.value.as_str()).collect();
    assert_eq!(values, ["7", "1", "50"]);
}
