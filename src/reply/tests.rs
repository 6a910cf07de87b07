use super::*;
use crate::bucket::{decide, Decision, Quota, Tat};
use crate::request::descriptor::Refusal;
use crate::testing::h;

const SECOND: u64 = 1_000_000_000;

/// The seed of a rejection whose jitter is 0 (it draws nothing from it).
const NO_SEED: u64 = 0;

fn quota(capacity: u32, per_second: u64) -> Quota {
    Quota::new(capacity, per_second * 1_000_000).unwrap()
}

/// Where a bucket stands after `taken` tokens were spent from it at one instant, plus
/// one more request.
fn after(q: Quota, taken: u32) -> Standing {
    let mut state = Tat::default();
    for _ in 0..taken {
        if let Decision::Allow { new_state, .. } = decide(state, SECOND, q, 1) {
            state = new_state;
        }
    }
    Standing::local(0, q, decide(state, SECOND, q, 1), false)
}

pub(crate) fn config() -> ResponseConfig {
    ResponseConfig {
        status: 429,
        body: "rate limited\n".into(),
        headers_on_allowed: false,
        headers: crate::config::HeaderFields::Draft03,
        body_format: BodyFormat::Text,
        retry_after_jitter_ppm: 0,
    }
}

/// The rules standings point at: rule 0 is `per-tenant`, rule 1 `per-route`.
pub(crate) fn rules() -> Vec<Rule> {
    crate::config::Config::parse(
        br#"{"rules":[
            {"name":"per-tenant","descriptors":[{"key":"k","value":"v"}],
             "local":{"capacity":1,"refill_per_second":1}},
            {"name":"per-route","descriptors":[{"key":"k","value":"v"}],
             "local":{"capacity":1,"refill_per_second":1}}]}"#,
    )
    .map(|c| c.rules)
    .unwrap_or_default()
}

#[test]
fn a_rejection_carries_retry_after_and_ratelimit_headers() {
    let denied = after(quota(2, 1), 2);
    assert!(denied.rejects());
    let reply = rejection(
        &config(),
        &rules(),
        &[denied],
        None,
        Headers::new(),
        Protocol::Http,
        NO_SEED,
    );
    assert_eq!(
        reply,
        Reply::Http {
            status: 429,
            headers: h(&[
                ("retry-after", "1"),
                ("x-ratelimit-limit", "2"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "2"),
            ]),
            body: b"rate limited\n".to_vec().into(),
            details: "floodgate_rate_limited{per-tenant}".into(),
        }
    );
}

#[test]
fn a_service_body_and_headers_replace_and_extend_the_defaults() {
    let denied = after(quota(1, 1), 1);
    let extra = h(&[("x-reason", "quota")]);
    let Reply::Http { headers, body, .. } = rejection(
        &config(),
        &rules(),
        &[denied],
        Some(b"slow down"),
        extra,
        Protocol::Http,
        NO_SEED,
    ) else {
        panic!("http expected");
    };
    assert_eq!(body.as_bytes(), b"slow down");
    assert_eq!(headers.iter().last(), Some(("x-reason", "quota")));
}

#[test]
fn grpc_rejections_use_resource_exhausted() {
    let denied = after(quota(1, 1), 1);
    match rejection(
        &config(),
        &rules(),
        &[denied],
        None,
        Headers::new(),
        Protocol::Grpc,
        NO_SEED,
    ) {
        Reply::Grpc {
            status,
            message,
            metadata,
            ..
        } => {
            assert_eq!(status, 8);
            assert_eq!(message, "rate limited");
            assert_eq!(metadata.iter().next(), Some(("retry-after", "1")));
        }
        other => panic!("expected gRPC reply, got {other:?}"),
    }
}

#[test]
fn buckets_that_never_refill_have_no_retry_after_or_reset() {
    let denied = after(Quota::new(1, 0).unwrap(), 1);
    let Reply::Http { headers, .. } = rejection(
        &config(),
        &rules(),
        &[denied],
        None,
        Headers::new(),
        Protocol::Http,
        NO_SEED,
    ) else {
        panic!("http expected");
    };
    assert_eq!(
        headers,
        h(&[("x-ratelimit-limit", "1"), ("x-ratelimit-remaining", "0")])
    );
}

#[test]
fn retry_after_is_the_longest_wait_among_rejecting_limits() {
    let fast = after(quota(1, 1), 1);
    let slow = after(Quota::new(1, 250_000).unwrap(), 1); // 1 token per 4 s
    assert_eq!(retry_after_seconds(&[fast, slow]), Some(4));
    let never = after(Quota::new(1, 0).unwrap(), 1);
    assert_eq!(retry_after_seconds(&[fast, never]), None);
    let allowed = after(quota(5, 1), 0);
    assert_eq!(retry_after_seconds(&[allowed, fast]), Some(1));
}

#[test]
fn headers_describe_the_tightest_enforced_limit() {
    let roomy = after(quota(100, 10), 1);
    let tight = after(quota(5, 1), 3);
    let shadow = Standing {
        shadow: true,
        ..after(quota(1, 1), 1)
    };
    assert_eq!(
        ratelimit_headers(&[roomy, tight, shadow]),
        h(&[
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset", "4"),
        ])
    );
    assert!(ratelimit_headers(&[shadow]).is_empty());
}

