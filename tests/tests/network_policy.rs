//! Who may reach floodgate-server: its NetworkPolicy (`deploy/common/networkpolicy.yaml`)
//! admits the pods the global WasmPlugin runs on to the gRPC port and the Prometheus
//! scraper to the HTTP port, each only to its own port, and nobody else. Anyone who can
//! send the server a call can spend or exhaust any tenant's limit.

use floodgate_integration::istio::{self, is_global, named, server_deployments, wasm_plugins};
use serde_json::Value;
use std::collections::BTreeMap;

/// Whether a NetworkPolicy peer (`from` entry) admits a pod with `labels` in `namespace`.
fn peer_admits(peer: &Value, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
    let namespace_ok = match peer.get("namespaceSelector") {
        Some(selector) => {
            istio::labels(&selector["matchLabels"])
                .into_iter()
                .all(|(k, v)| k == "kubernetes.io/metadata.name" && v == namespace)
                && selector.get("matchExpressions").is_none()
        }
        // Without one, the peer is in the policy's own namespace.
        None => false,
    };
    let pods_ok = istio::labels(&peer["podSelector"]["matchLabels"])
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    namespace_ok && pods_ok && peer.get("ipBlock").is_none()
}

/// The global plugin's pods may reach the gRPC port, the scraper the HTTP port, and no
/// rule admits anyone to any port without naming who (an empty `from` admits all).
#[test]
fn the_network_policy_admits_the_proxies_and_the_scraper_only() {
    let documents = istio::documents();
    let policy = named(&documents, "NetworkPolicy", "floodgate-server");
    let deployment = server_deployments(&documents)[0];
    let pod_labels = istio::labels(&deployment.value["spec"]["template"]["metadata"]["labels"]);
    let selected = istio::labels(&policy.value["spec"]["podSelector"]["matchLabels"]);
    assert!(
        !selected.is_empty() && selected.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "{}: the policy must select floodgate-server's pods",
        policy.id()
    );
    assert_eq!(
        policy.value["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );

    let rules = policy.value["spec"]["ingress"]
        .as_array()
        .expect("ingress rules");
    for rule in rules {
        let from = rule["from"].as_array().map(Vec::len).unwrap_or(0);
        let ports = rule["ports"].as_array().map(Vec::len).unwrap_or(0);
        assert!(
            from > 0 && ports > 0,
            "{}: rule {rule} admits too much",
            policy.id()
        );
    }
    let admits = |namespace: &str, labels: &BTreeMap<String, String>, port: &str| {
        rules.iter().any(|rule| {
            rule["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["port"] == port)
                && rule["from"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|peer| peer_admits(peer, namespace, labels))
        })
    };

    for plugin in wasm_plugins(&documents)
        .into_iter()
        .filter(|p| is_global(p))
    {
        let namespace = plugin.value["metadata"]["namespace"]
            .as_str()
            .expect("namespace");
        let proxies = istio::labels(&plugin.value["spec"]["selector"]["matchLabels"]);
        assert!(
            admits(namespace, &proxies, "grpc"),
            "{}: the policy does not admit the plugin's pods to the gRPC port",
            plugin.id()
        );
        assert!(
            !admits(namespace, &proxies, "http"),
            "{}: the proxies need no access to /metrics",
            plugin.id()
        );
    }
    let prometheus = BTreeMap::from([(
        "app.kubernetes.io/name".to_string(),
        "prometheus".to_string(),
    )]);
    assert!(admits("monitoring", &prometheus, "http"), "the scraper");
    assert!(
        !admits("monitoring", &prometheus, "grpc"),
        "the scraper sends no calls"
    );
    let stranger = BTreeMap::from([("app".to_string(), "api".to_string())]);
    assert!(
        !admits("other-team", &stranger, "grpc"),
        "the same labels in another namespace are not the proxies"
    );
}
