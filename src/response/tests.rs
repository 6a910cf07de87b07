use super::*;
use crate::bucket::{decide, Tat};
use crate::testing::h;

const SECOND: u64 = 1_000_000_000;

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
    Standing::local(q, decide(state, SECOND, q, 1), false)
}

fn config() -> ResponseConfig {
    ResponseConfig {
        status: 429,
        body: "rate limited\n".into(),
        headers_on_allowed: false,
    }
}

#[test]
fn a_rejection_carries_retry_after_and_ratelimit_headers() {
    let denied = after(quota(2, 1), 2);
    assert!(denied.rejects());
    let reply = rejection(&config(), &[denied], None, Vec::new(), false);
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
            body: b"rate limited\n".to_vec(),
            details: DETAILS,
        }
    );
}

#[test]
fn a_service_body_and_headers_replace_and_extend_the_defaults() {
    let denied = after(quota(1, 1), 1);
    let extra = h(&[("x-reason", "quota")]);
    let Reply::Http { headers, body, .. } =
        rejection(&config(), &[denied], Some(b"slow down"), extra, false)
    else {
        panic!("http expected");
    };
    assert_eq!(body, b"slow down");
    assert_eq!(
        headers.last(),
        Some(&(Cow::Borrowed("x-reason"), "quota".to_string()))
    );
}

#[test]
fn grpc_rejections_use_resource_exhausted() {
    let denied = after(quota(1, 1), 1);
    match rejection(&config(), &[denied], None, Vec::new(), true) {
        Reply::Grpc {
            status,
            message,
            metadata,
            ..
        } => {
            assert_eq!(status, 8);
            assert_eq!(message, "rate limited");
            assert_eq!(metadata[0], (Cow::Borrowed("retry-after"), "1".to_string()));
        }
        other => panic!("expected gRPC reply, got {other:?}"),
    }
}

#[test]
fn buckets_that_never_refill_have_no_retry_after_or_reset() {
    let denied = after(Quota::new(1, 0).unwrap(), 1);
    let Reply::Http { headers, .. } = rejection(&config(), &[denied], None, Vec::new(), false)
    else {
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
        failure(503, false),
        Reply::Http {
            status: 503,
            headers: Vec::new(),
            body: b"rate limiter unavailable\n".to_vec(),
            details: FAILURE_DETAILS
        }
    );
    assert!(matches!(failure(500, true), Reply::Grpc { status: 14, .. }));
    match invalid_cost("x-cost", false) {
        Reply::Http { status, body, .. } => {
            assert_eq!(status, 400);
            assert_eq!(
                body,
                b"invalid x-cost header: expected a whole number from 1 to 4294967295\n"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        invalid_cost("x-cost", true),
        Reply::Grpc { status: 3, .. }
    ));
}

#[test]
fn grpc_is_recognised_by_content_type() {
    assert!(is_grpc(Some("application/grpc")));
    assert!(is_grpc(Some("application/grpc+proto")));
    assert!(is_grpc(Some("Application/GRPC-web")));
    assert!(!is_grpc(Some("application/json")));
    assert!(!is_grpc(Some("application/grp")));
    assert!(!is_grpc(None));
}
