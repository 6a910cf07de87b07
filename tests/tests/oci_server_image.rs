//! floodgate-server's image, as `make oci` writes it, is what a runtime can start, and it
//! starts: the layout holds the built static binary and a config that runs it as a
//! non-root user on the declared ports and volume (the ones `deploy/` uses); pushed with
//! skopeo into a real registry and pulled back as a runtime does, its layer unpacked into
//! a directory of its own, the binary runs there (chroot, the root mounted read-only, the
//! image's user), with nothing from the host, and answers a gRPC call and `/healthz`. Run
//! as Envoy Gateway runs the reference's image (`gateway`), it starts and limits too.

use floodgate_integration::manifests::{self, of_kind};
use floodgate_integration::oci::{self, Image, Layout};
use floodgate_integration::registry::skopeo_copy;
use floodgate_integration::{client, paths, server, Registry};
use floodgate_server::proto::rls::rate_limit_response::Code;
use floodgate_server::proto::rls::rate_limit_service_client::RateLimitServiceClient;
use floodgate_server::proto::rls::RateLimitRequest;
use floodgate_server::proto::{Entry, RateLimitDescriptor};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "xds_config/ads.rs"]
mod ads;
#[path = "oci_server_image/gateway.rs"]
mod gateway;

const NAME: &str = "floodgate-server";

fn from_layout() -> Image {
    let layout = Layout::from_dir(&paths::oci_dir().join(NAME));
    let descriptor = layout.manifest_for(&paths::server_version());
    let manifest = layout.blob("manifest", &descriptor);
    oci::follow_image(&manifest, |what, d| layout.blob(what, d))
}

#[test]
fn the_layout_holds_the_static_server_and_says_how_to_run_it() {
    let image = from_layout();
    let config = &image.config;
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    let run = &config["config"];
    assert_eq!(run["User"], "65532:65532", "a numeric non-root user");
    assert_eq!(
        run["Entrypoint"],
        json!(["/usr/local/bin/floodgate-server"])
    );
    assert_eq!(run["ExposedPorts"], json!({"8080/tcp": {}, "8081/tcp": {}}));
    assert_eq!(run["Volumes"], json!({"/etc/floodgate": {}}));
    assert_eq!(run["StopSignal"], "SIGTERM");

    let annotations = &image.manifest["annotations"];
    assert_eq!(annotations["org.opencontainers.image.title"], NAME);
    assert_eq!(
        annotations["org.opencontainers.image.version"],
        paths::server_version()
    );
    assert_eq!(
        annotations["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert_eq!(&run["Labels"], annotations, "labels repeat the annotations");

    // The binary and the config directory, nothing else: no shell, no libraries.
    let entries = oci::entries(&image.layer_tar);
    let files: Vec<(&str, u32)> = entries
        .iter()
        .filter(|(_, _, dir, _)| !dir)
        .map(|(path, mode, _, _)| (path.as_str(), *mode))
        .collect();
    assert_eq!(
        files,
        vec![
            ("usr/local/bin/floodgate-server", 0o755),
            ("bin/ratelimit", 0o755)
        ],
        "the binary, and Envoy Gateway's command as a second name of it"
    );
    assert!(
        entries.last().expect("entries").3.is_empty(),
        "a link, not a copy"
    );
    let binary = &entries.iter().find(|e| !e.2).expect("the binary").3;
    let built = std::fs::read(paths::server_static()).expect("the static build");
    assert!(
        *binary == built,
        "the image's binary is not the static build: run `make oci` after `make server-static`"
    );
    let printed = std::fs::read_to_string(paths::oci_dir().join(format!("{NAME}.digest")))
        .expect("floodgate-server.digest");
    assert_eq!(printed.trim(), image.digest);
}

/// `deploy/` runs the image as it says it runs: the same user, the config mounted on its
/// volume, the ports it declares.
#[test]
fn the_deployments_match_what_the_image_declares() {
    let image = from_layout();
    let run = &image.config["config"];
    let documents = manifests::deploy();
    for deployment in manifests::server_deployments(&documents) {
        let id = deployment.id();
        let pod = &deployment.value["spec"]["template"]["spec"];
        let user = format!(
            "{}:{}",
            pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
        );
        assert_eq!(run["User"], user, "{id}");
        let container = &pod["containers"][0];
        let mounts: Vec<&Value> = container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| &m["mountPath"])
            .collect();
        for volume in run["Volumes"].as_object().expect("volumes").keys() {
            assert!(
                mounts.contains(&&json!(volume)),
                "{id}: nothing on {volume}"
            );
        }
        for port in container["ports"].as_array().expect("ports") {
            let declared = format!("{}/tcp", port["containerPort"]);
            assert!(
                run["ExposedPorts"].get(&declared).is_some(),
                "{id}: {declared}"
            );
        }
    }
}

/// The container's command line: the image's entrypoint and default arguments, with the
/// two listen addresses moved to free loopback ports (the test shares the host's network).
fn command_line(run: &Value) -> Vec<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let mut line = strings(&run["Entrypoint"]);
    for arg in strings(&run["Cmd"]) {
        line.push(match arg.split_once('=') {
            Some((flag @ ("--grpc-addr" | "--http-addr"), _)) => format!("{flag}=127.0.0.1:0"),
            _ => arg,
        });
    }
    line
}