#[test]
fn failures_and_bad_costs_have_their_own_replies() {
    assert_eq!(
        failure(503, Protocol::Http),
        Reply::Http {
            status: 503,
            headers: Headers::new(),
            body: b"rate limiter unavailable\n".to_vec().into(),
            details: FAILURE_DETAILS.into()
        }
    );
    assert!(matches!(
        failure(500, Protocol::Grpc),
        Reply::Grpc { status: 14, .. }
    ));
    match refusal(&cost_refusal(), Protocol::Http) {
        Reply::Http { status, body, .. } => {
            assert_eq!(status, 400);
            assert_eq!(
                body.as_bytes(),
                b"invalid x-cost header: expected a whole number from 1 to 4294967295\n"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        refusal(&cost_refusal(), Protocol::Grpc),
        Reply::Grpc { status: 3, .. }
    ));
}

fn cost_refusal() -> Refusal {
    Refusal::InvalidCost {
        header: "x-cost".into(),
    }
}

#[test]
fn every_refusal_is_a_400_or_invalid_argument_with_its_details() {
    let cases = [
        (
            Refusal::RepeatedHeader {
                header: "x-cost".into(),
            },
            "the x-cost header must be sent at most once",
            DUPLICATE_HEADER_DETAILS,
        ),
        (
            Refusal::ValueTooLong {
                key: "tenant".into(),
                max: 1024,
            },
            "the tenant descriptor value is longer than 1024 bytes",
            INVALID_DESCRIPTOR_DETAILS,
        ),
        (
            Refusal::NotUtf8 {
                key: "tenant".into(),
            },
            "the tenant descriptor value is not valid UTF-8",
            INVALID_DESCRIPTOR_DETAILS,
        ),
    ];
    for (why, message, details) in cases {
        assert_eq!(
            refusal(&why, Protocol::Http),
            Reply::Http {
                status: 400,
                headers: Headers::new(),
                body: format!("{message}\n").into_bytes().into(),
                details: details.into()
            }
        );
        assert_eq!(
            refusal(&why, Protocol::Grpc),
            Reply::Grpc {
                status: 3,
                message: message.to_string(),
                metadata: Headers::new(),
                details: details.into()
            }
        );
    }
}

#[test]
fn grpc_web_gets_a_trailers_only_answer_in_its_own_content_type() {
    let web = Protocol::GrpcWeb {
        content_type: "application/grpc-web-text",
        text: true,
    };
    let denied = after(quota(1, 1), 1);
    match rejection(
        &config(),
        &rules(),
        &[denied],
        None,
        Headers::new(),
        web,
        NO_SEED,
    ) {
        Reply::Http {
            status,
            headers,
            body,
            details,
        } => {
            assert_eq!(status, 200);
            assert_eq!(details, "floodgate_rate_limited{per-tenant}");
            assert_eq!(
                headers.iter().take(3).collect::<Vec<_>>(),
                [
                    ("content-type", "application/grpc-web-text"),
                    ("grpc-status", "8"),
                    ("grpc-message", "rate limited"),
                ]
            );
            assert!(headers.iter().any(|(k, _)| k == "retry-after"));
            assert_eq!(
                body.as_bytes(),
                crate::reply::protocol::grpc_web_status_body(8, "rate limited", true)
            );
        }
        other => panic!("{other:?}"),
    }
    let binary = Protocol::GrpcWeb {
        content_type: "application/grpc-web",
        text: false,
    };
    match failure(500, binary) {
        Reply::Http {
            status, headers, ..
        } => {
            assert_eq!(status, 200);
            assert!(headers.iter().any(|f| f == ("grpc-status", "14")));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn both_and_none_choose_the_header_fields() {
    let denied = after(quota(2, 1), 2);
    let names = |headers: crate::config::HeaderFields| {
        let config = ResponseConfig {
            headers,
            ..config()
        };
        let Reply::Http { headers, .. } = rejection(
            &config,
            &rules(),
            &[denied],
            None,
            Headers::new(),
            Protocol::Http,
            NO_SEED,
        ) else {
            panic!("http expected");
        };
        let names: Vec<String> = headers.iter().map(|(k, _)| k.to_string()).collect();
        names
    };
    use crate::config::HeaderFields;
    assert_eq!(
        names(HeaderFields::Both),
        [
            "retry-after",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "ratelimit-policy",
            "ratelimit"
        ]
    );
    assert_eq!(names(HeaderFields::None), ["retry-after"]);
}

#[test]
fn details_name_the_rules_and_stay_short() {
    assert_eq!(rejection_details(&[]), "floodgate_rate_limited");
    assert_eq!(
        rejection_details(&["per-tenant"]),
        "floodgate_rate_limited{per-tenant}"
    );
    let many = ["a", "b", "c", "d", "e", "f"];
    assert_eq!(
        rejection_details(&many),
        "floodgate_rate_limited{a,b,c,d,+2}"
    );
}

proptest::proptest! {
    /// The details are the old construction's: the prefix, then the first four names
    /// and a count of the rest, in braces.
    #[test]
    fn details_are_the_names_in_braces_then_a_count(
        names in proptest::collection::vec("[a-z0-9_-]{0,12}", 0..8),
    ) {
        let borrowed: Vec<&str> = names.iter().map(String::as_str).collect();
        let expected = if names.is_empty() {
            DETAILS.to_string()
        } else {
            let listed = names.len().min(MAX_DETAILS_RULES);
            let more = names.len() - listed;
            let count = if more > 0 { format!(",+{more}") } else { String::new() };
            format!("{DETAILS}{{{}{count}}}", names[..listed].join(","))
        };
        let details = rejection_details(&borrowed);
        proptest::prop_assert_eq!(details.as_str(), expected);
    }
}

mod jitter;
mod order;
mod problem;
