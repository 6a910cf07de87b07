//! Concurrency rules' configuration: what is accepted, and each refusal with its path.

use crate::config::{Concurrency, Config, Limit};

fn rule(limit: &str) -> String {
    format!(r#"{{"rules":[{{"name":"s","descriptors":[{{"key":"t","header":"x-t"}}],{limit}}}]}}"#)
}

fn error(limit: &str) -> String {
    Config::parse(rule(limit).as_bytes())
        .unwrap_err()
        .to_string()
}

#[test]
fn max_and_the_default_duration() {
    let config = Config::parse(rule(r#""concurrency":{"max":3}"#).as_bytes()).unwrap();
    assert_eq!(
        config.rules[0].limit,
        Limit::Concurrency(Concurrency {
            max: 3,
            max_duration_ms: 300_000
        })
    );
    let config = Config::parse(
        rule(r#""concurrency":{"max":1,"max_duration_seconds":2},"cost":{"header":"x-n"}"#)
            .as_bytes(),
    )
    .unwrap();
    assert!(matches!(
        config.rules[0].limit,
        Limit::Concurrency(Concurrency {
            max_duration_ms: 2_000,
            ..
        })
    ));
    assert_eq!(config.rules[0].cost_header.as_deref(), Some("x-n"));
}

#[test]
fn each_refusal_names_its_field() {
    for (limit, expected) in [
        (
            r#""concurrency":{"max":0}"#,
            "rules[0].concurrency.max: must be at least 1",
        ),
        (
            r#""concurrency":{"max":1000001}"#,
            "rules[0].concurrency.max: must be at most 1000000",
        ),
        (
            r#""concurrency":{}"#,
            "rules[0].concurrency: missing field `max`",
        ),
        (
            r#""concurrency":{"max":1,"max_duration_seconds":0}"#,
            "rules[0].concurrency.max_duration_seconds: must be at least 1",
        ),
        (
            r#""concurrency":{"max":1,"max_duration_seconds":86401}"#,
            "rules[0].concurrency.max_duration_seconds: must be at most 86400 (one day)",
        ),
        (
            r#""concurrency":{"global":{}}"#,
            "rules[0].concurrency.global: needs the top-level `rls` section",
        ),
        (
            r#""concurrency":{"max":1,"burst":2}"#,
            "rules[0].concurrency.burst: unknown field `burst`",
        ),
        (
            r#""concurrency":{"max":1},"local":{"capacity":1,"refill_per_second":1}"#,
            "rules[0]: exactly one of `local`",
        ),
        (
            r#""concurrency":{"max":1},"cost":{"response":{"header":"x-used"}}"#,
            "rules[0].cost.response: a concurrency rule's cost is the slots a request holds",
        ),
    ] {
        let got = error(limit);
        assert!(got.starts_with(expected), "{limit}: {got}");
    }
}

fn fleet(limit: &str) -> Result<Config, String> {
    let json = format!(
        r#"{{"rls":{{"cluster":"rl","domain":"d"}},"rules":[{{"name":"s","descriptors":[{{"key":"t","header":"x-t"}}],{limit}}}]}}"#
    );
    Config::parse(json.as_bytes()).map_err(|e| e.to_string())
}

#[test]
fn the_fleet_wide_form_is_the_services_limit_and_nothing_else() {
    let config =
        fleet(r#""concurrency":{"global":{}},"cost":{"header":"x-n"},"shadow":true"#).unwrap();
    assert_eq!(config.rules[0].limit, Limit::GlobalConcurrency);
    assert!(config.rules[0].limit.is_asked() && config.rules[0].limit.is_concurrency());
    assert_eq!(config.rules[0].cost_header.as_deref(), Some("x-n"));
    // Never leased: the call that takes the hold must be made.
    assert!(!config.rules[0].asks_for_lease());
    for (limit, expected) in [
        (
            r#""concurrency":{"global":{},"max":3}"#,
            "rules[0].concurrency.max: the fleet-wide form's limit",
        ),
        (
            r#""concurrency":{"global":{},"max_duration_seconds":3}"#,
            "rules[0].concurrency.max_duration_seconds: the fleet-wide form's limit",
        ),
        (
            r#""concurrency":{"global":{"quota":false}}"#,
            "rules[0].concurrency.global.quota: unknown field `quota`, there are no fields",
        ),
        (
            r#""concurrency":{"global":{}},"global":{}"#,
            "rules[0]: exactly one of `local`",
        ),
        (
            r#""concurrency":{"global":{}},"cost":{"response":{"header":"x-used"}}"#,
            "rules[0].cost.response: a concurrency rule's cost",
        ),
    ] {
        let got = fleet(limit).unwrap_err();
        assert!(got.starts_with(expected), "{limit}: {got}");
    }
}
