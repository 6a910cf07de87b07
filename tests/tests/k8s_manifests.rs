//! floodgate-server's Kubernetes manifests (`deploy/`) and the Istio ones (`examples/istio/`)
//! are what an API server accepts, and hold the settings a security review asks for: each
//! document passes Kubernetes' own schemas strictly (an unknown or misspelt field is an
//! error) or Istio's CRD schemas, every pod meets the restricted Pod Security Standard,
//! and the two variants of the Deployment differ only where they must. The Redis variant's
//! own pieces are checked in `k8s_redis.rs`, the gossip variant's in `k8s_gossip.rs`.

use floodgate_integration::kube_validate::{self, is_istio};
use floodgate_integration::manifests::{
    self, args, of_kind, pod_spec, server_container, server_deployments, server_workloads, Document,
};
use serde_json::{json, Value};

fn all_documents() -> Vec<Document> {
    let mut documents = manifests::deploy();
    documents.extend(manifests::read("examples/istio"));
    documents
}

#[test]
fn kubernetes_resources_pass_kubernetes_schemas_strictly() {
    let documents = all_documents();
    let builtin: Vec<&Document> = documents.iter().filter(|d| !is_istio(d)).collect();
    assert!(builtin.len() >= 8, "{} documents", builtin.len());
    if let Err(report) = kube_validate::kubernetes(&builtin) {
        panic!("refused by Kubernetes' schemas:\n{report}");
    }
}

#[test]
fn istio_resources_pass_istios_crd_schemas() {
    let documents = all_documents();
    let istio: Vec<&Document> = documents.iter().filter(|d| is_istio(d)).collect();
    assert!(istio.len() >= 3, "{} documents", istio.len());
    if let Err(report) = kube_validate::istio(&istio) {
        panic!("refused by Istio's CRD schemas:\n{report}");
    }
}

fn document(value: Value) -> Document {
    Document {
        file: "inline".to_string(),
        value,
    }
}

/// The checks above can fail: a misspelt field, a wrong type, a bad enum or pattern.
#[test]
fn the_validators_refuse_what_an_api_server_would() {
    let deployment = manifests::deploy()
        .into_iter()
        .find(|d| d.value["kind"] == "Deployment")
        .expect("a Deployment");
    let mut misspelt = deployment.value.clone();
    misspelt["spec"]["replica"] = json!(2);
    let mut mistyped = deployment.value.clone();
    mistyped["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        ["readOnlyRootFilesystem"] = json!("yes");
    for (what, value) in [("unknown field", misspelt), ("wrong type", mistyped)] {
        let d = document(value);
        let report = kube_validate::kubernetes(&[&d]).expect_err(what);
        assert!(report.contains("ERROR"), "{what}: {report}");
    }

    let unknown_kind =
        document(json!({"apiVersion": "v1", "kind": "Nonsense", "metadata": {"name": "x"}}));
    assert!(
        kube_validate::kubernetes(&[&unknown_kind]).is_err(),
        "a kind with no schema"
    );

    let plugin = all_documents()
        .into_iter()
        .find(|d| d.value["kind"] == "WasmPlugin")
        .expect("a WasmPlugin");
    let mut bad_digest = plugin.value.clone();
    bad_digest["spec"]["sha256"] = json!("not-a-digest");
    let mut bad_phase = plugin.value.clone();
    bad_phase["spec"]["phase"] = json!("LATER");
    for (what, value) in [("sha256 pattern", bad_digest), ("phase enum", bad_phase)] {
        let d = document(value);
        let report = kube_validate::istio(&[&d]).expect_err(what);
        assert!(report.contains("ERROR"), "{what}: {report}");
    }
}

/// What the restricted Pod Security Standard and our review require of every pod here.
#[test]
fn every_pod_runs_non_root_read_only_with_no_capabilities() {
    let documents = manifests::deploy();
    let mut deployments = of_kind(&documents, "Deployment");
    assert!(deployments.len() >= 3, "memory, Redis and Redis's own");
    deployments.extend(of_kind(&documents, "DaemonSet"));
    for deployment in deployments {
        let id = deployment.id();
        let pod = pod_spec(deployment);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{id}");
        assert!(
            pod["securityContext"]["runAsUser"].as_u64().unwrap_or(0) > 0,
            "{id}: a numeric non-root user"
        );
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{id}"
        );
        assert_eq!(pod["automountServiceAccountToken"], false, "{id}");
        for container in pod["containers"].as_array().expect("containers") {
            let security = &container["securityContext"];
            assert_eq!(security["allowPrivilegeEscalation"], false, "{id}");
            assert_eq!(security["readOnlyRootFilesystem"], true, "{id}");
            assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{id}");
            assert!(security["capabilities"].get("add").is_none(), "{id}");
            assert!(
                container["resources"]["requests"]["memory"].is_string(),
                "{id}"
            );
            assert!(
                container["resources"]["limits"]["memory"].is_string(),
                "{id}"
            );
            assert!(container["readinessProbe"].is_object(), "{id}");
            assert!(container["livenessProbe"].is_object(), "{id}");
        }
    }
    let namespace = &of_kind(&documents, "Namespace")[0].value;
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
}

