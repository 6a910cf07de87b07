//! Reading the configuration from a file or a directory.
//!
//! The raw bytes are kept so the reloader can tell whether anything changed before parsing.
//! In a directory only `*.yaml` and `*.yml` files count, in name order; hidden entries are
//! skipped, which also skips the `..data` links of a Kubernetes ConfigMap mount (the
//! visible files are symlinks into it and are read through).

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
        let mut paths = list_dir(path)?;
        if paths.is_empty() {
            return Err(ConfigError::new(
                path,
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
