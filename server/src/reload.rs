//! Watches the configuration and applies valid changes without a restart.
//!
//! Polls: every interval the file or directory is read again and compared byte for byte
//! with what was last seen. Polling needs no platform watcher, sees edits, renames,
//! deletions and Kubernetes ConfigMap symlink swaps alike, and costs one small read per
//! interval. A change that validates replaces the configuration whole; one that does not is
//! logged and counted, and the previous configuration stays in force. The same broken
//! content is reported once, not at every poll.

use crate::config::{self, source};
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Polls `path` every `every` until `shutdown` turns true; `seen` is what is in force,
/// and `options` how it was read.
pub async fn watch_config(
    path: PathBuf,
    seen: source::Files,
    options: config::LoadOptions,
    shared: config::Shared,
    metrics: Arc<Metrics>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut seen: Result<source::Files, String> = Ok(seen);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let p = path.clone();
        let read = match tokio::task::spawn_blocking(move || source::read(&p)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "configuration reader failed");
                continue;
            }
        };
        let now: Result<source::Files, String> = match read {
            Ok(files) => Ok(files),
            Err(e) => Err(e.to_string()),
        };
        if now == seen {
            continue;
        }
        match &now {
            Ok(files) => match config::parse_with(files, &options) {
                Ok(c) => {
                    let domains = c.domain_names().count();
                    metrics.register_config(&c);
                    shared.set(c);
                    metrics.reload(true);
                    tracing::info!(path = %path.display(), domains, "configuration reloaded");
                }
                Err(e) => {
                    metrics.reload(false);
                    tracing::error!("{e}; keeping the previous configuration");
                }
            },
            Err(e) => {
                metrics.reload(false);
                tracing::error!("{e}; keeping the previous configuration");
            }
        }
        seen = now;
    }
}
