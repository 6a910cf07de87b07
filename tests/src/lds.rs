//! An Envoy whose listeners can be changed while it runs, as a control plane changes them.
//!
//! Envoy reads its listeners from a file (LDS over a `path_config_source`) and watches the
//! file's directory: [`DynamicEnvoy::update_listeners`] writes the new listeners to a
//! temporary file and renames it over the old one (the atomic move Envoy's directory watch
//! reacts to), then waits until Envoy has applied them: no sleep, a readiness check on
//! Envoy's own view (admin `/config_dump`: every listener active at the new version and
//! none warming). A configuration Envoy refuses fails the test with Envoy's reason.
//!
//! Every update stamps its version into each filter chain's `name`, so that an update
//! with the same plugin configuration still replaces the filter chains (Envoy skips a
//! listener it has already, byte for byte): the filters are built again, as a real
//! control plane push does.
//!
//! For the common case, one plugin in front of one upstream:
//!
//! ```no_run
//! # async fn soak(upstream: std::net::SocketAddr, plugin: serde_json::Value, changed: serde_json::Value) {
//! use floodgate_integration::DynamicEnvoy;
//! let mut envoy = DynamicEnvoy::floodgate_local(&plugin, upstream, 2).await;
//! // ... traffic on envoy.url("ingress", "/") ...
//! envoy.update_plugin(&changed).await; // returns once Envoy serves the new configuration
//! # }
//! ```

use crate::configs;
use crate::wait;
use crate::Envoy;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tempfile::TempDir;

/// How long Envoy may take to apply a listener update (each VM configures the plugin).
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60);

/// A running Envoy with listeners from a file; derefs to [`Envoy`].
pub struct DynamicEnvoy {
    envoy: Envoy,
    dir: TempDir,
    version: u64,
    /// The cluster [`DynamicEnvoy::update_plugin`] routes to.
    upstream_cluster: String,
}

impl DynamicEnvoy {
    /// Starts Envoy with `listeners` from its LDS file and static `clusters`.
    pub async fn start(listeners: Vec<Value>, clusters: Vec<Value>, concurrency: u32) -> Self {
        let dir = tempfile::tempdir().expect("LDS dir");
        let lds = dir.path().join("lds.json");
        write_resources(&lds, 1, &listeners);
        let yaml = configs::bootstrap_dynamic(&lds, clusters);
        DynamicEnvoy {
            envoy: Envoy::start(&yaml, concurrency).await,
            dir,
            version: 1,
            upstream_cluster: "upstream".into(),
        }
    }

    /// Listener `ingress` with floodgate configured by `plugin`, routing to `upstream`
    /// (cluster `upstream`), as [`configs::floodgate_local`] but updatable.
    pub async fn floodgate_local(plugin: &Value, upstream: SocketAddr, concurrency: u32) -> Self {
        DynamicEnvoy::start(
            vec![ingress(plugin, "upstream")],
            vec![configs::cluster("upstream", upstream, false)],
            concurrency,
        )
        .await
    }

    /// Replaces listener `ingress` by one with floodgate configured by `plugin` (the same
    /// JSON or a changed one), and returns once Envoy serves it.
    pub async fn update_plugin(&mut self, plugin: &Value) {
        let listener = ingress(plugin, &self.upstream_cluster);
        self.update_listeners(vec![listener]).await;
    }

    /// Replaces every listener by `listeners` and returns once Envoy has applied them
    /// (panics with Envoy's reason if it refuses them). Listener addresses are found
    /// again: a listener that keeps its address keeps its port.
    pub async fn update_listeners(&mut self, listeners: Vec<Value>) {
        if let Err(reason) = self.try_update_listeners(listeners).await {
            panic!(
                "Envoy refused listener version {}: {reason}\n{}",
                self.version,
                self.log()
            );
        }
    }

