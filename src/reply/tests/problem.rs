//! Rejections as problem+json documents and the draft-10 fields beside them.

use super::*;

fn draft10_problem() -> ResponseConfig {
    ResponseConfig {
        headers: crate::config::HeaderFields::Draft10,
        body_format: BodyFormat::ProblemJson,
        ..config()
    }
}

#[test]
fn a_problem_json_rejection_names_the_rules_that_rejected_it() {
    let tenant = after(quota(2, 1), 2);
    let route = Standing {
        rule: 1,
        ..after(quota(3, 1), 3)
    };
    let roomy = Standing {
        rule: 1,
        ..after(quota(9, 1), 0)
    };
    // The service's own body and content-type give way to the configured format.
    let extra = h(&[("content-type", "text/plain"), ("x-reason", "quota")]);
    let reply = rejection(
        &draft10_problem(),
        &rules(),
        &[route, roomy, tenant],
        Some(b"slow down"),
        extra,
        Protocol::Http,
        NO_SEED,
    );
    let Reply::Http {
        status,
        headers,
        body,
        details,
    } = reply
    else {
        panic!("http expected");
    };
    assert_eq!(status, 429);
    assert_eq!(details, "floodgate_rate_limited{per-tenant,per-route}");
    assert_eq!(
        headers,
        h(&[
            ("content-type", "application/problem+json"),
            ("retry-after", "1"),
            (
                "ratelimit-policy",
                r#""per-tenant";q=2;w=2, "per-route";q=3;w=3"#
            ),
            ("ratelimit", r#""per-tenant";r=0;t=1, "per-route";r=0;t=1"#),
            ("x-reason", "quota"),
        ])
    );
    let problem: serde_json::Value = serde_json::from_slice(body.as_bytes()).unwrap();
    assert_eq!(
        problem,
        serde_json::json!({
            "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
            "title": "Quota exceeded",
            "status": 429,
            "violated-policies": ["per-tenant", "per-route"],
        })
    );
}

#[test]
fn grpc_rejections_keep_their_message_whatever_the_body_format() {
    let denied = after(quota(1, 1), 1);
    let reply = rejection(
        &draft10_problem(),
        &rules(),
        &[denied],
        None,
        Headers::new(),
        Protocol::Grpc,
        NO_SEED,
    );
    let Reply::Grpc {
        message, metadata, ..
    } = reply
    else {
        panic!("grpc expected");
    };
    assert_eq!(message, "rate limited");
    assert!(metadata.iter().all(|(k, _)| k != "content-type"));
    assert!(metadata.iter().any(|(k, _)| k == "ratelimit"));
}

#[test]
fn a_problem_without_known_rules_leaves_violated_policies_out() {
    let problem: serde_json::Value =
        serde_json::from_slice(&crate::reply::problem::body(503, &[])).unwrap();
    assert_eq!(problem["status"], 503);
    assert!(problem.get("violated-policies").is_none());
}

/// draft-11 changed what `r` and `t` are called, not their syntax or, for these limits,
/// their values: the two settings answer the same rejection with the same bytes.
#[test]
fn draft11_sends_the_bytes_draft10_sends() {
    let draft11 = ResponseConfig {
        headers: crate::config::HeaderFields::Draft11,
        ..draft10_problem()
    };
    let cases = [
        vec![after(quota(2, 1), 2)],
        vec![
            Standing {
                rule: 1,
                ..after(quota(3, 1), 3)
            },
            after(quota(9, 2), 9),
        ],
    ];
    for standings in cases {
        let reply = |config: &ResponseConfig| {
            rejection(
                config,
                &rules(),
                &standings,
                None,
                Headers::new(),
                Protocol::Http,
                NO_SEED,
            )
        };
        let (ten, eleven) = (reply(&draft10_problem()), reply(&draft11));
        assert_eq!(ten, eleven);
        let Reply::Http { headers, .. } = eleven else {
            panic!("http expected");
        };
        assert!(headers.iter().any(|(k, _)| k == "ratelimit"));
    }
}
