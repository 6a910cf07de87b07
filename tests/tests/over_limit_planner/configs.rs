//! The two configurations a case generates: floodgate-server's YAML (limits per key and
//! value, `replaces`, `quota_mode`, shadow, leases) and the filter's plugin JSON.

use super::KEYS;
use proptest::prelude::*;

/// One limit of the service's configuration.
#[derive(Debug, Clone)]
pub struct Limit {
    pub key: usize,
    /// A limit for one value of the key (index into its values), or for any value.
    pub value: Option<usize>,
    pub requests_per_unit: u32,
    pub per_minute: bool,
    pub algorithm: &'static str,
    pub quota_mode: bool,
    pub shadow_mode: bool,
    /// Indices into the configuration's limits whose names this one replaces.
    pub replaces: Vec<usize>,
    pub quota: Option<u32>,
}

pub fn limit() -> impl Strategy<Value = Limit> {
    (
        0..KEYS.len(),
        prop::option::of(0usize..2),
        1u32..4,
        any::<bool>(),
        prop::sample::select(vec![
            "fixed_window",
            "token_bucket",
            "sliding_window_counter",
            "sliding_window_log",
        ]),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
        prop::collection::vec(0usize..6, 0..2),
        prop::option::weighted(0.3, 1u32..4),
    )
        .prop_map(
            |(
                key,
                value,
                requests_per_unit,
                per_minute,
                algorithm,
                quota_mode,
                shadow_mode,
                replaces,
                quota,
            )| Limit {
                key,
                value,
                requests_per_unit,
                per_minute,
                algorithm,
                quota_mode,
                shadow_mode,
                replaces,
                quota,
            },
        )
}

/// The service's YAML: the limits, one per (key, value) at most (the first generated).
pub fn server_yaml(limits: &[Limit]) -> String {
    let mut seen = Vec::new();
    let mut out = String::from("domain: edge\ndescriptors:\n");
    for (i, l) in limits.iter().enumerate() {
        if seen.contains(&(l.key, l.value)) {
            continue;
        }
        seen.push((l.key, l.value));
        let (key, _, values) = KEYS[l.key];
        out.push_str(&format!("  - key: {key}\n"));
        if let Some(v) = l.value {
            out.push_str(&format!("    value: {}\n", values[v]));
        }
        out.push_str(&format!(
            "    quota_mode: {}\n    shadow_mode: {}\n",
            l.quota_mode, l.shadow_mode
        ));
        let replaces: Vec<String> = l
            .replaces
            .iter()
            .filter(|&&r| r != i)
            .map(|r| format!("{{name: limit{r}}}"))
            .collect();
        out.push_str(&format!(
            "    rate_limit: {{name: limit{i}, unit: {}, requests_per_unit: {}, algorithm: {}, replaces: [{}]}}\n",
            if l.per_minute { "minute" } else { "second" },
            l.requests_per_unit,
            l.algorithm,
            replaces.join(", ")
        ));
        if let Some(q) = l.quota {
            out.push_str(&format!("    quota: {{requests: {q}, valid_ms: 2000}}\n"));
        }
    }
    out
}

/// One filter rule per key: (shadow, leases, cost header).
pub fn plugin(rules: &[(bool, bool, bool)]) -> String {
    let rules: Vec<serde_json::Value> = KEYS
        .iter()
        .zip(rules)
        .map(|(&(key, header, _), &(shadow, lease, cost))| {
            let mut r = serde_json::json!({
                "name": key,
                "descriptors": [{"key": key, "header": header}],
                "global": {"quota": lease},
                "shadow": shadow,
            });
            if cost {
                r["cost"] = serde_json::json!({"header": "x-cost"});
            }
            r
        })
        .collect();
    serde_json::json!({
        "rls": {"cluster": "ratelimit", "domain": "edge"},
        "rules": rules,
    })
    .to_string()
}
