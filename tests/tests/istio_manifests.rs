//! The Istio manifests in `examples/istio/` stay true to the code: every `pluginConfig` passes
//! the filter's own validation (the code its root context runs) and loads in the pinned
//! Envoy, and the pieces of the global mode point at each other (plugin → cluster →
//! Service → container in `deploy/`; plugin domain → server configuration). The
//! NetworkPolicy that admits the plugin's pods is checked in `network_policy.rs`.

use floodgate::config::Config;
use floodgate_integration::istio::{
    self, is_global, named, server_deployments, wasm_plugins, Document,
};
use floodgate_integration::{configs, paths, Envoy};
use serde_json::Value;
use std::net::SocketAddr;

#[test]
fn every_plugin_config_passes_the_filters_own_validation() {
    let documents = istio::documents();
    let mut refused = Vec::new();
    for plugin in wasm_plugins(&documents) {
        let configuration = istio::plugin_configuration(&plugin.value);
        if let Err(e) = Config::parse(configuration.as_bytes()) {
            refused.push(format!(
                "{}: pluginConfig is refused by the filter: {e}\n{configuration}",
                plugin.id()
            ));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n\n"));
}

#[test]
fn there_is_a_local_and_a_global_example() {
    let documents = istio::documents();
    let plugins = wasm_plugins(&documents);
    assert!(
        plugins.iter().any(|p| !is_global(p)),
        "no local-mode WasmPlugin"
    );
    assert!(
        plugins.iter().any(|p| is_global(p)),
        "no global-mode WasmPlugin"
    );
}

#[test]
fn wasm_plugins_pull_our_image_by_digest_and_say_where_they_run() {
    let documents = istio::documents();
    for plugin in wasm_plugins(&documents) {
        let id = plugin.id();
        let spec = &plugin.value["spec"];
        assert_eq!(
            plugin.value["apiVersion"], "extensions.istio.io/v1alpha1",
            "{id}"
        );
        let url = spec["url"].as_str().unwrap_or_default();
        assert!(url.starts_with("oci://"), "{id}: url {url:?} is not oci://");
        // Istio's CRD pattern for sha256, once the template is rendered.
        let sha = spec["sha256"].as_str().unwrap_or_default();
        assert!(
            sha.len() == 64 && sha.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
            "{id}: sha256 {sha:?} is not 64 lowercase hex digits"
        );
        assert!(
            matches!(spec["phase"].as_str(), Some("AUTHN" | "AUTHZ" | "STATS")),
            "{id}: phase must be set explicitly"
        );
        assert!(
            matches!(
                spec["failStrategy"].as_str(),
                Some("FAIL_CLOSE" | "FAIL_OPEN")
            ),
            "{id}: failStrategy must be set explicitly"
        );
        assert!(
            !istio::labels(&spec["selector"]["matchLabels"]).is_empty(),
            "{id}: selector.matchLabels must name the workloads"
        );
        assert_eq!(
            spec["pluginName"], "floodgate",
            "{id}: the filter's root id"
        );
        assert_eq!(spec["type"], "HTTP", "{id}");
    }
}

/// The EnvoyFilter patch adding cluster `name` to the pods a plugin runs on.
fn cluster_for<'a>(documents: &'a [Document], plugin: &Document, name: &str) -> &'a Value {
    let wanted = istio::labels(&plugin.value["spec"]["selector"]["matchLabels"]);
    let namespace = &plugin.value["metadata"]["namespace"];
    let mut found = Vec::new();
    for filter in istio::of_kind(documents, "EnvoyFilter") {
        let spec = &filter.value["spec"];
        let selected = istio::labels(&spec["workloadSelector"]["labels"]);
        if &filter.value["metadata"]["namespace"] != namespace || selected != wanted {
            continue;
        }
        for patch in spec["configPatches"].as_array().into_iter().flatten() {
            if patch["applyTo"] == "CLUSTER"
                && patch["patch"]["operation"] == "ADD"
                && patch["patch"]["value"]["name"] == name
            {
                assert_eq!(
                    patch["match"]["context"],
                    "SIDECAR_OUTBOUND",
                    "{}: an ADDed cluster is only created in an explicit context",
                    filter.id()
                );
                found.push(&patch["patch"]["value"]);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "{}: exactly one EnvoyFilter in its namespace, for the same pods, must add cluster {name}",
        plugin.id()
    );
    found[0]
}

/// Each global-mode plugin's `rls.cluster` name, with the cluster its EnvoyFilter adds.
fn global_plugin_clusters(documents: &[Document]) -> Vec<(&str, &Value)> {
    wasm_plugins(documents)
        .into_iter()
        .filter(|p| is_global(p))
        .map(|plugin| {
            let name = plugin.value["spec"]["pluginConfig"]["rls"]["cluster"]
                .as_str()
                .expect("rls.cluster");
            (name, cluster_for(documents, plugin, name))
        })
        .collect()
}

#[test]
fn the_global_plugin_calls_an_http2_cluster_added_to_the_same_pods() {
    let documents = istio::documents();
    for (name, cluster) in global_plugin_clusters(&documents) {
        let options = &cluster["typed_extension_protocol_options"]
            ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        assert_eq!(
            options["@type"],
            "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        );
        assert!(
            options["explicit_http_config"]["http2_protocol_options"].is_object(),
            "cluster {name} must speak HTTP/2: gRPC over HTTP/1.1 fails every call"
        );
    }
}

/// A Service port by name.
fn service_port<'a>(service: &'a Document, name: &str) -> &'a Value {
    service.value["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{}: no port named {name}", service.id()))
}

