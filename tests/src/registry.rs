//! A real container registry (the Distribution `docker-registry` from Debian) on a free
//! loopback port, to check that images we build push with ordinary tools and come back
//! as Istio will fetch them.

use crate::oci;
use crate::paths;
use crate::wait;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tempfile::TempDir;

/// How long the registry may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running registry with storage in a temporary directory; killed when dropped.
pub struct Registry {
    child: Child,
    dir: TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
    http: reqwest::Client,
}

impl Registry {
    /// Starts the registry on 127.0.0.1 port 0 and waits until `/v2/` answers 200.
    pub async fn start() -> Registry {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("storage");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: info}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp:\n  addr: 127.0.0.1:0\n",
                storage.display()
            ),
        )
        .expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new(paths::program("docker-registry", "make oci-tools"))
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn docker-registry");
        let mut registry = Registry {
            child,
            dir,
            host: String::new(),
            http: crate::client(),
        };
        // The registry logs the address it bound: "listening on 127.0.0.1:PORT".
        let log_path = registry.dir.path().join("registry.log");
        registry.host = wait::until("registry address", START_TIMEOUT, || {
            let exited = registry.child.try_wait().ok().flatten();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            async move {
                assert!(exited.is_none(), "docker-registry exited:\n{log}");
                let rest = log.split("listening on ").nth(1)?;
                let addr: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                addr.rsplit_once(':')
                    .filter(|(_, port)| !port.is_empty() && *port != "0")
                    .map(|_| addr.clone())
            }
        })
        .await;
        let url = format!("http://{}/v2/", registry.host);
        wait::until("registry /v2/", START_TIMEOUT, || {
            let request = registry.http.get(&url).send();
            async move { (request.await.ok()?.status() == 200).then_some(()) }
        })
        .await;
        registry
    }

    /// The manifest stored under `repository:tag` (asking for an OCI manifest, as Istio's
    /// puller does) and the digest the registry reports for it.
    pub async fn manifest(&self, repository: &str, tag: &str) -> (Vec<u8>, String) {
        let url = format!("http://{}/v2/{repository}/manifests/{tag}", self.host);
        let response = self
            .http
            .get(&url)
            .header("accept", oci::MANIFEST)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(response.status(), 200, "GET {url}");
        let digest = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .expect("Docker-Content-Digest header")
            .to_string();
        let bytes = response.bytes().await.expect("manifest body").to_vec();
        (bytes, digest)
    }

    /// Blob `descriptor` of `repository`, checked against the descriptor.
    pub async fn blob(&self, repository: &str, what: &str, descriptor: &Value) -> Vec<u8> {
        let digest = descriptor["digest"].as_str().expect("descriptor digest");
        let url = format!("http://{}/v2/{repository}/blobs/{digest}", self.host);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(response.status(), 200, "GET {url}");
        let bytes = response.bytes().await.expect("blob body").to_vec();
        oci::check_descriptor(what, descriptor, &bytes);
        bytes
    }

    /// The manifest stored under `repository:tag`, the digest the registry reported, and
    /// every blob it references (config and layers) by digest, each checked against its
    /// descriptor.
    async fn fetch(&self, repository: &str, tag: &str) -> (Vec<u8>, String, Blobs) {
        let (manifest, reported) = self.manifest(repository, tag).await;
        let parsed: Value = serde_json::from_slice(&manifest).expect("manifest JSON");
        let mut blobs = Blobs::new();
        let descriptors = std::iter::once(&parsed["config"])
            .chain(parsed["layers"].as_array().into_iter().flatten());
        for descriptor in descriptors {
            let bytes = self.blob(repository, "blob", descriptor).await;
            blobs.insert(descriptor["digest"].to_string(), bytes);
        }
        (manifest, reported, blobs)
    }

    /// Pulls `repository:tag` as Istio does for an `oci://` URL: the manifest by tag,
    /// then its blobs, checking every digest; returns what it found and the digest the
    /// registry reported for the tag.
    pub async fn pull(&self, repository: &str, tag: &str) -> (oci::Pulled, String) {
        let (manifest, reported, blobs) = self.fetch(repository, tag).await;
        (oci::follow_manifest(&manifest, lookup(&blobs)), reported)
    }

    /// Pulls a runnable image `repository:tag` as a container runtime does: the manifest
    /// by tag, then its config and layer, checking every digest; returns it with the
    /// digest the registry reported for the tag.
    pub async fn pull_image(&self, repository: &str, tag: &str) -> (oci::Image, String) {
        let (manifest, reported, blobs) = self.fetch(repository, tag).await;
        (oci::follow_image(&manifest, lookup(&blobs)), reported)
    }

    /// Everything the registry logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

/// Fetched blobs by their descriptor's digest (as JSON text).
type Blobs = std::collections::HashMap<String, Vec<u8>>;

/// A blob source over fetched blobs, checking each against the descriptor asking for it.
fn lookup(blobs: &Blobs) -> impl Fn(&str, &Value) -> Vec<u8> + '_ {
    move |what, descriptor| {
        let bytes = blobs
            .get(&descriptor["digest"].to_string())
            .unwrap_or_else(|| panic!("{what} was not fetched"))
            .clone();
        oci::check_descriptor(what, descriptor, &bytes);
        bytes
    }
}

/// `skopeo copy --preserve-digests SOURCE DESTINATION` into a plain-HTTP registry (the
/// push command of `docs/istio.md`); panics with skopeo's output if it fails.
pub fn skopeo_copy(source: &str, destination: &str) {
    let out = Command::new(paths::program("skopeo", "make oci-tools"))
        .args(["copy", "--dest-tls-verify=false", "--preserve-digests"])
        .arg(source)
        .arg(destination)
        .output()
        .expect("run skopeo");
    assert!(
        out.status.success(),
        "skopeo copy {source} {destination}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
