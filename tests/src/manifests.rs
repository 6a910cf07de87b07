//! The Kubernetes manifests under `deploy/` and `examples/istio/`, read as `kubectl` would
//! read them once rendered.
//!
//! The manifests are templates: `${NAME}` stands for what only the user knows (their
//! image reference, the digest `make oci` printed), rendered with `envsubst` as the
//! docs/istio.md shows. [`render`] does the same substitution for the tests.

use crate::paths;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The variables the manifests may use, each with a value of the right shape for tests.
pub const TEMPLATE_VARIABLES: [(&str, &str); 4] = [
    ("FLOODGATE_IMAGE", "registry.example.com/floodgate:0.1.0"),
    (
        "FLOODGATE_DIGEST",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    (
        "FLOODGATE_SERVER_REPOSITORY",
        "registry.example.com/floodgate-server",
    ),
    (
        "FLOODGATE_SERVER_DIGEST",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
];

/// One YAML document of a manifest file, as JSON.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it came from, relative to the repository root.
    pub file: String,
    /// The document.
    pub value: Value,
}

impl Document {
    /// `file kind/namespace/name`, for messages.
    pub fn id(&self) -> String {
        format!(
            "{} {}/{}/{}",
            self.file,
            self.value["kind"].as_str().unwrap_or("?"),
            self.value["metadata"]["namespace"].as_str().unwrap_or(""),
            self.value["metadata"]["name"].as_str().unwrap_or("?")
        )
    }
}

/// Replaces every `${NAME}` of [`TEMPLATE_VARIABLES`] in `text`, as `envsubst` does;
/// panics on any other `${…}`, so a new placeholder cannot appear undocumented.
pub fn render(file: &str, text: &str) -> String {
    let mut out = text.to_string();
    for (name, value) in TEMPLATE_VARIABLES {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    if let Some(at) = out.find("${") {
        let rest: String = out[at..].chars().take(40).collect();
        panic!("{file}: unknown template variable at {rest:?}");
    }
    out
}

/// Every document of every `*.yaml` under `dir` (relative to the repository root, read
/// recursively), rendered, in path order.
pub fn read(dir: &str) -> Vec<Document> {
    fn yaml_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                yaml_files(&path, found);
            } else if path.extension().and_then(|e| e.to_str()) == Some("yaml") {
                found.push(path);
            }
        }
    }
    let root = paths::repo_root();
    let mut files = Vec::new();
    yaml_files(&root.join(dir), &mut files);
    files.sort();
    let mut documents = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(&root)
            .expect("under the repository")
            .to_string_lossy()
            .into_owned();
        let text = render(
            &file,
            &std::fs::read_to_string(&path).expect("read manifest"),
        );
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{file}: {e}"));
            if !value.is_null() {
                documents.push(Document {
                    file: file.clone(),
                    value,
                });
            }
        }
    }
    documents
}

/// Every document of `deploy/` (floodgate-server's manifests), rendered.
pub fn deploy() -> Vec<Document> {
    read("deploy")
}

/// The documents of one `kind`.
pub fn of_kind<'a>(documents: &'a [Document], kind: &str) -> Vec<&'a Document> {
    documents
        .iter()
        .filter(|d| d.value["kind"] == kind)
        .collect()
}

/// The one document of `kind` named `name`.
pub fn named<'a>(documents: &'a [Document], kind: &str, name: &str) -> &'a Document {
    let found: Vec<_> = of_kind(documents, kind)
        .into_iter()
        .filter(|d| d.value["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind} named {name}");
    found[0]
}

/// Every variant of floodgate-server's Deployment (memory, Redis): they are alternatives
/// with the same name.
pub fn server_deployments(documents: &[Document]) -> Vec<&Document> {
    let found: Vec<_> = of_kind(documents, "Deployment")
        .into_iter()
        .filter(|d| d.value["metadata"]["name"] == "floodgate-server")
        .collect();
    assert!(!found.is_empty(), "no Deployment floodgate-server");
    found
}

/// Every workload running floodgate-server: the memory and Redis Deployments and the
/// gossip DaemonSet, alternatives with the same name.
pub fn server_workloads(documents: &[Document]) -> Vec<&Document> {
    documents
        .iter()
        .filter(|d| d.value["kind"] == "Deployment" || d.value["kind"] == "DaemonSet")
        .filter(|d| d.value["metadata"]["name"] == "floodgate-server")
        .collect()
}

/// A workload's pod template's spec.
pub fn pod_spec(workload: &Document) -> &Value {
    &workload.value["spec"]["template"]["spec"]
}

/// A floodgate-server workload's server container (its first).
pub fn server_container(workload: &Document) -> &Value {
    &pod_spec(workload)["containers"][0]
}

/// The server container's arguments.
pub fn args(workload: &Document) -> Vec<String> {
    server_container(workload)["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The labels a selector (`matchLabels` or `labels`) requires.
pub fn labels(selector: &Value) -> BTreeMap<String, String> {
    selector
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "unknown template variable")]
    fn an_undocumented_placeholder_is_refused() {
        render("x.yaml", "url: ${SOMETHING_ELSE}");
    }
}
