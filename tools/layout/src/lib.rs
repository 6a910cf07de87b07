//! The workspace's layout rules, as a check `make test` runs (`tests/workspace.rs`).
//!
//! Three rules keep the code something a newcomer can find their way in:
//!
//! - **No import circle between modules.** Within every module, its child modules form a
//!   graph: child `a` points at child `b` when anything under `a` names anything under
//!   `b` (`use crate::b::…`, `super::b::…`, a path in an expression or type). A circle in
//!   that graph (`a → b → a`) means neither can be read, tested or moved without the
//!   other. A child naming its own parent's items, or a parent its children's, is no
//!   circle: that is what a module folder is. Test-only items (`#[cfg(test)]`) are left
//!   out; they may reach anywhere.
//! - **No source file over [`MAX_FILE_LINES`] lines** (`.rs` and `.lua`), so every file
//!   can be read in one sitting; split one along a responsibility.
//! - **No server function over [`MAX_FUNCTION_LINES`] lines** outside tests (under
//!   `server/src/`, the request path and everything it calls), from `fn` to its closing
//!   brace.
//!
//! Known debt sits in `allow.txt` beside this crate, one finding per line. The list only
//! shrinks: a new finding fails the check, and so does a line that no longer matches
//! anything (delete it when the debt is paid).
//!
//! [`walk`] finds the files and crate roots, [`tree`] builds each crate's modules from
//! its `mod` declarations, [`refs`] collects what each module names, [`circles`] finds
//! the circles, [`functions`] measures functions, [`allow`] reads the allow-list.

pub mod allow;
pub mod circles;
pub mod functions;
pub mod refs;
pub mod tree;
pub mod walk;

use std::fmt;
use std::path::{Path, PathBuf};

/// The longest a source file may be, in lines.
pub const MAX_FILE_LINES: usize = 400;

/// The longest a server function may be, in lines (signature to closing brace).
pub const MAX_FUNCTION_LINES: usize = 80;

/// The folder whose functions the function rule applies to.
pub const FUNCTION_RULE_UNDER: &str = "server/src";

/// One breach of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A source file over [`MAX_FILE_LINES`].
    LongFile {
        /// The file, relative to the workspace root.
        path: PathBuf,
        /// Its length.
        lines: usize,
    },
    /// Child modules of one module that import each other in a circle.
    Circle(circles::Circle),
    /// A function over [`MAX_FUNCTION_LINES`].
    LongFunction {
        /// The file, relative to the workspace root.
        path: PathBuf,
        /// `Type::name` or `name`.
        name: String,
        /// Its length.
        lines: usize,
    },
}

impl Finding {
    /// The finding as an `allow.txt` line: `file PATH`, `circle ROOT MODULE A B…` or
    /// `function PATH NAME`. Lengths are left out, so that a file growing by a line does
    /// not need a new entry (it already has one).
    pub fn key(&self) -> String {
        match self {
            Finding::LongFile { path, .. } => format!("file {}", path.display()),
            Finding::Circle(c) => c.key(),
            Finding::LongFunction { path, name, .. } => {
                format!("function {} {name}", path.display())
            }
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::LongFile { path, lines } => write!(
                f,
                "{} has {lines} lines (at most {MAX_FILE_LINES}): split it along a responsibility",
                path.display()
            ),
            Finding::Circle(c) => write!(f, "{c}"),
            Finding::LongFunction { path, name, lines } => write!(
                f,
                "{}: fn {name} has {lines} lines (at most {MAX_FUNCTION_LINES}): split it into steps",
                path.display()
            ),
        }
    }
}

/// Why the check could not run.
#[derive(Debug)]
pub enum Error {
    /// A file could not be read.
    Read(PathBuf, std::io::Error),
    /// A Rust file does not parse.
    Parse(PathBuf, syn::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read(p, e) => write!(f, "{}: {e}", p.display()),
            Error::Parse(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for Error {}

/// Every finding in the workspace at `root`, in a stable order.
pub fn check(root: &Path) -> Result<Vec<Finding>, Error> {
    let files = walk::source_files(root)?;
    let mut findings = Vec::new();
    for file in &files {
        let lines = walk::line_count(&root.join(file))?;
        if lines > MAX_FILE_LINES {
            findings.push(Finding::LongFile {
                path: file.clone(),
                lines,
            });
        }
    }
    // The function rule reads only files some crate builds outside tests.
    let mut built = std::collections::BTreeSet::new();
    for crate_root in walk::crate_roots(&files) {
        let krate = tree::Crate::load(root, &crate_root)?;
        findings.extend(circles::find(&krate).into_iter().map(Finding::Circle));
        built.extend(krate.modules.iter().map(|m| m.file.clone()));
    }
    for file in built.iter().filter(|f| f.starts_with(FUNCTION_RULE_UNDER)) {
        for f in functions::measure(&root.join(file))? {
            if f.lines > MAX_FUNCTION_LINES && !f.test_only {
                findings.push(Finding::LongFunction {
                    path: file.clone(),
                    name: f.name,
                    lines: f.lines,
                });
            }
        }
    }
    Ok(findings)
}

/// The workspace this crate sits in (two folders up from it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

/// The allow-list's text, `allow.txt` beside this crate's manifest.
pub fn allow_list() -> String {
    include_str!("../allow.txt").to_string()
}
