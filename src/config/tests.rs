use super::*;
use std::path::Path;

const EXAMPLE: &str = r#"{
  "rules": [
    {
      "name": "per-tenant",
      "match": {"path_prefix": "/api/", "methods": ["GET", "post"]},
      "descriptors": [
        {"key": "tenant", "header": "X-Tenant-Id"},
        {"key": "client", "source": "remote_address"},
        {"key": "route", "value": "api"}
      ],
      "local": {"capacity": 100, "refill_per_second": 10},
      "shadow": false
    }
  ],
  "response": {"status": 429, "body": "rate limited\n", "headers_on_allowed": false}
}"#;

#[test]
fn the_documented_example_parses() {
    let config = Config::parse(EXAMPLE.as_bytes()).unwrap();
    let rule = &config.rules[0];
    assert_eq!(rule.name, "per-tenant");
    assert_eq!(rule.matcher.path_prefix.as_deref(), Some("/api/"));
    assert_eq!(rule.matcher.methods, vec!["GET", "POST"]);
    assert_eq!(
        rule.entries,
        vec![
            Entry {
                key: "tenant".into(),
                source: Source::Header("x-tenant-id".into())
            },
            Entry {
                key: "client".into(),
                source: Source::RemoteAddress
            },
            Entry {
                key: "route".into(),
                source: Source::Value("api".into())
            },
        ]
    );
    assert_eq!(
        rule.limit,
        Limit::Local(Quota::new(100, 10_000_000).unwrap())
    );
    assert_eq!(rule.cost_header, None);
    assert!(!rule.shadow);
    assert_eq!(config.response.status, 429);
    assert_eq!(config.max_buckets.get(), DEFAULT_MAX_BUCKETS);
    assert_eq!(config.failure_mode, FailureMode::Allow);
}

#[test]
fn defaults_fill_what_is_left_out() {
    let config = Config::parse(
        br#"{"rules":[{"name":"a","descriptors":[{"key":"k","value":"v"}],
            "local":{"capacity":1,"refill_per_second":0}}]}"#,
    )
    .unwrap();
    assert_eq!(
        config.response,
        ResponseConfig {
            status: 429,
            body: "rate limited\n".into(),
            headers_on_allowed: false,
            headers: HeaderFields::Draft03,
            body_format: BodyFormat::Text,
            retry_after_jitter_ppm: 0,
        }
    );
    assert_eq!(config.rules[0].matcher, Match::default());
    assert_eq!(
        config.rules[0].limit,
        Limit::Local(Quota::new(1, 0).unwrap())
    );
    assert_eq!(config.failure_status, 500);
    assert_eq!(config.rls, None);
}

#[test]
fn fractional_rates_keep_six_decimals() {
    for (text, micro) in [
        ("0.1", 100_000),
        ("0.000001", 1),
        ("3.333333", 3_333_333),
        ("1000000000", 1_000_000_000_000_000),
        ("123456.654321", 123_456_654_321),
    ] {
        let json = format!(
            r#"{{"rules":[{{"name":"a","descriptors":[{{"key":"k","value":"v"}}],
                "local":{{"capacity":1,"refill_per_second":{text}}}}}]}}"#
        );
        let config = Config::parse(json.as_bytes()).unwrap();
        assert_eq!(
            config.rules[0].limit,
            Limit::Local(Quota::new(1, micro).unwrap()),
            "{text}"
        );
    }
}

/// The layered example of `docs/global-mode.md` and `examples/global/envoy.yaml`.
#[test]
fn global_rules_and_the_rate_limit_service_parse() {
    let config = Config::parse(
        br#"{
          "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 20, "failure_mode": "allow"},
          "rules": [
            {"name": "per-tenant-global", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
             "global": {"fallback": {"capacity": 5, "refill_per_second": 0.083333}},
             "cost": {"header": "X-Cost"}},
            {"name": "per-client-burst", "descriptors": [{"key": "client", "source": "remote_address"}],
             "local": {"capacity": 20, "refill_per_second": 5}}
          ],
          "failure_status": 503
        }"#,
    )
    .unwrap();
    assert_eq!(
        config.rls,
        Some(RlsConfig {
            cluster: "ratelimit".into(),
            domain: "edge".into(),
            timeout_ms: 20,
            failure_mode: FailureMode::Allow,
            over_limit_cache_slots: NonZeroU32::new(1024),
            over_limit_cache_max_seconds: 60,
            lease_slots: NonZeroU32::new(1024).unwrap(),
            max_grant_requests: 1_000_000,
            max_grant_valid_ms: 3_600_000,
        })
    );
    assert_eq!(
        config.rules[0].limit,
        Limit::Global {
            fallback: Some(Quota::new(5, 83_333).unwrap()),
            lease: true,
        }
    );
    assert_eq!(config.rules[0].cost_header.as_deref(), Some("x-cost"));
    assert_eq!(config.failure_status, 503);
    let defaults = Config::parse(
        br#"{"rls": {"cluster": "c", "domain": "d"},
             "rules": [{"name": "g", "descriptors": [{"key": "k", "value": "v"}], "global": {}}]}"#,
    )
    .unwrap();
    assert_eq!(defaults.rls.unwrap().timeout_ms, 20);
}

#[test]
fn a_global_rule_can_carry_a_local_fallback() {
    let config = Config::parse(
        br#"{"rls": {"cluster": "c", "domain": "d"},
             "rules": [{"name": "g", "descriptors": [{"key": "k", "value": "v"}],
                        "global": {"fallback": {"capacity": 5, "refill_per_second": 0.5}}}]}"#,
    )
    .unwrap();
    assert_eq!(
        config.rules[0].limit,
        Limit::Global {
            fallback: Some(Quota::new(5, 500_000).unwrap()),
            lease: true,
        }
    );
}

