//! What a rejection looks like, and the rate-limit headers of a decision.
//!
//! Headers follow the IETF `draft-polli-ratelimit-headers-03` fields Envoy itself emits:
//! `x-ratelimit-limit` (the bucket's capacity), `x-ratelimit-remaining` (whole tokens left)
//! and `x-ratelimit-reset` (seconds until the bucket is full again, rounded up). A
//! rejection also carries `retry-after`: the exact wait, in whole seconds rounded up,
//! after which the same request would be admitted. Buckets that never refill have no
//! reset and no retry time, so those headers are left out rather than invented.

use crate::bucket::{seconds_ceil, Decision, Quota};
use crate::config::ResponseConfig;

/// Shown in Envoy's access logs as the response code details of a rejection.
pub const DETAILS: &str = "floodgate_rate_limited";

/// gRPC status RESOURCE_EXHAUSTED, the gRPC form of 429.
pub const GRPC_RESOURCE_EXHAUSTED: u32 = 8;

/// A reply sent from the proxy instead of forwarding the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A plain HTTP response.
    Http {
        /// HTTP status.
        status: u16,
        /// Headers to send.
        headers: Vec<(&'static str, String)>,
        /// Body to send.
        body: Vec<u8>,
    },
    /// A gRPC trailers-only response (HTTP 200 with `grpc-status`).
    Grpc {
        /// gRPC status code.
        status: u32,
        /// `grpc-message`.
        message: String,
        /// Extra metadata (headers).
        metadata: Vec<(&'static str, String)>,
    },
}

/// One rule's decision with the shape of its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The rule's bucket shape.
    pub quota: Quota,
    /// What the bucket said.
    pub decision: Decision,
    /// Whether the rule is in shadow mode (never enforced, never shown to clients).
    pub shadow: bool,
}

/// The `x-ratelimit-*` headers for the most restrictive enforced rule: the fewest
/// remaining tokens, then the longest reset. Empty when no enforced rule applied.
pub fn ratelimit_headers(outcomes: &[Outcome]) -> Vec<(&'static str, String)> {
    let tightest = outcomes.iter().filter(|o| !o.shadow).min_by_key(|o| {
        (
            o.decision.remaining(),
            std::cmp::Reverse(o.decision.full_in_ns().unwrap_or(u64::MAX)),
        )
    });
    let Some(o) = tightest else {
        return Vec::new();
    };
    let mut headers = vec![
        ("x-ratelimit-limit", o.quota.capacity().to_string()),
        ("x-ratelimit-remaining", o.decision.remaining().to_string()),
    ];
    if let Some(full_in) = o.decision.full_in_ns() {
        headers.push(("x-ratelimit-reset", seconds_ceil(full_in).to_string()));
    }
    headers
}

/// Seconds until every enforced rule that denied would admit the request: the largest
/// wait, rounded up. `None` when one of them never will (no refill, or a cost above its
/// capacity).
pub fn retry_after_seconds(outcomes: &[Outcome]) -> Option<u64> {
    outcomes
        .iter()
        .filter(|o| !o.shadow)
        .filter_map(|o| match o.decision {
            Decision::Deny { retry_in_ns, .. } => Some(retry_in_ns),
            Decision::Allow { .. } => None,
        })
        .try_fold(0u64, |longest, wait| Some(longest.max(wait?)))
        .map(seconds_ceil)
}

/// The reply rejecting a request: the configured status and body for HTTP, or
/// RESOURCE_EXHAUSTED for gRPC, with `retry-after` and the `x-ratelimit-*` headers of the
/// rules that denied it.
pub fn rejection(config: &ResponseConfig, outcomes: &[Outcome], grpc: bool) -> Reply {
    let denying: Vec<Outcome> = outcomes
        .iter()
        .filter(|o| !o.shadow && !o.decision.is_allow())
        .copied()
        .collect();
    let mut headers = Vec::with_capacity(4);
    if let Some(seconds) = retry_after_seconds(&denying) {
        headers.push(("retry-after", seconds.to_string()));
    }
    headers.extend(ratelimit_headers(&denying));
    if grpc {
        Reply::Grpc {
            status: GRPC_RESOURCE_EXHAUSTED,
            message: config.body.trim_end().to_string(),
            metadata: headers,
        }
    } else {
        Reply::Http {
            status: config.status,
            headers,
            body: config.body.as_bytes().to_vec(),
        }
    }
}

