use super::*;
use crate::testing::h;
use crate::wire::proto::envoy::config::core::v3::HeaderValue;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use prost::Message;

fn status(code: Code, remaining: u32, reset_s: i64, limit: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: limit,
            unit: 2,
            unit_multiplier: None,
        }),
        limit_remaining: remaining,
        duration_until_reset: Some(prost_types::Duration {
            seconds: reset_s,
            nanos: 0,
        }),
        quota: None,
    }
}

fn response(overall: Code, statuses: Vec<DescriptorStatus>) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: overall as i32,
        statuses,
        ..RateLimitResponse::default()
    }
}

fn answer(r: RateLimitResponse) -> Answer {
    Answer::Response(r.encode_to_vec())
}

#[test]
fn ok_answers_pass_headers_through() {
    let mut r = response(Code::Ok, vec![status(Code::Ok, 7, 30, 10)]);
    r.request_headers_to_add = vec![HeaderValue {
        key: "x-quota".into(),
        value: "7".into(),
        raw_value: vec![],
    }];
    r.response_headers_to_add = vec![HeaderValue {
        key: "X-Raw".into(),
        value: String::new(),
        raw_value: b"bytes".to_vec(),
    }];
    let d = interpret(&answer(r), &[false]).unwrap();
    assert!(!d.over_limit);
    assert_eq!(flags(&d, 1), [false]);
    assert_eq!(d.request_headers, vec![("x-quota".into(), "7".into())]);
    assert_eq!(d.response_headers, h(&[("x-raw", "bytes")]));
    assert_eq!(
        d.standings,
        vec![Standing {
            rule: 0,
            limit: 10,
            window_s: Some(60),
            remaining: 7,
            reset_ns: Some(30_000_000_000),
            next_ns: Some(30_000_000_000),
            allowed: true,
            retry_ns: Some(0),
            shadow: false
        }]
    );
}

#[test]
fn a_window_of_several_units_is_its_unit_times_the_multiplier() {
    // 5 per 5 minutes: MINUTE with unit_multiplier 5 (field 4), as floodgate-server
    // answers a `unit_multiplier: 5` limit; an older service sends no multiplier.
    let mut five = status(Code::Ok, 4, 200, 5);
    if let Some(l) = five.current_limit.as_mut() {
        l.unit_multiplier = Some(5);
    }
    let d = interpret(
        &answer(response(Code::Ok, vec![five, status(Code::Ok, 4, 20, 5)])),
        &[false, false],
    )
    .unwrap();
    assert_eq!(d.standings[0].window_s, Some(300));
    assert_eq!(d.standings[1].window_s, Some(60));
}

#[test]
fn over_limit_answers_reject_unless_only_shadow_rules_are_over() {
    let both = vec![
        status(Code::Ok, 3, 5, 10),
        status(Code::OverLimit, 0, 42, 30),
    ];
    let d = interpret(
        &answer(response(Code::OverLimit, both.clone())),
        &[false, false],
    )
    .unwrap();
    assert!(d.over_limit);
    assert_eq!(flags(&d, 2), [false, true]);
    assert_eq!(d.standings[1].retry_ns, Some(42_000_000_000));
    let d = interpret(&answer(response(Code::OverLimit, both)), &[false, true]).unwrap();
    assert!(!d.over_limit, "only the shadow rule is over");
    assert_eq!(flags(&d, 2), [false, true]);
}

#[test]
fn without_statuses_the_overall_code_decides() {
    let mut r = response(Code::OverLimit, vec![]);
    r.raw_body = b"go away".to_vec();
    let d = interpret(&answer(r.clone()), &[false, false]).unwrap();
    assert!(d.over_limit);
    assert_eq!(flags(&d, 2), [true, true]);
    assert!(d.standings.is_empty());
    assert_eq!(d.raw_body, b"go away");
    let all_shadow = interpret(&answer(r), &[true, true]).unwrap();
    assert!(!all_shadow.over_limit);
}

#[test]
fn failures_are_told_apart() {
    let status = |code: u32, message: &str| Answer::Status {
        code,
        message: message.to_string(),
    };
    // What Envoy 1.40 says, as seen in the end-to-end tests.
    let timeout = status(14, "upstream request timeout{response_timeout}");
    assert_eq!(interpret(&timeout, &[false]), Err(Failure::Timeout));
    assert_eq!(
        interpret(&status(1, "upstream request timeout"), &[false]),
        Err(Failure::Timeout)
    );
    assert_eq!(interpret(&status(4, ""), &[false]), Err(Failure::Timeout));
    let refused = status(
        14,
        "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure",
    );
    assert_eq!(interpret(&refused, &[false]), Err(Failure::Unavailable));
    assert_eq!(
        interpret(&status(14, "no healthy upstream"), &[false]),
        Err(Failure::Unavailable)
    );
    assert_eq!(
        interpret(&status(13, "internal"), &[false]),
        Err(Failure::Status)
    );
    assert_eq!(
        interpret(&Answer::NotSent(4), &[false]),
        Err(Failure::NotSent)
    );
    assert_eq!(
        interpret(&answer(response(Code::Unknown, vec![])), &[false]),
        Err(Failure::UnknownCode)
    );
    assert_eq!(
        interpret(&Answer::Response(vec![0xff, 0xff, 0xff]), &[false]),
        Err(Failure::BadResponse)
    );
    assert_eq!(
        interpret(&Answer::Undecodable, &[false]),
        Err(Failure::BadResponse)
    );
}

