//! floodgate-server's gossip variant (`deploy/gossip/`): a DaemonSet whose pods gossip from
//! their pod IP (the downward API) and join through a headless Service, a NetworkPolicy
//! that admits gossip from those pods only, and limits that the gossip store accepts,
//! checked by the real server with the manifest's own arguments.

use floodgate_integration::manifests::{
    self, args, labels, named, of_kind, pod_spec, server_container, Document,
};
use floodgate_integration::paths;
use serde_json::Value;
use std::process::Command;

fn gossip_daemonset(documents: &[Document]) -> &Document {
    named(documents, "DaemonSet", "floodgate-server")
}

/// The value of `--NAME=` among the server's arguments.
fn flag(workload: &Document, name: &str) -> String {
    let prefix = format!("--{name}=");
    args(workload)
        .iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("{}: no {prefix}", workload.id()))
}

/// Where the container's variable `name` comes from (`fieldRef.fieldPath`).
fn field_ref(container: &Value, name: &str) -> String {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name)
        .and_then(|e| e["valueFrom"]["fieldRef"]["fieldPath"].as_str())
        .unwrap_or_else(|| panic!("no {name} from the downward API"))
        .to_string()
}

/// The container port named `name`: (number, protocol).
fn container_port(container: &Value, name: &str) -> (u64, String) {
    let port = container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no container port {name}"));
    let protocol = port["protocol"].as_str().unwrap_or("TCP").to_string();
    (port["containerPort"].as_u64().expect("port"), protocol)
}

#[test]
fn the_pods_gossip_from_their_pod_ip_and_join_through_a_headless_service() {
    let documents = manifests::deploy();
    let daemonset = gossip_daemonset(&documents);
    let container = server_container(daemonset);
    assert_eq!(flag(daemonset, "store"), "gossip");
    assert_eq!(field_ref(container, "POD_IP"), "status.podIP");
    assert_eq!(field_ref(container, "POD_NAME"), "metadata.name");
    let (port, protocol) = container_port(container, "gossip");
    assert_eq!(protocol, "UDP");
    assert_eq!(flag(daemonset, "gossip-addr"), format!("$(POD_IP):{port}"));
    assert_eq!(flag(daemonset, "gossip-node-id"), "$(POD_NAME)");

    let service = named(&documents, "Service", "floodgate-server-gossip");
    let spec = &service.value["spec"];
    assert_eq!(
        spec["clusterIP"], "None",
        "headless: every pod's own address"
    );
    assert_eq!(spec["publishNotReadyAddresses"], true, "peers before ready");
    let pods = labels(&daemonset.value["spec"]["template"]["metadata"]["labels"]);
    let selected = labels(&spec["selector"]);
    assert!(!selected.is_empty() && selected.iter().all(|(k, v)| pods.get(k) == Some(v)));
    let service_port = &spec["ports"][0];
    assert_eq!(service_port["protocol"], "UDP");
    assert_eq!(service_port["targetPort"], "gossip");
    let namespace = service.value["metadata"]["namespace"].as_str().expect("ns");
    assert_eq!(
        flag(daemonset, "gossip-seeds"),
        format!(
            "floodgate-server-gossip.{namespace}.svc.cluster.local:{}",
            service_port["port"]
        )
    );

    // The proxies' same-node Service reaches the gRPC port.
    let local = named(&documents, "Service", "floodgate-server-local");
    assert_eq!(local.value["spec"]["internalTrafficPolicy"], "Local");
    assert_eq!(local.value["spec"]["ports"][0]["targetPort"], "grpc");
}

/// Gossip carries counts for every tenant: only the fleet's own pods may send it.
#[test]
fn only_the_fleets_own_pods_may_reach_the_gossip_port() {
    let documents = manifests::deploy();
    let daemonset = gossip_daemonset(&documents);
    let pods = labels(&daemonset.value["spec"]["template"]["metadata"]["labels"]);
    let policy = named(&documents, "NetworkPolicy", "floodgate-server-gossip");
    let spec = &policy.value["spec"];
    let applies_to = labels(&spec["podSelector"]["matchLabels"]);
    assert!(applies_to.iter().all(|(k, v)| pods.get(k) == Some(v)));
    let rules = spec["ingress"].as_array().expect("ingress");
    assert_eq!(rules.len(), 1);
    let peers = rules[0]["from"].as_array().expect("from");
    assert_eq!(peers.len(), 1, "one peer: the fleet's pods");
    assert!(
        peers[0].get("namespaceSelector").is_none(),
        "its own namespace"
    );
    let admitted = labels(&peers[0]["podSelector"]["matchLabels"]);
    assert!(!admitted.is_empty() && admitted.iter().all(|(k, v)| pods.get(k) == Some(v)));
    assert_eq!(rules[0]["ports"][0]["port"], "gossip");
    assert_eq!(rules[0]["ports"][0]["protocol"], "UDP");
    // No other policy opens the gossip port.
    for other in of_kind(&documents, "NetworkPolicy") {
        if other.value["metadata"]["name"] != "floodgate-server-gossip" {
            assert!(
                !other.value.to_string().contains("\"gossip\""),
                "{}",
                other.id()
            );
        }
    }
}

/// The ConfigMap `volume` of a workload, by name, and its files.
fn mounted_config<'a>(documents: &'a [Document], workload: &Document) -> &'a Document {
    let name = pod_spec(workload)["volumes"][0]["configMap"]["name"]
        .as_str()
        .expect("a ConfigMap volume");
    named(documents, "ConfigMap", name)
}

/// Runs `floodgate-server --check` with the DaemonSet's own arguments (the kubelet's
/// `$(VAR)` expanded as it would) on the ConfigMap's files; its stderr when refused.
fn check(daemonset: &Document, config: &Document) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (file, text) in config.value["data"].as_object().expect("data") {
        std::fs::write(dir.path().join(file), text.as_str().expect("text")).expect("write");
    }
    let argv: Vec<String> = args(daemonset)
        .into_iter()
        .map(|a| match a.strip_prefix("--config=") {
            Some(_) => format!("--config={}", dir.path().display()),
            None => a
                .replace("$(POD_IP)", "10.0.0.7")
                .replace("$(POD_NAME)", "floodgate-server-x1"),
        })
        .collect();
    let out = Command::new(paths::server())
        .args(&argv)
        .arg("--check")
        .output()
        .expect("run floodgate-server");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The gossip store holds only counts that add up across nodes: the variant's own limits
/// load with its arguments, and common/'s token buckets would be refused (which is why
/// it mounts a ConfigMap of its own).
#[test]
fn the_variants_limits_load_under_the_gossip_store_with_its_arguments() {
    let documents = manifests::deploy();
    let daemonset = gossip_daemonset(&documents);
    let own = mounted_config(&documents, daemonset);
    assert_eq!(
        own.value["metadata"]["name"],
        "floodgate-server-gossip-config"
    );
    if let Err(e) = check(daemonset, own) {
        panic!("{}: refused under --store gossip: {e}", own.id());
    }
    let common = named(&documents, "ConfigMap", "floodgate-server-config");
    let refused = check(daemonset, common).expect_err("token buckets under gossip");
    assert!(
        refused.contains("is not supported by the gossip store"),
        "{refused}"
    );
}