    /// Like [`DynamicEnvoy::update_listeners`], returning Envoy's reason if it refuses
    /// the listeners (it then keeps serving the ones it had).
    pub async fn try_update_listeners(&mut self, listeners: Vec<Value>) -> Result<(), String> {
        self.version += 1;
        let version = self.version;
        let names: Vec<String> = listeners
            .iter()
            .filter_map(|l| l["name"].as_str().map(str::to_string))
            .collect();
        let staged = self.dir.path().join("lds.json.next");
        write_resources(&staged, version, &listeners);
        std::fs::rename(&staged, self.lds_path()).expect("rename the LDS file");
        let (envoy, names) = (&self.envoy, &names);
        wait::until("the listener update", UPDATE_TIMEOUT, || async move {
            let dump = envoy
                .admin_get("/config_dump?resource=dynamic_listeners")
                .await?;
            match applied(&dump, version, names) {
                Applied::Yes => Some(Ok(())),
                Applied::Refused(reason) => Some(Err(reason)),
                Applied::NotYet => None,
            }
        })
        .await?;
        let deadline = std::time::Instant::now() + UPDATE_TIMEOUT;
        while !self.envoy.refresh_listeners().await {
            assert!(
                std::time::Instant::now() < deadline,
                "listener ports after update {version}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Like [`DynamicEnvoy::update_plugin`], returning Envoy's reason if it refuses it.
    pub async fn try_update_plugin(&mut self, plugin: &Value) -> Result<(), String> {
        let listener = ingress(plugin, &self.upstream_cluster);
        self.try_update_listeners(vec![listener]).await
    }

    /// The version of the listeners last applied (1 at start).
    pub fn version(&self) -> u64 {
        self.version
    }

    fn lds_path(&self) -> PathBuf {
        self.dir.path().join("lds.json")
    }
}

impl std::ops::Deref for DynamicEnvoy {
    type Target = Envoy;

    fn deref(&self) -> &Envoy {
        &self.envoy
    }
}

/// Listener `ingress` running floodgate with `plugin`, routing to `cluster`.
fn ingress(plugin: &Value, cluster: &str) -> Value {
    configs::listener("ingress", vec![configs::floodgate_filter(plugin)], cluster)
}

/// Writes an LDS discovery response of `listeners` at `version` to `path`.
fn write_resources(path: &std::path::Path, version: u64, listeners: &[Value]) {
    let resources: Vec<Value> = listeners
        .iter()
        .map(|listener| {
            let mut listener = listener.clone();
            listener["@type"] = json!("type.googleapis.com/envoy.config.listener.v3.Listener");
            if let Some(chains) = listener["filter_chains"].as_array_mut() {
                for (i, chain) in chains.iter_mut().enumerate() {
                    chain["name"] = json!(format!("v{version}-{i}"));
                }
            }
            listener
        })
        .collect();
    let response = json!({"version_info": version.to_string(), "resources": resources});
    std::fs::write(path, response.to_string()).expect("write the LDS file");
}

/// Where Envoy is with listener `version`, from its `/config_dump`.
enum Applied {
    Yes,
    NotYet,
    Refused(String),
}

fn applied(dump: &str, version: u64, names: &[String]) -> Applied {
    let Ok(dump) = serde_json::from_str::<Value>(dump) else {
        return Applied::NotYet;
    };
    // With `?resource=dynamic_listeners`, each entry of `configs` is one listener.
    let listeners: Vec<&Value> = dump["configs"].as_array().into_iter().flatten().collect();
    for name in names {
        let Some(listener) = listeners.iter().find(|l| l["name"] == json!(name)) else {
            return Applied::NotYet;
        };
        // Envoy 1.40's dump keeps the old `version_info` after an in-place update and has
        // none in `error_state`, so versions are recognised by our stamp in the chains.
        let error = &listener["error_state"];
        if stamped(&error["failed_configuration"], version) {
            return Applied::Refused(error["details"].to_string());
        }
        if !stamped(&listener["active_state"]["listener"], version)
            || !listener["warming_state"].is_null()
        {
            return Applied::NotYet;
        }
    }
    Applied::Yes
}

/// Whether every filter chain of `listener` carries the stamp of `version`.
fn stamped(listener: &Value, version: u64) -> bool {
    let stamp = format!("v{version}-");
    listener["filter_chains"].as_array().is_some_and(|chains| {
        chains
            .iter()
            .all(|c| c["name"].as_str().is_some_and(|n| n.starts_with(&stamp)))
    })
}