/// The container's start inside the private mount namespace: `$0` the root, bind-mounted
/// read-only, `$1` the user, the rest the command line run there by chroot.
const SETUP: &str = r#"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec chroot --userspec="$1" "$0" "${@:2}""#;

/// Starts `line` inside `root` as the image's user: a private mount namespace where the
/// root is bind-mounted read-only (readOnlyRootFilesystem), then chroot. Only the setup
/// uses the host's `sh`; the server itself sees nothing but the image.
fn start_in(root: &Path, user: &str, line: &[String], log: &Path) -> Child {
    Command::new(paths::program("unshare", "apt-get install util-linux"))
        .args(["--mount", "--propagation", "private", "bash", "-c", SETUP])
        .arg(root)
        .arg(user)
        .args(line)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn unshare")
}

/// The user ids of a running process, from /proc: real, effective, saved, file system.
/// A one-hit `ShouldRateLimit` request for domain `edge` and `tenant` = `value`, as the
/// image's configurations expect.
fn tenant_request(value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "tenant".into(),
                value: value.into(),
            }],
            limit: None,
            hits_addend: None,
        }],
        hits_addend: 1,
    }
}

fn uids(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("process status")
        .lines()
        .find_map(|l| {
            l.strip_prefix("Uid:")
                .map(|u| u.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .expect("Uid line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pushed_image_runs_alone_and_answers_grpc_and_healthz() {
    let registry = Registry::start().await;
    let tag = paths::server_version();
    let source = format!("oci:{}:{tag}", paths::oci_dir().join(NAME).display());
    skopeo_copy(&source, &format!("docker://{}/{NAME}:{tag}", registry.host));
    let (image, reported) = registry.pull_image(NAME, &tag).await;
    let printed = std::fs::read_to_string(paths::oci_dir().join(format!("{NAME}.digest")))
        .expect("floodgate-server.digest");
    assert_eq!(
        reported,
        printed.trim(),
        "the registry has the printed digest"
    );
    assert_eq!(image.digest, reported);

    // The container's root: the layer, plus the deployed ConfigMap on the config volume.
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("rootfs");
    std::fs::create_dir(&root).expect("mkdir rootfs");
    oci::unpack(&image.layer_tar, &root);
    let documents = manifests::deploy();
    let config_map = of_kind(&documents, "ConfigMap")[0];
    for (file, text) in config_map.value["data"].as_object().expect("data") {
        let path = root.join("etc/floodgate").join(file);
        std::fs::write(path, text.as_str().expect("text")).expect("write config");
    }

    let run = &image.config["config"];
    let user = run["User"].as_str().expect("User");
    let log = dir.path().join("server.log");
    let mut child = start_in(&root, user, &command_line(run), &log);
    let stop = Stopper(&mut child);
    let (grpc, http) = server::ready_addresses(stop.0, &log);
    let pid = stop.0.id();
    assert_eq!(
        uids(pid),
        "65532 65532 65532 65532",
        "runs as the image's user"
    );

    let mut rls = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect to the image's server");
    let answer = rls
        .should_rate_limit(tenant_request("image-check"))
        .await
        .expect("ShouldRateLimit")
        .into_inner();
    assert_eq!(answer.overall_code, Code::Ok as i32, "{answer:?}");
    let limit = answer.statuses[0]
        .current_limit
        .as_ref()
        .expect("the limit");
    assert_eq!(
        limit.requests_per_unit, 600,
        "the ConfigMap's per-tenant limit"
    );

    let health = client()
        .get(format!("http://{http}/healthz"))
        .send()
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.expect("body"), "ok");

    // SIGTERM stops it gracefully: exit status 0.
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = stop.0.try_wait().expect("try_wait") {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "still running 30 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        exit.success(),
        "{exit}:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Kills the container's process if the test ends early.
struct Stopper<'a>(&'a mut Child);

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
