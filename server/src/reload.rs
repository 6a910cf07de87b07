//! Watches the configuration and applies valid changes without a restart.
//!
//! Polls: every interval the file or directory is read again and compared byte for byte
//! with what was last seen. Polling needs no platform watcher, sees edits, renames,
//! deletions and Kubernetes ConfigMap symlink swaps alike, and costs one small read per
//! interval. A change that validates replaces the configuration whole; one that does not is
//! logged and counted, and the previous configuration stays in force. The same broken
//! content is reported once, not at every poll.
//!
//! **A change is applied only once it is stable**: when two reads a poll apart return the
//! same bytes ([`settle`]). A file written in place arrives in pieces (an editor's or
//! `kubectl cp`'s write, a `cat >` from a slow pipe), and a piece can be valid YAML that
//! says something else: `requests_per_unit: 6000` read after its first byte is `6`, which
//! would reset that limit's counters and make every Envoy cache the denials it causes. A
//! writer that finishes within one interval is therefore never seen half way; one that
//! pauses longer than an interval mid-write can still be, which is why an atomic swap (a
//! rename, as a ConfigMap's `..data` or the reference's runtime root symlink) is the way
//! to deploy: a read then sees the old files or the new ones, never a mix, and the wait
//! only delays the change by one interval.

use crate::config::{self, source};
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// One read of the configuration: its files, or why they could not be read.
type Read = Result<source::Files, String>;

/// What one poll does with what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// What is in force (or was last reported broken): nothing to do.
    Unchanged,
    /// Different from what is in force and from the previous read: still changing, so
    /// wait for the next poll.
    Wait,
    /// Different from what is in force and the same as the previous read: stable, apply.
    Apply,
}

/// What to do with `now`, given what is in force (`seen`) and what the previous poll read
/// if it was a change not yet applied (`pending`).
fn settle(seen: &Read, pending: Option<&Read>, now: &Read) -> Step {
    if now == seen {
        Step::Unchanged
    } else if pending == Some(now) {
        Step::Apply
    } else {
        Step::Wait
    }
}

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
    let mut seen: Read = Ok(seen);
    let mut pending: Option<Read> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let p = path.clone();
        let now: Read = match tokio::task::spawn_blocking(move || source::read(&p)).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(e) => {
                tracing::error!(error = %e, "configuration reader failed");
                continue;
            }
        };
        match settle(&seen, pending.as_ref(), &now) {
            Step::Unchanged => {
                pending = None;
                continue;
            }
            Step::Wait => {
                if pending.is_none() {
                    tracing::info!(
                        path = %path.display(),
                        "configuration changed; applying it once it reads the same at the next poll"
                    );
                }
                pending = Some(now);
                continue;
            }
            Step::Apply => pending = None,
        }
        apply(&now, &options, &shared, &metrics, &path);
        seen = now;
    }
}

/// Puts a stable change in force if it validates; else logs and counts it.
fn apply(
    now: &Read,
    options: &config::LoadOptions,
    shared: &config::Shared,
    metrics: &Metrics,
    path: &std::path::Path,
) {
    let parsed = now
        .as_ref()
        .map_err(String::clone)
        .and_then(|files| config::parse_with(files, options).map_err(|e| e.to_string()));
    match parsed {
        Ok(c) => {
            let domains = c.domain_names().count();
            put_in_force(c, shared, metrics);
            metrics.reload(true);
            tracing::info!(path = %path.display(), domains, "configuration reloaded");
        }
        Err(e) => {
            metrics.reload(false);
            tracing::error!("{e}; keeping the previous configuration");
        }
    }
}

/// Puts a validated configuration in force, whatever its source (a file reload or an xDS
/// push): its series are created first, so they export zeros before its first decision.
/// The store is untouched, so a limit whose definition did not change keeps its counters
/// (its keys are derived from the definition).
pub fn put_in_force(config: config::Config, shared: &config::Shared, metrics: &Metrics) {
    metrics.register_config(&config);
    shared.set(config);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Read {
        Ok(source::Files {
            root: PathBuf::from("c.yaml"),
            files: vec![(PathBuf::from("c.yaml"), text.to_owned())],
        })
    }

    #[test]
    fn a_change_is_applied_once_two_reads_agree() {
        let in_force = read("requests_per_unit: 5");
        let half = read("requests_per_unit: 6");
        let whole = read("requests_per_unit: 6000");
        assert_eq!(settle(&in_force, None, &in_force), Step::Unchanged);
        // Half written at one poll, whole at the next: neither is applied yet.
        assert_eq!(settle(&in_force, None, &half), Step::Wait);
        assert_eq!(settle(&in_force, Some(&half), &whole), Step::Wait);
        assert_eq!(settle(&in_force, Some(&whole), &whole), Step::Apply);
        // A change undone before it settled: nothing to apply.
        assert_eq!(settle(&in_force, Some(&half), &in_force), Step::Unchanged);
        // A file missing for one poll (a non-atomic redeploy) is not reported either.
        let missing: Read = Err("c.yaml: cannot read".into());
        assert_eq!(settle(&in_force, None, &missing), Step::Wait);
        assert_eq!(
            settle(&in_force, Some(&missing), &in_force),
            Step::Unchanged
        );
        assert_eq!(settle(&in_force, Some(&missing), &missing), Step::Apply);
    }
}
