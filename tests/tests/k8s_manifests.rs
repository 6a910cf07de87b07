//! floodgate-server's Kubernetes manifests (`deploy/`) and the Istio ones (`examples/istio/`)
//! are what an API server accepts, and hold the settings a security review asks for: each
//! document passes Kubernetes' own schemas strictly (an unknown or misspelt field is an
//! error) or Istio's CRD schemas, every pod meets the restricted Pod Security Standard,
//! the two variants of the Deployment differ only where they must, and the Redis variant
//! points at a Redis that only the server can reach.

use floodgate_integration::kube_validate::{self, is_istio};
use floodgate_integration::manifests::{self, labels, of_kind, server_deployments, Document};
use floodgate_integration::{paths, wait, Server};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

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

fn pod_spec(deployment: &Document) -> &Value {
    &deployment.value["spec"]["template"]["spec"]
}

/// What the restricted Pod Security Standard and our review require of every pod here.
#[test]
fn every_pod_runs_non_root_read_only_with_no_capabilities() {
    let documents = manifests::deploy();
    let deployments = of_kind(&documents, "Deployment");
    assert!(deployments.len() >= 3, "memory, Redis and Redis's own");
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

fn server_container(deployment: &Document) -> &Value {
    &pod_spec(deployment)["containers"][0]
}

fn args(deployment: &Document) -> Vec<String> {
    server_container(deployment)["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_server_is_ready_on_healthz_drains_before_it_stops_and_is_pinned_by_digest() {
    let documents = manifests::deploy();
    for deployment in server_deployments(&documents) {
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

#[test]
fn the_redis_variant_reaches_a_redis_only_the_server_can_reach() {
    let documents = manifests::deploy();
    let redis_variant = server_deployments(&documents)
        .into_iter()
        .find(|d| args(d).iter().any(|a| a.starts_with("--redis-url=")))
        .expect("the Redis variant");
    let url = args(redis_variant)
        .into_iter()
        .find_map(|a| a.strip_prefix("--redis-url=").map(str::to_string))
        .expect("--redis-url");
    let service = of_kind(&documents, "Service")
        .into_iter()
        .find(|s| s.value["metadata"]["name"] == "floodgate-redis")
        .expect("Service floodgate-redis");
    let namespace = service.value["metadata"]["namespace"].as_str().expect("ns");
    let port = &service.value["spec"]["ports"][0]["port"];
    assert_eq!(
        url,
        format!("redis://floodgate-redis.{namespace}.svc.cluster.local:{port}")
    );

    let policy = of_kind(&documents, "NetworkPolicy")
        .into_iter()
        .find(|p| p.value["metadata"]["name"] == "floodgate-redis")
        .expect("NetworkPolicy floodgate-redis");
    let rules = policy.value["spec"]["ingress"].as_array().expect("ingress");
    assert_eq!(rules.len(), 1);
    let peers = rules[0]["from"].as_array().expect("from");
    assert_eq!(peers.len(), 1, "one peer: floodgate-server");
    assert!(
        peers[0].get("namespaceSelector").is_none(),
        "its own namespace"
    );
    let server_pods = labels(&redis_variant.value["spec"]["template"]["metadata"]["labels"]);
    let admitted = labels(&peers[0]["podSelector"]["matchLabels"]);
    assert!(!admitted.is_empty() && admitted.iter().all(|(k, v)| server_pods.get(k) == Some(v)));

    // One Secret: Redis requires the password the server presents.
    let redis_pod = redis_container(&documents);
    assert_eq!(
        secret_env(server_container(redis_variant), "REDIS_AUTH"),
        secret_env(redis_pod, "REDIS_PASSWORD"),
        "the server's REDIS_AUTH and Redis's requirepass come from one Secret key"
    );
    let memory_variant = server_deployments(&documents)
        .into_iter()
        .find(|d| !args(d).iter().any(|a| a.starts_with("--redis-url=")))
        .expect("the memory variant");
    assert!(server_container(memory_variant)["env"].is_null());
    let script = redis_script(redis_pod);
    assert!(script.contains("requirepass $REDIS_PASSWORD"), "{script}");
    assert!(!script.contains("protected-mode"), "{script}");
}

/// Redis's own container (`redis.yaml`).
fn redis_container(documents: &[Document]) -> &Value {
    let redis = of_kind(documents, "Deployment")
        .into_iter()
        .find(|d| d.value["metadata"]["name"] == "floodgate-redis")
        .expect("Deployment floodgate-redis");
    &pod_spec(redis)["containers"][0]
}

/// The `(Secret, key)` a container's variable `name` comes from.
fn secret_env(container: &Value, name: &str) -> (String, String) {
    let var = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {container}"));
    assert!(
        var.get("value").is_none(),
        "{name} must not be written in the manifest"
    );
    let key = &var["valueFrom"]["secretKeyRef"];
    (
        key["name"].as_str().expect("Secret name").to_string(),
        key["key"].as_str().expect("Secret key").to_string(),
    )
}

/// The shell script Redis's container runs (`command: [sh, -c]`).
fn redis_script(container: &Value) -> String {
    assert_eq!(container["command"], json!(["sh", "-c"]));
    container["args"][0]
        .as_str()
        .expect("the script")
        .to_string()
}

/// The Redis of `redis.yaml`, run as its manifest runs it (its own script, under dash,
/// the password in its environment only), requires the password, and floodgate-server
/// given the same password in `REDIS_AUTH` decides against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifests_redis_requires_the_password_the_server_reads() {
    let documents = manifests::deploy();
    let script = redis_script(redis_container(&documents));
    let password = "0123456789abcdef0123456789abcdef";
    let port = free_port();
    // The script names no port: a `redis-server` first on PATH adds one.
    let shim = tempfile::tempdir().expect("temp dir");
    let real = paths::program("redis-server", "make redis");
    let wrapper = shim.path().join("redis-server");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec {} \"$@\" --port {port}\n", real.display()),
    )
    .expect("write wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!(
        "{}:{}",
        shim.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut redis = KillOnDrop(
        Command::new("dash")
            .args(["-c", &script])
            .env_clear()
            .env("PATH", &path)
            .env("REDIS_PASSWORD", password)
            .stdout(Stdio::null())
            .spawn()
            .expect("run the manifest's Redis"),
    );
    let cli = |auth: Option<&str>| {
        let mut c = Command::new(paths::program("redis-cli", "make redis"));
        c.args(["-p", &port.to_string(), "--no-auth-warning"]);
        if let Some(a) = auth {
            c.args(["-a", a]);
        }
        let out = c.arg("PING").output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    wait::until(
        "the manifest's Redis to answer",
        Duration::from_secs(20),
        || async { (!cli(None).is_empty()).then_some(()) },
    )
    .await;
    assert!(cli(None).starts_with("NOAUTH"), "{}", cli(None));
    assert_eq!(cli(Some(password)), "PONG");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", redis.0.id())).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(password),
        "the password is on Redis's command line"
    );

    let server = Server::start_env(
        "domain: d\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 5}}]\n",
        &["--redis-url", &format!("redis://127.0.0.1:{port}")],
        &[("REDIS_AUTH", password)],
    );
    wait::until(
        "floodgate-server healthy on it",
        Duration::from_secs(20),
        || async { (server.health().await == Some(200)).then_some(()) },
    )
    .await;
    let _ = redis.0.kill();
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
