use super::*;
use crate::config::Config;

fn headers() -> CallHeaders {
    let config = Config::parse(
        br#"{"rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 25},
             "rules": [{"name": "g", "descriptors": [{"key": "k", "value": "v"}], "global": {}}]}"#,
    )
    .unwrap();
    CallHeaders::new(config.rls.as_ref().unwrap())
}

fn text(call: &Call, name: &str) -> Option<String> {
    call.header(name).map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn every_call_carries_the_grpc_headers_of_should_rate_limit() {
    let call = headers().plain(grpc::frame(b"m"));
    assert_eq!(text(&call, ":method").as_deref(), Some("POST"));
    assert_eq!(text(&call, ":path").as_deref(), Some(rls::PATH));
    assert_eq!(text(&call, ":authority").as_deref(), Some("ratelimit"));
    assert_eq!(
        text(&call, "content-type").as_deref(),
        Some("application/grpc")
    );
    assert_eq!(text(&call, "te").as_deref(), Some("trailers"));
    assert_eq!(text(&call, "grpc-timeout").as_deref(), Some("25m"));
    assert_eq!(text(&call, rls::QUOTA_HEADER), None);
    assert_eq!(text(&call, rls::CHARGE_HEADER.0), None);
    assert_eq!(call.message(), b"m");
}

#[test]
fn calls_share_the_sets_encoded_once() {
    let h = headers();
    let (a, b) = (h.plain(Vec::new()), h.plain(Vec::new()));
    assert!(a.shares_headers_with(&b), "one set, no copy");
    let none = h.with_quota(Vec::new(), 0);
    assert!(
        a.shares_headers_with(&none),
        "no quota asked: the plain set"
    );
    let (c, d) = (h.charge(Vec::new()), h.charge(Vec::new()));
    assert!(c.shares_headers_with(&d));
    assert!(!a.shares_headers_with(&c), "the charge set is its own");
}

#[test]
fn a_charge_and_a_quota_request_add_their_header() {
    let h = headers();
    let charge = h.charge(Vec::new());
    assert_eq!(text(&charge, rls::CHARGE_HEADER.0).as_deref(), Some("1"));
    assert_eq!(text(&charge, ":path").as_deref(), Some(rls::PATH));
    let quota = h.with_quota(Vec::new(), 3);
    assert_eq!(text(&quota, rls::QUOTA_HEADER).as_deref(), Some("0,1,2"));
    assert_eq!(text(&quota, rls::CHARGE_HEADER.0), None);
}

#[test]
fn quota_calls_of_one_size_share_a_set_and_larger_ones_own_theirs() {
    let h = headers();
    let (a, b) = (h.with_quota(Vec::new(), 2), h.with_quota(Vec::new(), 2));
    assert!(a.shares_headers_with(&b), "the set for 2 encoded once");
    let three = h.with_quota(Vec::new(), 3);
    assert!(!a.shares_headers_with(&three));
    assert_eq!(text(&a, rls::QUOTA_HEADER).as_deref(), Some("0,1"));
    assert_eq!(text(&three, rls::QUOTA_HEADER).as_deref(), Some("0,1,2"));
    // Asked again after a larger size was encoded: still the first set, unchanged.
    let again = h.with_quota(Vec::new(), 2);
    assert!(a.shares_headers_with(&again));
    let many = MAX_SHARED_QUOTA_SETS + 1;
    let (x, y) = (
        h.with_quota(Vec::new(), many),
        h.with_quota(Vec::new(), many),
    );
    assert!(!x.shares_headers_with(&y), "beyond the bound: each its own");
    let expected: Vec<String> = (0..many).map(|i| i.to_string()).collect();
    assert_eq!(
        text(&x, rls::QUOTA_HEADER).as_deref(),
        Some(expected.join(",").as_str())
    );
    assert!(h.quota.borrow().len() <= MAX_SHARED_QUOTA_SETS);
}

#[test]
fn a_hold_and_its_release_carry_the_id_and_nothing_of_quota_or_charge() {
    let h = headers();
    let hold = h.hold(grpc::frame(b"m"), "fg.0123");
    assert_eq!(text(&hold, HOLD_HEADER).as_deref(), Some("fg.0123"));
    assert_eq!(text(&hold, RELEASE_HEADER), None);
    assert_eq!(text(&hold, ":path").as_deref(), Some(rls::PATH));
    let release = h.release(grpc::frame(b"m"), "fg.0123");
    assert_eq!(text(&release, RELEASE_HEADER).as_deref(), Some("fg.0123"));
    for call in [&hold, &release] {
        assert_eq!(text(call, rls::QUOTA_HEADER), None);
        assert_eq!(text(call, rls::CHARGE_HEADER.0), None);
    }
    // Plain calls never carry either.
    let plain = h.plain(grpc::frame(b"m"));
    assert_eq!(text(&plain, HOLD_HEADER), None);
    assert_eq!(text(&plain, RELEASE_HEADER), None);
}

/// A hold's and a release's sets, made from the plain set, are the bytes the whole set
/// encoded with their header gives.
#[test]
fn a_hold_set_is_the_plain_set_and_its_header() {
    let calls = headers();
    for (name, id) in [
        (HOLD_HEADER, "abc"),
        (RELEASE_HEADER, ""),
        (HOLD_HEADER, "x".repeat(300).as_str()),
    ] {
        assert_eq!(calls.plain_and(name, id), calls.encode(Some((name, id))));
    }
}
