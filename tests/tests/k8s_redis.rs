//! floodgate-server's Redis variant (`deploy/redis/`): the server points at a Redis that
//! only the server can reach, and that Redis, run by its manifest's own script, requires
//! the password the server presents.

use floodgate_integration::manifests::{
    self, args, labels, of_kind, pod_spec, server_container, server_deployments, Document,
};
use floodgate_integration::{paths, wait, Server};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

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