#[test]
fn the_rls_cluster_reaches_the_servers_grpc_port() {
    let documents = istio::documents();
    let service = named(&documents, "Service", "floodgate-server");
    let namespace = service.value["metadata"]["namespace"]
        .as_str()
        .expect("namespace");
    let grpc = service_port(service, "grpc");
    assert_eq!(grpc["appProtocol"], "grpc");

    // The container port the Service targets, and the address the binary listens on, in
    // every variant of the Deployment.
    for deployment in server_deployments(&documents) {
        let id = deployment.id();
        let container = &deployment.value["spec"]["template"]["spec"]["containers"][0];
        let container_port = container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == grpc["targetPort"])
            .unwrap_or_else(|| panic!("{id}: no container port the Service's grpc port targets"));
        let args: Vec<&str> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let listen: SocketAddr = args
            .iter()
            .find_map(|a| a.strip_prefix("--grpc-addr="))
            .unwrap_or_else(|| panic!("{id}: --grpc-addr"))
            .parse()
            .expect("--grpc-addr is an address");
        assert!(
            listen.ip().is_unspecified(),
            "{id}: --grpc-addr must listen beyond the pod's loopback"
        );
        assert_eq!(container_port["containerPort"], listen.port(), "{id}");
    }

    for (_, cluster) in global_plugin_clusters(&documents) {
        let endpoint = &cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
            ["address"]["socket_address"];
        assert_eq!(
            endpoint["address"],
            format!("floodgate-server.{namespace}.svc.cluster.local")
        );
        assert_eq!(endpoint["port_value"], grpc["port"]);
    }
}

/// The server configuration files in the ConfigMap, by file name.
fn server_config_files(documents: &[Document]) -> Vec<(String, String)> {
    let config_map = named(documents, "ConfigMap", "floodgate-server-config");
    config_map.value["data"]
        .as_object()
        .expect("ConfigMap data")
        .iter()
        .map(|(name, text)| (name.clone(), text.as_str().expect("text").to_string()))
        .collect()
}

#[test]
fn the_server_is_configured_for_the_domain_and_keys_the_plugin_sends() {
    let documents = istio::documents();
    let mut domains = Vec::new();
    for (name, text) in server_config_files(&documents) {
        let parsed: Value =
            serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        domains.push(parsed);
    }
    for plugin in wasm_plugins(&documents)
        .into_iter()
        .filter(|p| is_global(p))
    {
        let config = &plugin.value["spec"]["pluginConfig"];
        let domain = &config["rls"]["domain"];
        let server = domains
            .iter()
            .find(|d| &d["domain"] == domain)
            .unwrap_or_else(|| panic!("{}: floodgate-server has no domain {domain}", plugin.id()));
        let keys: Vec<&Value> = server["descriptors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| &d["key"])
            .collect();
        for rule in config["rules"].as_array().into_iter().flatten() {
            if rule.get("global").is_none() {
                continue;
            }
            let first = &rule["descriptors"][0]["key"];
            assert!(
                keys.contains(&first),
                "{}: rule {} sends {first}, which domain {domain} has no limit for",
                plugin.id(),
                rule["name"]
            );
        }
    }
}

#[test]
fn the_server_accepts_its_configuration() {
    let documents = istio::documents();
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in server_config_files(&documents) {
        std::fs::write(dir.path().join(name), text).expect("write config");
    }
    let out = std::process::Command::new(paths::server())
        .arg("--config")
        .arg(dir.path())
        .arg("--check")
        .output()
        .expect("run floodgate-server --check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(": OK"),
        "floodgate-server --check refused the ConfigMap:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each WasmPlugin as Istio would hand it to Envoy (the filter with pluginConfig as its
/// configuration, plus the EnvoyFilter's cluster for the global one) passes
/// `envoy --mode validate`, which runs the filter's `on_configure` in V8.
#[test]
fn every_plugin_loads_in_the_pinned_envoy() {
    let documents = istio::documents();
    let upstream: SocketAddr = "127.0.0.1:1".parse().expect("address");
    let mut refused = Vec::new();
    for plugin in wasm_plugins(&documents) {
        let filter = configs::wasm_filter(
            "floodgate",
            &paths::wasm().display().to_string(),
            &istio::plugin_configuration(&plugin.value),
        );
        let mut clusters = vec![configs::cluster("app", upstream, false)];
        if is_global(plugin) {
            let name = plugin.value["spec"]["pluginConfig"]["rls"]["cluster"]
                .as_str()
                .expect("rls.cluster");
            clusters.push(cluster_for(&documents, plugin, name).clone());
        }
        let bootstrap = configs::bootstrap(
            vec![configs::listener("inbound", vec![filter], "app")],
            clusters,
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("envoy.json");
        std::fs::write(&file, bootstrap).expect("write bootstrap");
        if let Err(log) = Envoy::validate(&file) {
            refused.push(format!("{}: Envoy refuses the plugin:\n{log}", plugin.id()));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n\n"));
}
