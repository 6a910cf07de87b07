//! Envoy configurations for tests, built as JSON (which Envoy reads as YAML).
//!
//! Every listener and the admin bind 127.0.0.1 port 0; [`crate::Envoy`] finds the ports.

use crate::paths;
use serde_json::{json, Value};
use std::net::SocketAddr;

/// The `envoy.filters.http.wasm` entry loading the built floodgate.wasm with `plugin`
/// as its configuration.
pub fn floodgate_filter(plugin: &Value) -> Value {
    wasm_filter(
        "floodgate",
        &paths::wasm().display().to_string(),
        &plugin.to_string(),
    )
}

/// An `envoy.filters.http.wasm` entry for any module.
pub fn wasm_filter(name: &str, file: &str, configuration: &str) -> Value {
    json!({
        "name": "envoy.filters.http.wasm",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {
                "name": name,
                "root_id": name,
                "vm_config": {
                    "vm_id": name,
                    "runtime": "envoy.wasm.runtime.v8",
                    "code": {"local": {"filename": file}}
                },
                // As docs/failures.md recommends ("When the module crashes").
                "failure_policy": "FAIL_RELOAD",
                "configuration": {
                    "@type": "type.googleapis.com/google.protobuf.StringValue",
                    "value": configuration
                }
            }
        }
    })
}

/// The router, last in every filter chain.
pub fn router() -> Value {
    json!({
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
    })
}

/// An HTTP listener named `name` running `filters` then the router to `cluster`.
pub fn listener(name: &str, filters: Vec<Value>, cluster: &str) -> Value {
    listener_with_route(name, filters, json!({"cluster": cluster, "timeout": "5s"}))
}

/// An HTTP listener whose one route has the given `route` action (e.g. with
/// `rate_limits` for Envoy's native rate limit filter).
pub fn listener_with_route(name: &str, mut filters: Vec<Value>, route: Value) -> Value {
    filters.push(router());
    json!({
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": name,
                "codec_type": "AUTO",
                "route_config": {"virtual_hosts": [{
                    "name": "all",
                    "domains": ["*"],
                    "routes": [{"match": {"prefix": "/"}, "route": route}]
                }]},
                "http_filters": filters
            }
        }]}]
    })
}

/// A static cluster of one endpoint; `http2` for gRPC services.
pub fn cluster(name: &str, addr: SocketAddr, http2: bool) -> Value {
    let mut c = json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                "address": addr.ip().to_string(), "port_value": addr.port()
            }}}}]}]
        }
    });
    if http2 {
        c["typed_extension_protocol_options"] = json!({
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        });
    }
    c
}

/// A whole bootstrap: listeners, clusters, admin on port 0, per-rule stat tags.
pub fn bootstrap(listeners: Vec<Value>, clusters: Vec<Value>) -> String {
    json!({
        "static_resources": {"listeners": listeners, "clusters": clusters},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "stats_config": {"stats_tags": [{
            "tag_name": "rule",
            "regex": "^wasmcustom\\.floodgate\\.rule\\.((.+?)\\.)\\w+$"
        }]}
    })
    .to_string()
}

/// A bootstrap whose listeners come from the LDS file `lds` (re-read when a file is
/// renamed into its directory), with static `clusters`; see [`crate::lds`].
pub fn bootstrap_dynamic(lds: &std::path::Path, clusters: Vec<Value>) -> String {
    let dir = lds.parent().expect("the LDS file is in a directory");
    let mut bootstrap: Value =
        serde_json::from_str(&bootstrap(vec![], clusters)).expect("bootstrap is JSON");
    // Dynamic resources need a node identity, even from a file.
    bootstrap["node"] = json!({"id": "floodgate-test", "cluster": "floodgate-test"});
    bootstrap["dynamic_resources"] = json!({"lds_config": {
        "resource_api_version": "V3",
        "path_config_source": {
            "path": lds.display().to_string(),
            "watched_directory": {"path": dir.display().to_string()}
        }
    }});
    bootstrap.to_string()
}