#[test]
fn the_server_is_ready_on_healthz_drains_before_it_stops_and_is_pinned_by_digest() {
    let documents = manifests::deploy();
    let workloads = server_workloads(&documents);
    assert_eq!(workloads.len(), 3, "memory, Redis and gossip");
    for deployment in workloads {
        let id = deployment.id();
        let container = server_container(deployment);
        assert_eq!(
            container["readinessProbe"]["httpGet"]["path"], "/healthz",
            "{id}"
        );
        assert_ne!(
            container["livenessProbe"]["httpGet"]["path"], "/healthz",
            "{id}: /healthz is 503 during a Redis outage, which a restart does not cure"
        );
        // On SIGTERM the server keeps serving (and /healthz answers 503) for
        // --shutdown-delay-ms, so the pod leaves the endpoints before it stops listening
        // with no preStop hook; the grace period must cover the delay and the 5 s drain.
        assert!(
            container["lifecycle"].is_null(),
            "{id}: no preStop hook needed"
        );
        let delay_ms: u64 = args(deployment)
            .iter()
            .find_map(|a| a.strip_prefix("--shutdown-delay-ms="))
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("{id}: --shutdown-delay-ms"));
        assert!(delay_ms >= 5_000, "{id}: a drain delay of {delay_ms} ms");
        let grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("terminationGracePeriodSeconds");
        assert!(
            grace * 1_000 > delay_ms + 5_000,
            "{id}: grace {grace} s, delay {delay_ms} ms"
        );
        let image = container["image"].as_str().expect("image");
        let (_, digest) = image
            .split_once("@sha256:")
            .expect("image pinned by digest");
        assert!(
            digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}: {image}"
        );
    }
}

/// The memory and Redis Deployments are alternatives: the same pod but for the replica
/// count, the rollout, the spread, the store flags and the memory they need.
#[test]
fn the_two_variants_differ_only_in_store_replicas_and_rollout() {
    let documents = manifests::deploy();
    let variants = server_deployments(&documents);
    assert_eq!(variants.len(), 2, "memory and Redis");
    let normalized: Vec<Value> = variants
        .iter()
        .map(|d| {
            let mut v = d.value.clone();
            let spec = v["spec"].as_object_mut().expect("spec");
            spec.remove("replicas");
            spec.remove("strategy");
            let pod = v["spec"]["template"]["spec"].as_object_mut().expect("pod");
            pod.remove("topologySpreadConstraints");
            let container = &mut v["spec"]["template"]["spec"]["containers"][0];
            let kept: Vec<Value> = args(d)
                .into_iter()
                .filter(|a| !a.starts_with("--redis-url=") && !a.starts_with("--memory-capacity="))
                .map(Value::from)
                .collect();
            container["args"] = Value::from(kept);
            let container = container.as_object_mut().expect("container");
            container.remove("resources");
            // The Redis variant's password (see the Redis test below).
            container.remove("env");
            v
        })
        .collect();
    assert_eq!(normalized[0], normalized[1]);

    let replicas: Vec<(u64, bool)> = variants
        .iter()
        .map(|d| {
            let redis = args(d).iter().any(|a| a.starts_with("--redis-url="));
            (
                d.value["spec"]["replicas"].as_u64().expect("replicas"),
                redis,
            )
        })
        .collect();
    for (count, redis) in replicas {
        assert_eq!(
            count,
            if redis { 2 } else { 1 },
            "the memory store counts per replica: more than one would multiply the limits"
        );
    }
}
