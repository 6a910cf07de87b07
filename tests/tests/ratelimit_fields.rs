//! The rate-limit fields end to end: draft-10 and -11 `RateLimit-Policy` / `RateLimit` headers,
//! the problem+json body, and the rule that rejected a request in Envoy's access log
//! (`%RESPONSE_CODE_DETAILS%`), through a real Envoy loading floodgate.wasm, in local
//! mode and against the real floodgate-server. Structured fields are checked with a real
//! parser (`sfv`).

use floodgate_integration::client::{get, Reply};
use floodgate_integration::{client, configs, wait, Envoy, Server, Upstream};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A parsed list member: the policy name and its Integer parameters, in order.
type Item = (String, Vec<(String, i64)>);

/// Parses a field as a Structured Field List of Items whose values are Strings and
/// whose parameters are Integers, the shape draft-10 gives both fields.
fn parse_list(value: &str) -> Vec<Item> {
    let list: sfv::List = sfv::Parser::new(value)
        .parse()
        .unwrap_or_else(|e| panic!("{value:?} is not a Structured Field List: {e}"));
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("{value:?}: an inner list where an Item belongs");
            };
            let name = item
                .bare_item
                .as_string()
                .unwrap_or_else(|| panic!("{value:?}: a policy is named by a String"))
                .as_str()
                .to_string();
            let params = item
                .params
                .iter()
                .map(|(k, v)| {
                    let n = v.as_integer().unwrap_or_else(|| panic!("{value:?}: {k:?}"));
                    (k.as_str().to_string(), i64::from(n))
                })
                .collect();
            (name, params)
        })
        .collect()
}

fn params(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// The `t` of a response's `"per-tenant";r=<remaining>;t=<t>` field, checked: the next
/// token of a bucket refilling one every 50 s, taken from just now. 50 exactly when less
/// than a second has gone by since the take that started the wait, 49 on a machine slow
/// enough that one has; never more (a reset is never later than the bucket says).
fn next_token_in(response: &Reply, remaining: i64) -> i64 {
    let field = response.header("ratelimit").unwrap_or_default();
    let items = parse_list(field);
    let [(name, fields)] = items.as_slice() else {
        panic!("one policy expected in {field:?}");
    };
    assert_eq!(name, "per-tenant", "{field:?}");
    let [(r, r_value), (t, t_value)] = fields.as_slice() else {
        panic!("r and t expected in {field:?}");
    };
    assert_eq!((r.as_str(), t.as_str()), ("r", "t"), "{field:?}");
    assert_eq!(*r_value, remaining, "{field:?}");
    assert!((49..=50).contains(t_value), "{field:?}");
    *t_value
}

/// `bootstrap` with a file access log on its first listener writing
/// `<status> <response code details>` per request to `path`.
fn with_access_log(bootstrap: &str, path: &Path) -> String {
    let mut config: Value = serde_json::from_str(bootstrap).expect("bootstrap is JSON");
    let hcm = &mut config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        ["typed_config"];
    hcm["access_log"] = json!([{
        "name": "envoy.access_loggers.file",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
            "path": path.display().to_string(),
            "log_format": {"text_format_source": {
                "inline_string": "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS%\n"
            }}
        }
    }]);
    config.to_string()
}

