//! The files the rules apply to, and which of them are crate roots.

use crate::Error;
use std::path::{Path, PathBuf};

/// Folders never looked into: build outputs, virtualenvs, fuzzing's generated inputs.
const SKIPPED_DIRS: [&str; 4] = ["target", "corpus", "artifacts", "node_modules"];

/// Every `.rs` and `.lua` file under `root` (hidden folders and [`SKIPPED_DIRS`] left
/// out), relative to `root`, sorted.
pub fn source_files(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        let full = root.join(&dir);
        let entries = std::fs::read_dir(&full).map_err(|e| Error::Read(full.clone(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::Read(full.clone(), e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = dir.join(&*name);
            let kind = entry
                .file_type()
                .map_err(|e| Error::Read(full.clone(), e))?;
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&&*name) {
                    pending.push(path);
                }
            } else if kind.is_file() && (name.ends_with(".rs") || name.ends_with(".lua")) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The number of lines of the file at `path`.
pub fn line_count(path: &Path) -> Result<usize, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read(path.to_owned(), e))?;
    Ok(text.lines().count())
}

/// The files among `files` that Cargo builds as crates by its conventions: `build.rs`,
/// `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`, and the files
/// directly in `tests/`, `benches/`, `examples/` and `fuzz_targets/`.
pub fn crate_roots(files: &[PathBuf]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs") && is_crate_root(f))
        .cloned()
        .collect()
}

fn is_crate_root(file: &Path) -> bool {
    let parts: Vec<&str> = file.iter().filter_map(|p| p.to_str()).collect();
    let n = parts.len();
    let name = parts[n - 1];
    let parent = if n >= 2 { parts[n - 2] } else { "" };
    let grandparent = if n >= 3 { parts[n - 3] } else { "" };
    matches!(
        (grandparent, parent, name),
        (_, _, "build.rs")
            | (_, "src", "lib.rs" | "main.rs")
            | (_, "tests" | "benches" | "examples" | "fuzz_targets", _)
            | ("src", "bin", _)
            | ("bin", _, "main.rs")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_follow_cargo_conventions() {
        let files: Vec<PathBuf> = [
            "build.rs",
            "src/lib.rs",
            "src/host/mod.rs",
            "server/src/main.rs",
            "server/src/store/memory.rs",
            "server/tests/conformance.rs",
            "server/tests/conformance/blocked.rs",
            "server/tests/support/mod.rs",
            "tests/src/bin/soak.rs",
            "tests/src/bin/bench-filter/main.rs",
            "tests/src/bin/bench-filter/wrk.rs",
            "fuzz/fuzz_targets/rls.rs",
            "server/src/store/redis/check.lua",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let roots: Vec<String> = crate_roots(&files)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            roots,
            [
                "build.rs",
                "src/lib.rs",
                "server/src/main.rs",
                "server/tests/conformance.rs",
                "tests/src/bin/soak.rs",
                "tests/src/bin/bench-filter/main.rs",
                "fuzz/fuzz_targets/rls.rs",
            ]
        );
    }
}
