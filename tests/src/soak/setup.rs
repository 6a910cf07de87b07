//! What the soak runs: the plugin configurations, the limiter's limits, the listener and
//! the clusters.

use crate::configs::{cluster, floodgate_filter, listener};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// The global rule's limit per tenant (floodgate-server, `sliding_window_log` over a
/// day: no window boundary and no refill falls inside a soak, so it is exact).
pub const GLOBAL_LIMIT: u64 = 4;

/// floodgate-server's configuration.
pub const SERVER_CONFIG: &str = r#"
domain: soak
descriptors:
  - key: tenant
    rate_limit: { unit: day, requests_per_unit: 4, algorithm: sliding_window_log }
"#;

/// floodgate-server's `--redis-timeout-ms`. Not the default 100 ms: on this 2-core
/// machine shared by several builds (load average above 10), a debug build's Redis
/// call sometimes took longer than 100 ms with Redis up, and took the failure mode
/// (rightly counted) in a calm stretch. The soak judges the faults it injects, so it
/// gives calls a margin far above any stall; a dead Redis still fails at once (its
/// connections are reset or refused), so outages are detected as fast.
pub const REDIS_TIMEOUT_MS: &str = "1000";

/// The name of the soak's listener.
pub const LISTENER: &str = "soak";

/// One version of the plugin configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugin {
    /// The local rule's capacity (never refilled: exactly this many per tenant).
    pub local_limit: u64,
    /// The rejection body, which tells the client which version answered.
    pub body: &'static str,
}

/// The configuration Envoy starts with.
pub const FIRST: Plugin = Plugin {
    local_limit: 5,
    body: "rate limited\n",
};

/// The configuration the listener update brings: another capacity and body.
pub const SECOND: Plugin = Plugin {
    local_limit: 3,
    body: "rate limited (listener update)\n",
};

/// Local buckets Envoy keeps: far above the local tenants of a long soak (about 11 new
/// ones a second at the default rate), so that none is ever evicted.
const MAX_BUCKETS: u64 = 100_000;

impl Plugin {
    /// The filter's JSON: a local rule on `/local/`, a global rule on `/global/`, both
    /// per `x-tenant-id`; `/open/` is limited by neither. The service's timeout (3 s) is
    /// well above floodgate-server's Redis timeout ([`REDIS_TIMEOUT_MS`]), so that during
    /// a Redis outage every failure Envoy sees is the server's UNAVAILABLE answer.
    pub fn json(&self) -> Value {
        let tenant = json!([{"key": "tenant", "header": "x-tenant-id"}]);
        json!({
            "rls": {"cluster": "ratelimit", "domain": "soak", "timeout_ms": 3000,
                    "failure_mode": "allow"},
            "max_buckets": MAX_BUCKETS,
            "rules": [
                {"name": "local-tenant", "match": {"path_prefix": "/local/"},
                 "descriptors": tenant,
                 "local": {"capacity": self.local_limit, "refill_per_second": 0}},
                {"name": "global-tenant", "match": {"path_prefix": "/global/"},
                 "descriptors": tenant, "global": {}}
            ],
            "response": {"body": self.body}
        })
    }

    /// The listener on `port` running this configuration.
    pub fn listener(&self, port: u16) -> Value {
        let mut l = listener(LISTENER, vec![floodgate_filter(&self.json())], "upstream");
        l["address"]["socket_address"]["port_value"] = json!(port);
        l
    }
}

/// The static clusters: the counting upstream and floodgate-server (HTTP/2).
pub fn clusters(upstream: SocketAddr, rls: SocketAddr) -> Vec<Value> {
    vec![
        cluster("upstream", upstream, false),
        cluster("ratelimit", rls, true),
    ]
}

/// A loopback port free now: the listener keeps one fixed port across updates.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}