/// Waits until Envoy has flushed `lines` access-log lines to `path`, and returns them.
async fn access_log(path: &Path, lines: usize) -> Vec<String> {
    wait::until("the access log lines", Duration::from_secs(10), || {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        async move {
            let got: Vec<String> = text.lines().map(str::to_string).collect();
            (got.len() >= lines).then_some(got)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_local_rejection_has_draft10_fields_a_problem_body_and_its_rule_in_the_access_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("access.log");
    let plugin = json!({
        "rules": [{
            "name": "per-tenant",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "local": {"capacity": 2, "refill_per_second": 0.02}
        }],
        "response": {"headers": "draft10", "body_format": "problem+json"}
    });
    let upstream = Upstream::start().await;
    let bootstrap = configs::floodgate_local(&plugin, upstream.addr());
    let envoy = Envoy::start(&with_access_log(&bootstrap, &log), 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    for _ in 0..2 {
        let allowed = get(&c, &url, &[("x-tenant-id", "acme")]).await;
        assert_eq!(allowed.status, 200);
        // Without headers_on_allowed an allowed response carries no rate-limit field.
        assert_eq!(allowed.header("ratelimit"), None);
    }
    let denied = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(denied.status, 429);
    assert_eq!(upstream.count(), 2);
    // 2 tokens refilled at 0.02 per second: a window of 100 s; the next token 50 s away
    // (49 once a second has gone by since the first take: a slow machine).
    assert_eq!(
        denied.header("ratelimit-policy"),
        Some(r#""per-tenant";q=2;w=100"#)
    );
    let t = next_token_in(&denied, 0);
    assert_eq!(denied.header("retry-after"), Some(t.to_string().as_str()));
    assert_eq!(denied.header("x-ratelimit-limit"), None);
    assert_eq!(
        parse_list(denied.header("ratelimit-policy").unwrap_or_default()),
        vec![("per-tenant".into(), params(&[("q", 2), ("w", 100)]))]
    );
    assert_eq!(
        parse_list(denied.header("ratelimit").unwrap_or_default()),
        vec![("per-tenant".into(), params(&[("r", 0), ("t", t)]))]
    );
    assert_eq!(
        denied.header("content-type"),
        Some("application/problem+json")
    );
    let problem: Value = serde_json::from_str(&denied.body).expect("a JSON body");
    assert_eq!(
        problem,
        json!({
            "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
            "title": "Quota exceeded",
            "status": 429,
            "violated-policies": ["per-tenant"]
        })
    );
    assert_eq!(
        access_log(&log, 3).await,
        [
            "200 via_upstream",
            "200 via_upstream",
            "429 floodgate_rate_limited{per-tenant}"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_allowed_response_shows_every_rule_in_both_field_sets() {
    let plugin = json!({
        "rules": [
            {"name": "per-tenant", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
             "local": {"capacity": 10, "refill_per_second": 1}},
            {"name": "per-route", "descriptors": [{"key": "route", "source": "path"}],
             "local": {"capacity": 5, "refill_per_second": 0}}
        ],
        "response": {"headers": "both", "headers_on_allowed": true}
    });
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let allowed = get(
        &client(),
        &envoy.url("ingress", "/items"),
        &[("x-tenant-id", "acme")],
    )
    .await;
    assert_eq!(allowed.status, 200);
    assert_eq!(
        allowed.header("ratelimit-policy"),
        Some(r#""per-tenant";q=10;w=10, "per-route";q=5"#)
    );
    assert_eq!(
        allowed.header("ratelimit"),
        Some(r#""per-tenant";r=9;t=1, "per-route";r=4"#)
    );
    assert_eq!(
        parse_list(allowed.header("ratelimit").unwrap_or_default()),
        vec![
            ("per-tenant".into(), params(&[("r", 9), ("t", 1)])),
            ("per-route".into(), params(&[("r", 4)])),
        ]
    );
    // draft-03 as before: the tightest limit.
    assert_eq!(allowed.header("x-ratelimit-limit"), Some("5"));
    assert_eq!(allowed.header("x-ratelimit-remaining"), Some("4"));
    assert_eq!(allowed.header("x-ratelimit-reset"), None);
}

/// `draft11`: draft-11's reading of the same fields, so the same bytes as `draft10`; a
/// client that keeps to `r` within `t` is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn draft11_sends_the_available_quota_and_its_effective_window() {
    let plugin = json!({
        "rules": [{"name": "per-tenant", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
                   "local": {"capacity": 2, "refill_per_second": 0.02}}],
        "response": {"headers": "draft11", "headers_on_allowed": true}
    });
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&configs::floodgate_local(&plugin, upstream.addr()), 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    let tenant = [("x-tenant-id", "acme")];
    // One token left, and until the next one (50 s away) it is all there is.
    let first = get(&c, &url, &tenant).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""per-tenant";q=2;w=100"#)
    );
    assert_eq!(first.header("ratelimit"), Some(r#""per-tenant";r=1;t=50"#));
    // Keeping to r within t: admitted.
    let second = get(&c, &url, &tenant).await;
    assert_eq!(second.status, 200);
    next_token_in(&second, 0);
    let denied = get(&c, &url, &tenant).await;
    assert_eq!(denied.status, 429);
    let t = next_token_in(&denied, 0);
    assert_eq!(denied.header("retry-after"), Some(t.to_string().as_str()));
    assert_eq!(denied.header("x-ratelimit-limit"), None);
    assert_eq!(
        parse_list(denied.header("ratelimit-policy").unwrap_or_default()),
        vec![("per-tenant".into(), params(&[("q", 2), ("w", 100)]))]
    );
    assert_eq!(upstream.count(), 2);
}

/// A fixed window of an hour: the test keeps clear of its end, so its count never starts
/// afresh between the admissions and the denial.
const THREE_PER_HOUR: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 3
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_global_rejection_shows_the_services_limit_and_its_rule() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("access.log");
    let server = Server::start(THREE_PER_HOUR, &[]);
    let upstream = Upstream::start().await;
    let plugin = json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2000, "failure_mode": "deny"},
        "rules": [{"name": "per-tenant", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
                   "global": {}}],
        "response": {"headers": "draft10", "body_format": "problem+json", "headers_on_allowed": true},
        "failure_status": 503
    });
    let bootstrap = configs::floodgate_global(&plugin, upstream.addr(), server.grpc());
    let envoy = Envoy::start(&with_access_log(&bootstrap, &log), 2).await;
    let (c, url) = (client(), envoy.url("ingress", "/"));
    // At least 20 s left in the hour: far more than the 5 requests take.
    wait::clear_of_window_end(Duration::from_secs(3_600), Duration::from_secs(20)).await;
    let first = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""per-tenant";q=3;w=3600"#)
    );
    let limit = parse_list(first.header("ratelimit").unwrap_or_default());
    let [(name, p)] = &limit[..] else {
        panic!("one item expected: {limit:?}");
    };
    assert_eq!(name, "per-tenant");
    assert_eq!(p[0], ("r".to_string(), 2));
    assert_eq!(p[1].0, "t");
    assert!((1..=3_600).contains(&p[1].1), "{p:?}");
    for _ in 0..2 {
        assert_eq!(get(&c, &url, &[("x-tenant-id", "acme")]).await.status, 200);
    }
    let denied = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(denied.status, 429);
    assert_eq!(upstream.count(), 3);
    let wait: i64 = denied
        .header("retry-after")
        .and_then(|s| s.parse().ok())
        .expect("retry-after");
    assert!((1..=3_600).contains(&wait), "retry-after {wait}");
    // The service's answer: its limit per hour, nothing left, back when its window ends.
    assert_eq!(
        denied.header("ratelimit-policy"),
        Some(r#""per-tenant";q=3;w=3600"#)
    );
    assert_eq!(
        denied.header("ratelimit"),
        Some(format!(r#""per-tenant";r=0;t={wait}"#).as_str())
    );
    let problem: Value = serde_json::from_str(&denied.body).expect("a JSON body");
    assert_eq!(problem["violated-policies"], json!(["per-tenant"]));
    assert_eq!(problem["status"], 429);
    // The next one is answered by the over-limit cache, which keeps the limit, not its
    // unit: the same policy without `w`.
    let cached = get(&c, &url, &[("x-tenant-id", "acme")]).await;
    assert_eq!(cached.status, 429);
    assert_eq!(
        cached.header("ratelimit-policy"),
        Some(r#""per-tenant";q=3"#)
    );
    envoy
        .expect_stat("wasmcustom.floodgate.over_limit_cached", 1)
        .await;
    let lines = access_log(&log, 5).await;
    assert_eq!(
        lines[3..],
        [
            "429 floodgate_rate_limited{per-tenant}",
            "429 floodgate_rate_limited{per-tenant}"
        ]
    );
}