#[test]
fn unsafe_service_headers_are_dropped_counted_and_the_verdict_kept() {
    let hv = |key: &str, value: &str, raw: &[u8]| HeaderValue {
        key: key.into(),
        value: value.into(),
        raw_value: raw.to_vec(),
    };
    let mut r = response(Code::OverLimit, vec![]);
    r.response_headers_to_add = vec![
        hv("x-a", "v\r\nx-injected: yes", b""),
        hv("x-raw", "", b"a\nb"),
        hv(":status", "502", b""),
        hv("content-length", "3", b""),
        hv("", "v", b""),
        hv("x-good", "1", b""),
    ];
    r.request_headers_to_add = vec![
        hv(":path", "/admin", b""),
        hv("Host", "evil.example", b""),
        hv("x-good-req", "1", b""),
    ];
    let d = interpret(&answer(r), &[false]).unwrap();
    assert!(d.over_limit, "one bad header does not change the verdict");
    assert_eq!(d.response_headers, h(&[("x-good", "1")]));
    assert_eq!(d.request_headers, vec![("x-good-req".into(), "1".into())]);
    assert_eq!(d.dropped_headers, 7);
}

/// A grant in `DescriptorStatus.quota` (field 5), bytes written by hand from the public
/// proto: `Quota { requests: 10, valid_until: 1_900_000_000 s + 5 ns }`.
#[test]
fn a_descriptor_grant_is_decoded_from_its_wire_bytes() {
    let bytes = vec![
        0x08, 0x01, // overall_code OK
        0x12, 0x10, // statuses[0], 16 bytes
        0x08, 0x01, // code OK
        0x2a, 0x0c, // quota (field 5), 12 bytes
        0x08, 0x0a, // requests 10
        0x12, 0x08, // valid_until, 8 bytes
        0x08, 0x80, 0xe6, 0xfe, 0x89, 0x07, // seconds 1 900 000 000
        0x10, 0x05, // nanos 5
    ];
    let d = interpret(&Answer::Response(bytes), &[false]).unwrap();
    assert!(!d.over_limit);
    let expected = Grant {
        requests: 10,
        valid_until_ns: 1_900_000_000_000_000_005,
    };
    assert_eq!(d.grants, vec![Some(expected)]);
}

/// A grant of 0 requests, or without `valid_until`, is no grant; the whole-request
/// `quota` (field 7) is not read; and the verdict is the same with or without grants.
#[test]
fn unusable_grants_are_ignored_and_grants_never_change_the_verdict() {
    use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
    use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::Quota;
    let until = Some(ExpirationSpecifier::ValidUntil(prost_types::Timestamp {
        seconds: 1_900_000_000,
        nanos: 0,
    }));
    let quota = |requests, expiration_specifier| Quota {
        requests,
        expiration_specifier,
        id: String::new(),
    };
    let plain = response(
        Code::Ok,
        vec![status(Code::Ok, 5, 30, 10), status(Code::Ok, 5, 30, 10)],
    );
    let mut granted = plain.clone();
    granted.statuses[0].quota = Some(quota(0, until));
    granted.statuses[1].quota = Some(quota(7, None));
    granted.quota = Some(quota(50, until));
    let d = interpret(&answer(granted), &[false, false]).unwrap();
    assert!(d.grants.is_empty(), "no usable grant: {:?}", d.grants);
    assert_eq!(d, interpret(&answer(plain), &[false, false]).unwrap());
}

/// A check-only descriptor (cost 0) carries `hits_addend` present and 0, and the whole
/// request says so.
#[test]
fn an_admitting_answer_leaves_its_standings_out_unless_asked_and_a_denial_never_does() {
    let ok = answer(response(
        Code::Ok,
        vec![
            status(Code::Ok, 7, 30, 10),
            status(Code::OverLimit, 0, 5, 1),
        ],
    ));
    let full = interpret(&ok, &[false, true]).unwrap();
    let bare = interpret_with(&ok, &[false, true], false).unwrap();
    assert!(bare.standings.is_empty());
    assert_eq!(full.standings.len(), 2);
    assert_eq!(bare.over, full.over);
    assert_eq!(flags(&bare, 2), [false, true]);
    assert_eq!(bare.over_limit, full.over_limit);
    assert!(!bare.over_limit);
    let denied = answer(response(
        Code::OverLimit,
        vec![status(Code::OverLimit, 0, 5, 1)],
    ));
    let bare = interpret_with(&denied, &[false], false).unwrap();
    assert_eq!(bare, interpret(&denied, &[false]).unwrap());
    assert!(bare.over_limit);
    assert_eq!(bare.standings.len(), 1);
}

/// The over-limit flags of the first `n` descriptors; every later bit is clear.
fn flags(d: &Decided, n: usize) -> Vec<bool> {
    assert_eq!(d.over >> n, 0, "no flag past the descriptors");
    (0..n).map(|i| d.is_over(i)).collect()
}