/// A plugin with one global rule on `x-tenant-id` (domain `edge` on cluster `ratelimit`) and
/// an `x-cost` cost header, failing closed with 503: what the hostile-input and
/// hostile-service tests send their requests through.
pub fn global_tenant_plugin() -> Value {
    json!({
        "rls": {"cluster": "ratelimit", "domain": "edge", "timeout_ms": 2000, "failure_mode": "deny"},
        "rules": [{"name": "per-tenant", "descriptors": [{"key": "tenant", "header": "x-tenant-id"}],
                   "cost": {"header": "x-cost"}, "global": {}}],
        "failure_status": 503
    })
}

/// The common case: listener `ingress` with floodgate configured by `plugin`, routing to
/// `upstream`.
pub fn floodgate_local(plugin: &Value, upstream: SocketAddr) -> String {
    bootstrap(
        vec![listener(
            "ingress",
            vec![floodgate_filter(plugin)],
            "upstream",
        )],
        vec![cluster("upstream", upstream, false)],
    )
}

/// Listener `ingress` with floodgate configured by `plugin` (which names cluster
/// `ratelimit` in its `rls` section), routing to `upstream`; the `ratelimit` cluster
/// (HTTP/2) points at `rls`.
pub fn floodgate_global(plugin: &Value, upstream: SocketAddr, rls: SocketAddr) -> String {
    bootstrap(
        vec![listener(
            "ingress",
            vec![floodgate_filter(plugin)],
            "upstream",
        )],
        vec![
            cluster("upstream", upstream, false),
            cluster("ratelimit", rls, true),
        ],
    )
}

/// Like [`floodgate_global`], with the build that reads responses
/// (`floodgate-llm.wasm`), for rules whose cost the response reports.
pub fn floodgate_llm_global(plugin: &Value, upstream: SocketAddr, rls: SocketAddr) -> String {
    let filter = wasm_filter(
        "floodgate",
        &paths::llm_wasm().display().to_string(),
        &plugin.to_string(),
    );
    bootstrap(
        vec![listener("ingress", vec![filter], "upstream")],
        vec![
            cluster("upstream", upstream, false),
            cluster("ratelimit", rls, true),
        ],
    )
}

/// Envoy's own `envoy.filters.http.ratelimit` filter asking `rls` (domain `domain`)
/// with descriptor `[(descriptor_key, value of header)]`, in front of `upstream`.
pub fn native_ratelimit(
    domain: &str,
    header: &str,
    descriptor_key: &str,
    upstream: SocketAddr,
    rls: SocketAddr,
) -> String {
    let filter = json!({
        "name": "envoy.filters.http.ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
            "domain": domain,
            "failure_mode_deny": true,
            "timeout": "1s",
            "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
            "rate_limit_service": {
                "grpc_service": {"envoy_grpc": {"cluster_name": "ratelimit"}},
                "transport_api_version": "V3"
            }
        }
    });
    let route = json!({
        "cluster": "upstream",
        "timeout": "5s",
        "rate_limits": [{"actions": [{"request_headers": {
            "header_name": header, "descriptor_key": descriptor_key
        }}]}]
    });
    bootstrap(
        vec![listener_with_route("ingress", vec![filter], route)],
        vec![
            cluster("upstream", upstream, false),
            cluster("ratelimit", rls, true),
        ],
    )
}

/// `bootstrap` with its `ratelimit` cluster reached over TLS: the server's certificate
/// must chain to `ca` and name `localhost`; with `client`, Envoy presents that
/// certificate and key (mutual TLS). ALPN `h2`, as gRPC over TLS wants.
pub fn rls_over_tls(
    bootstrap: &str,
    ca: &std::path::Path,
    client: Option<(&std::path::Path, &std::path::Path)>,
) -> String {
    let mut b: Value = serde_json::from_str(bootstrap).expect("bootstrap is JSON");
    let mut common = json!({
        "alpn_protocols": ["h2"],
        "validation_context": {
            "trusted_ca": {"filename": ca.display().to_string()},
            "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "localhost"}}]
        }
    });
    if let Some((cert, key)) = client {
        common["tls_certificates"] = json!([{
            "certificate_chain": {"filename": cert.display().to_string()},
            "private_key": {"filename": key.display().to_string()}
        }]);
    }
    let clusters = b["static_resources"]["clusters"]
        .as_array_mut()
        .expect("clusters");
    for c in clusters.iter_mut().filter(|c| c["name"] == "ratelimit") {
        c["transport_socket"] = json!({
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": "localhost",
                "common_tls_context": common
            }
        });
    }
    b.to_string()
}
