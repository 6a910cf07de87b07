//! The plugin configurations `make bench` runs, in one place: the bench (a real Envoy,
//! timed) and the cost model (this crate, counted) run the same ones, so that a count
//! and a timing always describe the same configuration.

use serde_json::{json, Value};

/// floodgate's configuration for the local cases: one bucket per tenant.
pub fn local(capacity: u64, refill_per_second: u64) -> Value {
    json!({"rules": [{
        "name": "bench",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": capacity, "refill_per_second": refill_per_second}
    }]})
}

/// Local mode with a limit never reached (the "allowed" cases).
pub fn local_allowed() -> Value {
    local(4_000_000_000, 1_000_000_000)
}

/// Local mode rejecting every request after the first (the "all rejected" cases).
pub fn local_rejecting() -> Value {
    local(1, 0)
}

/// A concurrency rule never full: a slot taken at admission, given back at the stream's
/// end (`proxy_on_delete`), beside "local allowed".
pub fn local_concurrency() -> Value {
    json!({"rules": [{
        "name": "bench",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "concurrency": {"max": 1_000_000}
    }]})
}

/// floodgate's configuration for the global cases: one descriptor, fail closed.
pub fn global() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "bench", "timeout_ms": 1000, "failure_mode": "deny"},
        "rules": [{
            "name": "bench",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {}
        }]
    })
}

/// The global configuration with the over-limit cache off: every request calls.
pub fn global_no_cache() -> Value {
    let mut plugin = global();
    plugin["rls"]["cache_over_limit"] = json!(false);
    plugin
}

/// The global configuration on a rule that asks for no lease: no lease look-up, no quota
/// header on the call.
pub fn global_no_quota() -> Value {
    let mut plugin = global();
    plugin["rules"][0]["global"] = json!({"quota": false});
    plugin
}

/// The global configuration with neither a lease nor the over-limit cache: a call per
/// request and nothing in shared data, the least floodgate's global mode does.
pub fn global_lean() -> Value {
    let mut plugin = global_no_quota();
    plugin["rls"]["cache_over_limit"] = json!(false);
    plugin
}

/// The global configuration with a fallback bucket on its rule: what a fallback costs a
/// request the service answers.
pub fn fallback() -> Value {
    let mut plugin = global();
    plugin["rules"][0]["global"] = json!({"fallback": {"capacity": 100, "refill_per_second": 10}});
    plugin
}

/// The global configuration on a descriptor the service limits to 1 per hour: after the
/// first request, the over-limit cache rejects every one.
pub fn over_limit() -> Value {
    let mut plugin = global();
    plugin["rules"][0]["descriptors"] = json!([{"key": "over", "value": "all"}]);
    plugin
}

/// The global configuration on the leased descriptor (see [`SERVER_CONFIG`]).
pub fn leased() -> Value {
    let mut plugin = global();
    plugin["rules"][0]["descriptors"] = json!([{"key": "leased", "header": "x-tenant-id"}]);
    plugin
}

/// A fleet-wide concurrency rule: the call takes a hold under a minted id, and
/// `proxy_on_delete` sends its release in the background.
pub fn global_concurrency() -> Value {
    let mut plugin = global();
    plugin["rules"][0]["descriptors"] = json!([{"key": "streams", "header": "x-tenant-id"}]);
    plugin["rules"][0]
        .as_object_mut()
        .map(|rule| rule.remove("global"));
    plugin["rules"][0]["concurrency"] = json!({"global": {}});
    plugin
}

/// The response-cost build's local configuration: a token budget per tenant charged the
/// `usage.total_tokens` of each JSON answer or event stream, never exhausted.
pub fn llm_local() -> Value {
    json!({"rules": [{
        "name": "tenant-tokens",
        "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
        "local": {"capacity": 4_000_000_000u64, "refill_per_second": 1_000_000_000u64},
        "cost": {"response": {"json": "usage.total_tokens", "estimate": 50, "fallback": 1}}
    }]})
}

/// The response-cost build's global configuration: a check-only call at admission, a
/// charge call when the response ends.
pub fn llm_global() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "bench", "timeout_ms": 1000, "failure_mode": "deny"},
        "rules": [{
            "name": "tenant-tokens",
            "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
            "global": {},
            "cost": {"response": {"json": "usage.total_tokens"}}
        }]
    })
}

/// floodgate-server's configuration for the global cases: `tenant` never reached, `over`
/// 1 per hour, `leased` never reached and leased 100 hits at a time, `streams` a
/// concurrency limit never reached.
pub const SERVER_CONFIG: &str = "
domain: bench
descriptors:
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 4000000000
  - key: over
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: leased
    rate_limit:
      unit: hour
      requests_per_unit: 4000000000
    quota: { requests: 100, valid_ms: 1000 }
  - key: streams
    rate_limit:
      unit: minute
      requests_per_unit: 10000
      algorithm: concurrency
";
