//! Reading the configuration from a file or a directory.
//!
//! The raw bytes are kept so the reloader can tell whether anything changed before parsing.
//! In a directory only `*.yaml` and `*.yml` files count, in name order; hidden entries are
//! skipped, which also skips the `..data` links of a Kubernetes ConfigMap mount (the
//! visible files are symlinks into it and are read through).
//!
//! A directory with a `config` subdirectory is envoyproxy/ratelimit's runtime layout,
//! `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml`, given as
//! `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`: the files of `config/` are read, and files beside
//! it are not, as the reference (watching the root) reads only its app directory. Every
//! path is resolved afresh at each read, so swapping the `RUNTIME_ROOT` symlink (the
//! reference's way to reload) or a ConfigMap's `..data` link is seen at the next poll.

use super::ConfigError;
use std::fs;
use std::path::{Path, PathBuf};

/// The configuration files' contents, in load order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// The path given on the command line.
    pub root: PathBuf,
    /// Each file and its text.
    pub files: Vec<(PathBuf, String)>,
}

/// Reads `path`: a single file, or every config file of a directory.
pub fn read(path: &Path) -> Result<Files, ConfigError> {
    let meta =
        fs::metadata(path).map_err(|e| ConfigError::new(path, "", format!("cannot read: {e}")))?;
    let paths = if meta.is_dir() {
        let dir = runtime_app_dir(path).unwrap_or_else(|| path.to_path_buf());
        let mut paths = list_dir(&dir)?;
        if paths.is_empty() {
            return Err(ConfigError::new(
                &dir,
                "",
                "no configuration files (*.yaml, *.yml) in this directory",
            ));
        }
        paths.sort();
        paths
    } else {
        vec![path.to_path_buf()]
    };
    let files = paths
        .into_iter()
        .map(|p| match fs::read_to_string(&p) {
            Ok(text) => Ok((p, text)),
            Err(e) => Err(ConfigError::new(&p, "", format!("cannot read: {e}"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Files {
        root: path.to_path_buf(),
        files,
    })
}

/// The app directory of the reference's runtime layout under `dir`, if `dir` has one.
fn runtime_app_dir(dir: &Path) -> Option<PathBuf> {
    let app = dir.join(RUNTIME_APP_DIRECTORY);
    app.is_dir().then_some(app)
}

/// The reference's default `RUNTIME_APPDIRECTORY`.
pub const RUNTIME_APP_DIRECTORY: &str = "config";

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries =
        fs::read_dir(dir).map_err(|e| ConfigError::new(dir, "", format!("cannot read: {e}")))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ConfigError::new(dir, "", format!("cannot read: {e}")))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        // `is_file` follows symlinks, so ConfigMap-style links to files count.
        if yaml && !name.starts_with('.') && path.is_file() {
            out.push(path);
        }
    }
    Ok(out)
}
