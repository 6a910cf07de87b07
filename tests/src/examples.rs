//! The examples (`examples/<name>/envoy.yaml`), made runnable in a test: their fixed ports
//! (listeners, admin, the demo upstream, the limiter) are rewritten to port 0 or to the
//! test's own processes, so examples run in parallel with everything else.

use crate::paths;
use crate::{Envoy, Server, Upstream};
use serde::Deserialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The Envoy configuration of an example.
pub const ENVOY_FILE: &str = "envoy.yaml";

/// floodgate-server's configuration beside an example's Envoy configuration, for an
/// example in global mode (`make run` starts the server with it).
pub const SERVER_FILE: &str = "ratelimit.yaml";

/// Every example's Envoy configuration (`examples/<name>/envoy.yaml`), sorted.
pub fn files() -> Vec<PathBuf> {
    let dir = paths::repo_root().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path().join(ENVOY_FILE))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// An example's Envoy configuration by the example's name (`local`, `global`, `llm`).
pub fn file(name: &str) -> PathBuf {
    paths::repo_root()
        .join("examples")
        .join(name)
        .join(ENVOY_FILE)
}

/// An example as JSON.
pub fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = serde_yaml_ng::Deserializer::from_str(&text)
        .next()
        .unwrap_or_else(|| panic!("{}: empty", path.display()));
    Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every floodgate plugin configuration in the example, parsed.
pub fn plugin_configurations(example: &Value) -> Vec<Value> {
    let mut found = Vec::new();
    visit(example, &mut |node| {
        let config = &node["typed_config"]["config"];
        if node["name"] == "envoy.filters.http.wasm" && config["root_id"] == "floodgate" {
            let text = config["configuration"]["value"].as_str().unwrap_or("{}");
            found.push(serde_json::from_str(text).unwrap_or(Value::Null));
        }
    });
    found
}

/// The clusters the example's floodgate filters call as their rate limit service.
pub fn rls_clusters(example: &Value) -> Vec<String> {
    plugin_configurations(example)
        .iter()
        .filter_map(|c| c["rls"]["cluster"].as_str().map(str::to_string))
        .collect()
}

/// The floodgate-server configuration beside the example at `path` ([`SERVER_FILE`]),
/// which must serve `domain`, the one the example's filter asks about.
pub fn server_config_for(path: &Path, domain: &str) -> String {
    let file = path.with_file_name(SERVER_FILE);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (an example in global mode needs one)",
            file.display()
        )
    });
    let parsed: Value = serde_yaml_ng::from_str(&text).unwrap_or(Value::Null);
    assert_eq!(
        parsed["domain"],
        domain,
        "{} must serve the domain its example's filter asks about",
        file.display()
    );
    text
}

/// The domains the example's floodgate filters ask their rate limit service about.
pub fn rls_domains(example: &Value) -> Vec<String> {
    plugin_configurations(example)
        .iter()
        .filter_map(|c| c["rls"]["domain"].as_str().map(str::to_string))
        .collect()
}

/// Rewrites the example to run here: listeners and admin on port 0, the floodgate modules
/// at their built paths, each rate limit service cluster at `rls` and every other cluster
/// at `upstream`. Panics when the example needs a limiter and `rls` is `None`.
pub fn localize(example: &mut Value, upstream: SocketAddr, rls: Option<SocketAddr>) {
    let rls_names = rls_clusters(example);
    let resources = &mut example["static_resources"];
    for listener in resources["listeners"].as_array_mut().into_iter().flatten() {
        set(listener, "/address/socket_address/port_value", 0.into());
    }
    for cluster in resources["clusters"].as_array_mut().into_iter().flatten() {
        let name = cluster["name"].as_str().unwrap_or_default().to_string();
        let target = if rls_names.contains(&name) {
            rls.unwrap_or_else(|| panic!("cluster {name} needs a floodgate-server"))
        } else {
            upstream
        };
        let groups = cluster.pointer_mut("/load_assignment/endpoints");
        for group in groups.and_then(Value::as_array_mut).into_iter().flatten() {
            for endpoint in group["lb_endpoints"].as_array_mut().into_iter().flatten() {
                let socket = "/endpoint/address/socket_address";
                set(
                    endpoint,
                    &format!("{socket}/address"),
                    target.ip().to_string().into(),
                );
                set(
                    endpoint,
                    &format!("{socket}/port_value"),
                    target.port().into(),
                );
            }
        }
    }
    set(
        example,
        "/admin/address/socket_address/port_value",
        0.into(),
    );
    let wasm = paths::wasm().display().to_string();
    let llm_wasm = paths::llm_wasm().display().to_string();
    visit_mut(example, &mut |local| {
        let file = local["filename"].as_str().unwrap_or_default();
        if file.ends_with("/floodgate.wasm") {
            local["filename"] = wasm.clone().into();
        } else if file.ends_with("/floodgate-llm.wasm") {
            local["filename"] = llm_wasm.clone().into();
        }
    });
}

/// Replaces the value at `pointer` when it exists; never creates one.
fn set(node: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = node.pointer_mut(pointer) {
        *slot = value;
    }
}

fn visit(node: &Value, f: &mut impl FnMut(&Value)) {
    f(node);
    match node {
        Value::Array(items) => items.iter().for_each(|v| visit(v, f)),
        Value::Object(map) => map.values().for_each(|v| visit(v, f)),
        _ => {}
    }
}

/// Calls `f` on every `local` data source of a `vm_config.code` (what names a module file).
fn visit_mut(node: &mut Value, f: &mut impl FnMut(&mut Value)) {
    if let Some(local) = node.pointer_mut("/vm_config/code/local") {
        f(local);
    }
    match node {
        Value::Array(items) => items.iter_mut().for_each(|v| visit_mut(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| visit_mut(v, f)),
        _ => {}
    }
}

/// An example running here, with what it talks to.
pub struct Running {
    /// The example's path relative to the repository root, for messages.
    pub name: String,
    /// Envoy running the localized example (two workers).
    pub envoy: Envoy,
    /// The counting upstream standing in for the demo one.
    pub upstream: Upstream,
    /// floodgate-server with the example's `ratelimit.yaml`, when the example is in
    /// global mode.
    pub server: Option<Server>,
    /// The first listener's name.
    pub listener: String,
}

/// Starts the example at `path`: a counting upstream, a floodgate-server when its filter
/// calls one (configured from the example's `ratelimit.yaml`, as `make run` pairs them),
/// and Envoy.
pub async fn start(path: &Path) -> Running {
    let name = path
        .strip_prefix(paths::repo_root())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut example = load(path);
    let upstream = Upstream::start().await;
    let domains = rls_domains(&example);
    assert!(
        domains.len() <= 1,
        "{name}: one rate limit domain per example"
    );
    let server = domains
        .first()
        .map(|domain| Server::start(&server_config_for(path, domain), &[]));
    localize(
        &mut example,
        upstream.addr(),
        server.as_ref().map(Server::grpc),
    );
    let envoy = Envoy::start(&example.to_string(), 2).await;
    let listener = example["static_resources"]["listeners"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no listener"))
        .to_string();
    Running {
        name,
        envoy,
        upstream,
        server,
        listener,
    }
}
