//! Validating manifests the way an API server would: Kubernetes' own resources against
//! Kubernetes' published schemas (`kubernetes-validate`, strict: an unknown field is an
//! error, as `kubectl apply --validate=strict` makes it), Istio's against Istio's CRD
//! schemas (`tools/k8s-validate/istio.mjs`).

use crate::manifests::Document;
use crate::paths;
use std::io::Write;
use std::process::{Command, Stdio};

/// The oldest Kubernetes the manifests are checked against, and the
/// newest schema set `kubernetes-validate` has.
pub const KUBERNETES_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];

/// Whether `document` is one of Istio's custom resources.
pub fn is_istio(document: &Document) -> bool {
    document.value["apiVersion"]
        .as_str()
        .and_then(|v| v.split('/').next())
        .is_some_and(|group| group.ends_with(".istio.io"))
}

/// `Err(report)` unless every document passes Kubernetes' schemas, strictly, for every
/// version of [`KUBERNETES_VERSIONS`]. A document of a kind without a schema fails too.
pub fn kubernetes(documents: &[&Document]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    for (i, document) in documents.iter().enumerate() {
        let file = dir.path().join(format!("{i}.json"));
        std::fs::write(&file, document.value.to_string()).expect("write document");
        files.push((file, document.id()));
    }
    let mut command = Command::new(paths::kube_validate());
    command.args(["--strict", "--quiet"]);
    for version in KUBERNETES_VERSIONS {
        command.args(["-k", version]);
    }
    let out = command
        .args(files.iter().map(|(f, _)| f))
        .output()
        .expect("run kubernetes-validate");
    let mut report = String::from_utf8_lossy(&out.stdout).into_owned();
    report.push_str(&String::from_utf8_lossy(&out.stderr));
    // Name the manifests rather than the temporary files.
    for (file, id) in &files {
        report = report.replace(&file.display().to_string(), id);
    }
    // --quiet leaves only warnings (a kind with no schema) and failures.
    if out.status.success() && report.trim().is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}

/// `Err(report)` unless every document passes Istio's CRD schemas.
pub fn istio(documents: &[&Document]) -> Result<(), String> {
    let input: Vec<serde_json::Value> = documents
        .iter()
        .map(|d| serde_json::json!({"id": d.id(), "document": d.value}))
        .collect();
    let mut child = Command::new(paths::program("node", "make kube-validate"))
        .arg(paths::istio_validate())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::Value::Array(input).to_string().as_bytes())
        .expect("write documents");
    let out = child.wait_with_output().expect("wait for node");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let all_ok = report.lines().filter(|l| l.starts_with("OK ")).count() == documents.len();
    if out.status.success() && all_ok {
        Ok(())
    } else {
        Err(report)
    }
}
