//! Answers as envoyproxy/ratelimit gives them, and the operator options.

use super::*;

#[test]
fn an_empty_descriptor_list_is_invalid_argument_as_in_the_reference() {
    let svc = service(100, false);
    let e = block_on(svc.decide(request("web", vec![], 0))).unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(e.message(), "rate limit descriptor list must not be empty");
    assert!(svc
        .metrics
        .render()
        .contains("floodgate_errors_total{kind=\"invalid_argument\"} 1"));
}

#[test]
fn over_limit_reports_no_remaining_even_when_some_is_left() {
    let svc = service(100, false);
    // 2 per second: one used, so a cost of 2 is over with 1 left.
    block_on(svc.decide(request("web", vec![desc(&[("user", "a")], None)], 0))).unwrap();
    let r = block_on(svc.decide(request("web", vec![desc(&[("user", "a")], Some(2))], 0))).unwrap();
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
}

#[test]
fn a_rejected_request_reports_what_its_other_limits_really_have() {
    let svc = service(100, false);
    let both = || {
        request(
            "web",
            vec![
                desc(&[("plan", "free")], None),
                desc(&[("user", "a")], None),
            ],
            0,
        )
    };
    for _ in 0..2 {
        block_on(svc.decide(both())).unwrap();
    }
    // The user limit (2/s) is spent: rejected, and the plan's 98 are untouched.
    for _ in 0..3 {
        let r = block_on(svc.decide(both())).unwrap();
        assert_eq!(r.overall_code, Code::OverLimit as i32);
        assert_eq!(r.statuses[0].code, Code::Ok as i32);
        assert_eq!(
            r.statuses[0].limit_remaining, 98,
            "not 97: nothing was taken"
        );
        assert_eq!(r.statuses[1].limit_remaining, 0);
    }
}

fn overridden(entries: &[(&str, &str)], rpu: u32, unit: i32) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(
            crate::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride {
                requests_per_unit: rpu,
                unit,
            },
        ),
        ..desc(entries, None)
    }
}

#[test]
fn a_descriptor_limit_override_replaces_the_configured_limit() {
    let svc = service(100, false);
    // user is configured at 2/s with a name; the override says 3 per minute.
    let user = || request("web", vec![overridden(&[("user", "a")], 3, 2)], 0);
    for left in [2, 1, 0] {
        let r = block_on(svc.decide(user())).unwrap();
        assert_eq!(r.statuses[0].code, Code::Ok as i32);
        assert_eq!(r.statuses[0].limit_remaining, left);
        let limit = r.statuses[0].current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("", 3, PbUnit::Minute as i32),
            "the override's limit, unnamed"
        );
    }
    let r = block_on(svc.decide(user())).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    // The configured limit's counter is its own: untouched by the override's.
    let r = block_on(svc.decide(request("web", vec![desc(&[("user", "a")], None)], 0))).unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 1);
}

#[test]
fn an_override_applies_where_nothing_matched_but_never_in_an_unknown_domain() {
    let svc = service(100, false);
    let r = block_on(svc.decide(request(
        "web",
        vec![overridden(&[("nomatch", "x")], 1, 1)],
        0,
    )))
    .unwrap();
    assert_eq!(r.statuses[0].code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let r = block_on(svc.decide(request(
        "web",
        vec![overridden(&[("nomatch", "x")], 1, 1)],
        0,
    )))
    .unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let r = block_on(svc.decide(request(
        "other",
        vec![overridden(&[("nomatch", "x")], 1, 1)],
        0,
    )))
    .unwrap();
    assert_eq!(
        r.statuses,
        [no_limit_status(0)],
        "an unknown domain has no limits"
    );
}

#[test]
fn an_override_is_never_in_shadow_mode() {
    let svc = service(100, false);
    // ip is a shadow limit of 1/min; the override enforces 1/s.
    let ip = || request("web", vec![overridden(&[("ip", "9")], 1, 1)], 0);
    block_on(svc.decide(ip())).unwrap();
    let r = block_on(svc.decide(ip())).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
}

#[test]
fn an_override_of_zero_blocks_and_a_bad_unit_is_invalid_argument() {
    let svc = service(100, false);
    let r =
        block_on(svc.decide(request("web", vec![overridden(&[("user", "z")], 0, 1)], 0))).unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit),
        Some(0)
    );
    let e = block_on(svc.decide(request("web", vec![overridden(&[("user", "z")], 5, 0)], 0)))
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "descriptors[0].limit.unit: 0 is not a unit (1 second, 2 minute, 3 hour, 4 day, 5 month, 6 year, 7 week)"
    );
}

fn over_user(svc: &RlsService<MemoryStore<ManualClock>>) -> RateLimitResponse {
    for _ in 0..2 {
        block_on(svc.decide(request("web", vec![desc(&[("user", "g")], None)], 0))).unwrap();
    }
    block_on(svc.decide(request(
        "web",
        vec![
            desc(&[("plan", "free")], None),
            desc(&[("user", "g")], None),
        ],
        0,
    )))
    .unwrap()
}

#[test]
fn global_shadow_mode_answers_ok_and_keeps_the_statuses() {
    let svc = service_with(
        100,
        Options {
            shadow_mode: true,
            ..Options::default()
        },
    );
    let r = over_user(&svc);
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(
        r.statuses[1].code,
        Code::OverLimit as i32,
        "the status still says so"
    );
    let text = svc.metrics.render();
    assert!(
        text.contains("floodgate_requests_total{result=\"shadow_over_limit\"} 1"),
        "{text}"
    );
    assert!(text.contains("floodgate_requests_total{result=\"over_limit\"} 0"));
}

#[test]
fn near_limit_counts_ok_decisions_above_the_ratio() {
    let svc = service_with(
        100,
        Options {
            near_limit_ratio: 0.5,
            ..Options::default()
        },
    );
    // user: 2 per second, threshold ⌊2 × 0.5⌋ = 1: the first uses 1 (not above), the
    // second uses 2 (above), the third is over (not an OK decision).
    for _ in 0..3 {
        block_on(svc.decide(request("web", vec![desc(&[("user", "n")], None)], 0))).unwrap();
    }
    let text = svc.metrics.render();
    assert!(
        text.contains("floodgate_near_limit_total{domain=\"web\"} 1"),
        "{text}"
    );
}

fn reference_headers() -> Options {
    Options {
        headers: ResponseHeaders::Reference(HeaderNames {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "X-Reset".into(),
        }),
        ..Options::default()
    }
}

fn pairs(r: &RateLimitResponse) -> Vec<(&str, &str)> {
    r.response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect()
}

#[test]
fn reference_headers_name_the_tightest_limit_or_the_one_over() {
    let svc = service_with(100, reference_headers());
    let r = block_on(svc.decide(request(
        "web",
        vec![
            desc(&[("plan", "free")], None),
            desc(&[("user", "h")], None),
            desc(&[("ip", "1")], None),
        ],
        0,
    )))
    .unwrap();
    assert_eq!(
        pairs(&r),
        [
            ("RateLimit-Limit", "2"),
            ("RateLimit-Remaining", "1"),
            ("X-Reset", "1")
        ],
        "the user limit has the fewest left; the shadow ip limit never shows"
    );
    let r = over_user(&svc);
    assert_eq!(
        pairs(&r),
        [
            ("RateLimit-Limit", "2"),
            ("RateLimit-Remaining", "0"),
            ("X-Reset", "1")
        ]
    );
    let r = block_on(svc.decide(request("web", vec![desc(&[("nomatch", "x")], None)], 0))).unwrap();
    assert!(pairs(&r).is_empty(), "no limit, no headers");
}