/// gRPC status UNAVAILABLE: what a gRPC client gets when the limiter fails closed.
pub const GRPC_UNAVAILABLE: u32 = 14;

/// The reply rejecting a request because the limiter could not decide
/// (`failure_mode: deny`).
pub fn failure(status: u16, grpc: bool) -> Reply {
    const MESSAGE: &str = "rate limiter unavailable";
    if grpc {
        Reply::Grpc {
            status: GRPC_UNAVAILABLE,
            message: MESSAGE.to_string(),
            metadata: Vec::new(),
        }
    } else {
        Reply::Http {
            status,
            headers: Vec::new(),
            body: format!("{MESSAGE}\n").into_bytes(),
        }
    }
}

/// Whether a request is gRPC, from its `content-type`: gRPC clients need a gRPC status,
/// not an HTTP one.
pub fn is_grpc(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        ct.get(..16)
            .is_some_and(|p| p.eq_ignore_ascii_case("application/grpc"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::{decide, Tat};

    const SECOND: u64 = 1_000_000_000;

    fn quota(capacity: u32, per_second: u64) -> Quota {
        Quota::new(capacity, per_second * 1_000_000).unwrap()
    }

    /// The outcome after `taken` tokens were spent from a full bucket at the same instant.
    fn after(q: Quota, taken: u32) -> Outcome {
        let mut state = Tat::default();
        let mut decision = decide(state, SECOND, q, 1);
        for _ in 0..=taken {
            decision = decide(state, SECOND, q, 1);
            if let Decision::Allow { new_state, .. } = decision {
                state = new_state;
            }
        }
        Outcome {
            quota: q,
            decision,
            shadow: false,
        }
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
        assert!(!denied.decision.is_allow());
        let reply = rejection(&config(), &[denied], false);
        assert_eq!(
            reply,
            Reply::Http {
                status: 429,
                headers: vec![
                    ("retry-after", "1".into()),
                    ("x-ratelimit-limit", "2".into()),
                    ("x-ratelimit-remaining", "0".into()),
                    ("x-ratelimit-reset", "2".into()),
                ],
                body: b"rate limited\n".to_vec(),
            }
        );
    }

    #[test]
    fn grpc_rejections_use_resource_exhausted() {
        let denied = after(quota(1, 1), 1);
        match rejection(&config(), &[denied], true) {
            Reply::Grpc {
                status,
                message,
                metadata,
            } => {
                assert_eq!(status, 8);
                assert_eq!(message, "rate limited");
                assert_eq!(metadata[0], ("retry-after", "1".to_string()));
            }
            other => panic!("expected gRPC reply, got {other:?}"),
        }
    }

    #[test]
    fn buckets_that_never_refill_have_no_retry_after_or_reset() {
        let denied = after(Quota::new(1, 0).unwrap(), 1);
        let Reply::Http { headers, .. } = rejection(&config(), &[denied], false) else {
            panic!("http expected");
        };
        assert_eq!(
            headers,
            vec![
                ("x-ratelimit-limit", "1".to_string()),
                ("x-ratelimit-remaining", "0".to_string())
            ]
        );
    }

    #[test]
    fn retry_after_is_the_longest_wait_among_denying_rules() {
        let fast = after(quota(1, 1), 1);
        let slow = after(Quota::new(1, 250_000).unwrap(), 1); // 1 token per 4 s
        assert_eq!(retry_after_seconds(&[fast, slow]), Some(4));
        let never = after(Quota::new(1, 0).unwrap(), 1);
        assert_eq!(retry_after_seconds(&[fast, never]), None);
    }

    #[test]
    fn headers_describe_the_tightest_enforced_rule() {
        let roomy = after(quota(100, 10), 1);
        let tight = after(quota(5, 1), 3);
        let shadow = Outcome {
            shadow: true,
            ..after(quota(1, 1), 1)
        };
        assert_eq!(
            ratelimit_headers(&[roomy, tight, shadow]),
            vec![
                ("x-ratelimit-limit", "5".to_string()),
                ("x-ratelimit-remaining", "1".to_string()),
                ("x-ratelimit-reset", "4".to_string()),
            ]
        );
        assert!(ratelimit_headers(&[shadow]).is_empty());
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
}