#[test]
fn too_many_rules_are_refused() {
    let rules: Vec<String> = (0..=MAX_RULES)
        .map(|i| {
            format!(
                r#"{{"name":"r{i}","descriptors":[{{"key":"k","value":"v"}}],
                    "local":{{"capacity":1,"refill_per_second":1}}}}"#
            )
        })
        .collect();
    let json = format!(r#"{{"rules":[{}]}}"#, rules.join(","));
    let err = Config::parse(json.as_bytes()).unwrap_err();
    assert_eq!(err.to_string(), "rules: must contain at most 64 rules");
}

/// Every file in `tests/fixtures/filter-config/invalid/` is refused with exactly the
/// message in the `.err` file beside it.
#[test]
fn each_invalid_fixture_fails_with_its_exact_message() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/filter-config/invalid");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let json = std::fs::read(&path).unwrap();
        let expected = std::fs::read_to_string(path.with_extension("err")).unwrap();
        let err = Config::parse(&json).expect_err(&format!("{} must be refused", path.display()));
        assert_eq!(
            err.to_string(),
            expected.trim_end(),
            "fixture {}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} fixtures found in {}",
        dir.display()
    );
}

#[test]
fn the_response_section_names_its_header_fields_and_body_format() {
    let with = |response: &str| {
        let json = format!(
            r#"{{"rules":[{{"name":"a","descriptors":[{{"key":"k","value":"v"}}],
                "local":{{"capacity":1,"refill_per_second":0}}}}],"response":{response}}}"#
        );
        Config::parse(json.as_bytes()).map(|c| c.response)
    };
    let cases = [
        ("draft03", HeaderFields::Draft03),
        ("draft10", HeaderFields::Draft10),
        ("draft11", HeaderFields::Draft11),
        ("both", HeaderFields::Both),
        ("none", HeaderFields::None),
    ];
    for (name, fields) in cases {
        let response = with(&format!(r#"{{"headers":"{name}"}}"#)).unwrap();
        assert_eq!(response.headers, fields);
        assert_eq!(response.body_format, BodyFormat::Text);
    }
    let problem = with(r#"{"body_format":"problem+json","headers":"both"}"#).unwrap();
    assert_eq!(problem.body_format, BodyFormat::ProblemJson);
    assert!(problem.headers.draft03() && problem.headers.structured());
    assert!(!HeaderFields::None.draft03() && !HeaderFields::None.structured());
}

#[test]
fn a_response_cost_parses_with_its_defaults_and_a_sum() {
    let config = Config::parse(
        br#"{"rules":[
          {"name":"openai","descriptors":[{"key":"tenant","header":"x-tenant-id"}],
           "local":{"capacity":1000,"refill_per_second":16.666666},
           "cost":{"response":{"json":"usage.total_tokens"}}},
          {"name":"anthropic","descriptors":[{"key":"tenant","header":"x-tenant-id"}],
           "local":{"capacity":1000,"refill_per_second":16.666666},
           "cost":{"response":{"json":["message.usage.input_tokens","usage.output_tokens"],
                   "estimate":50,"fallback":0,"max_scan_bytes":4096}}},
          {"name":"by-header","descriptors":[{"key":"tenant","header":"x-tenant-id"}],
           "local":{"capacity":1000,"refill_per_second":1},
           "cost":{"response":{"header":"X-Usage-Tokens"}}}]}"#,
    )
    .unwrap();
    let path = |p: &str| JsonPath {
        keys: p.split('.').map(str::to_string).collect(),
    };
    assert_eq!(
        config.rules[0].response_cost,
        Some(ResponseCost {
            source: UsageSource::Json(vec![0]),
            estimate: 1,
            fallback: 1,
            max: 1_000_000,
        })
    );
    assert_eq!(config.rules[0].cost_header, None);
    assert_eq!(
        config.rules[1].response_cost,
        Some(ResponseCost {
            source: UsageSource::Json(vec![1, 2]),
            estimate: 50,
            fallback: 0,
            max: 1_000_000,
        })
    );
    // Each distinct path once, for all rules.
    assert_eq!(
        config.json_paths,
        vec![
            path("usage.total_tokens"),
            path("message.usage.input_tokens"),
            path("usage.output_tokens")
        ]
    );
    // `max_scan_bytes` still loads, and is said to be ignored.
    assert_eq!(
        config.warnings,
        vec!["rules[1].cost.response.max_scan_bytes is ignored: responses are scanned as they stream, without keeping a copy, so no size needs a bound (remove it)".to_string()]
    );
    assert_eq!(
        config.rules[2].response_cost.as_ref().map(|c| &c.source),
        Some(&UsageSource::Header("x-usage-tokens".into()))
    );
}

#[test]
fn the_plain_build_refuses_a_response_cost_naming_the_rule() {
    let config = Config::parse(
        br#"{"rules":[
          {"name":"a","descriptors":[{"key":"k","value":"v"}],"local":{"capacity":1,"refill_per_second":0}},
          {"name":"b","descriptors":[{"key":"k","value":"v"}],"local":{"capacity":9,"refill_per_second":0},
           "cost":{"response":{"header":"x-usage-tokens"}}}]}"#,
    )
    .unwrap();
    assert_eq!(
        config.refuse_response_costs().unwrap_err().to_string(),
        "rules[1].cost.response: needs floodgate-llm.wasm, the build of the filter that reads responses (this one does not)"
    );
    let plain = Config::parse(EXAMPLE.as_bytes()).unwrap();
    assert_eq!(plain.refuse_response_costs(), Ok(()));
}
