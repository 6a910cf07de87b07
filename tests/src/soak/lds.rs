//! Listeners from a file (LDS with `path_config_source`): how the soak changes the
//! plugin configuration of a running Envoy.
//!
//! Envoy watches the file's directory (`watched_directory`) and reloads when a file is
//! moved into it, so an update is written to a temporary name in the same directory and
//! renamed over the old file: Envoy never reads a half-written file. An update is applied
//! when `listener_manager.lds.update_success` grows; `update_rejected` growing means Envoy
//! refused it.

use crate::Envoy;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long Envoy may take to pick up and apply a new listener file.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(30);

const SUCCESS: &str = "listener_manager.lds.update_success";
const REJECTED: &str = "listener_manager.lds.update_rejected";

/// The directory and file Envoy reads its listeners from.
pub struct ListenerFile {
    dir: TempDir,
    version: u32,
}

impl ListenerFile {
    /// Writes the first version, holding `listeners`.
    pub fn new(listeners: &[Value]) -> Result<ListenerFile, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let mut file = ListenerFile { dir, version: 0 };
        file.write(listeners)?;
        Ok(file)
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("listeners.json")
    }

    /// The bootstrap's `dynamic_resources`, pointing Envoy at this file.
    pub fn dynamic_resources(&self) -> Value {
        json!({"lds_config": {
            "resource_api_version": "V3",
            "path_config_source": {
                "path": self.path().display().to_string(),
                "watched_directory": {"path": self.dir.path().display().to_string()}
            }
        }})
    }

    /// Replaces the file's listeners with `listeners` (a new version) and waits until
    /// `envoy` has applied them. Returns the new `update_success` count.
    pub async fn update(&mut self, envoy: &Envoy, listeners: &[Value]) -> Result<u64, String> {
        let stats = envoy.stats().await;
        let success = stats.get(SUCCESS).copied().unwrap_or(0);
        let rejected = stats.get(REJECTED).copied().unwrap_or(0);
        self.write(listeners)?;
        let deadline = Instant::now() + UPDATE_TIMEOUT;
        loop {
            let stats = envoy.stats().await;
            let now = stats.get(SUCCESS).copied().unwrap_or(0);
            if now > success {
                return Ok(now);
            }
            if stats.get(REJECTED).copied().unwrap_or(0) > rejected {
                return Err(format!("Envoy rejected listener version {}", self.version));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{SUCCESS} still {now} {UPDATE_TIMEOUT:?} after writing version {}",
                    self.version
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Writes the next version under a temporary name and renames it over the file.
    fn write(&mut self, listeners: &[Value]) -> Result<(), String> {
        self.version += 1;
        let resources: Vec<Value> = listeners
            .iter()
            .map(|l| {
                let mut l = l.clone();
                l["@type"] = json!("type.googleapis.com/envoy.config.listener.v3.Listener");
                l
            })
            .collect();
        let body = json!({"version_info": self.version.to_string(), "resources": resources});
        let staging = self.dir.path().join(".listeners.json.tmp");
        std::fs::write(&staging, body.to_string())
            .and_then(|()| std::fs::rename(&staging, self.path()))
            .map_err(|e| format!("write {}: {e}", self.path().display()))
    }
}
