//! A crate's modules, from its `mod` declarations: which file holds each, its children,
//! and what its items name ([`crate::refs`]). Test-only modules are left out.

use crate::refs::{self, Names};
use crate::Error;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use syn::{Expr, Item, Lit, Meta};

/// One module of a crate.
#[derive(Debug)]
pub struct Module {
    /// Its path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// The file holding its items, relative to the workspace root.
    pub file: PathBuf,
    /// Its parent (none for the root).
    pub parent: Option<usize>,
    /// Its child modules by name.
    pub children: BTreeMap<String, usize>,
    /// What its own items name.
    pub names: Names,
}

impl Module {
    /// `crate::a::b`.
    pub fn display(&self) -> String {
        std::iter::once("crate")
            .chain(self.path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }
}

/// A crate: its root file and every module reachable from it.
#[derive(Debug)]
pub struct Crate {
    /// The root file, relative to the workspace root.
    pub root_file: PathBuf,
    /// Its modules; the root is the first.
    pub modules: Vec<Module>,
}

/// Where a module's `mod name;` children live.
struct Dirs {
    /// The folder `mod name;` looks in (`name.rs`, `name/mod.rs`).
    children: PathBuf,
    /// The folder a `#[path]` is relative to.
    path_attr: PathBuf,
}

impl Crate {
    /// Loads the crate whose root is `root_file` (relative to `workspace`).
    pub fn load(workspace: &Path, root_file: &Path) -> Result<Crate, Error> {
        let mut krate = Crate {
            root_file: root_file.to_owned(),
            modules: Vec::new(),
        };
        let dir = root_file.parent().map(Path::to_owned).unwrap_or_default();
        let dirs = Dirs {
            children: dir.clone(),
            path_attr: dir,
        };
        krate.load_file(workspace, root_file, Vec::new(), None, &dirs)?;
        Ok(krate)
    }

    fn load_file(
        &mut self,
        workspace: &Path,
        file: &Path,
        path: Vec<String>,
        parent: Option<usize>,
        dirs: &Dirs,
    ) -> Result<(), Error> {
        let full = workspace.join(file);
        let text = std::fs::read_to_string(&full).map_err(|e| Error::Read(full.clone(), e))?;
        let parsed = syn::parse_file(&text).map_err(|e| Error::Parse(full.clone(), e))?;
        self.add(workspace, &parsed.items, file, path, parent, dirs)
    }

    fn add(
        &mut self,
        workspace: &Path,
        items: &[Item],
        file: &Path,
        path: Vec<String>,
        parent: Option<usize>,
        dirs: &Dirs,
    ) -> Result<(), Error> {
        let index = self.modules.len();
        self.modules.push(Module {
            path: path.clone(),
            file: file.to_owned(),
            parent,
            children: BTreeMap::new(),
            names: refs::collect(items),
        });
        if let Some(p) = parent {
            if let Some(name) = path.last() {
                self.modules[p].children.insert(name.clone(), index);
            }
        }
        for item in items {
            let Item::Mod(m) = item else { continue };
            if refs::test_only(&m.attrs) {
                continue;
            }
            let name = m.ident.to_string();
            let mut child_path = path.clone();
            child_path.push(name.clone());
            if let Some((_, content)) = &m.content {
                let inner = dirs.children.join(&name);
                let inline = Dirs {
                    children: inner.clone(),
                    path_attr: inner,
                };
                self.add(workspace, content, file, child_path, Some(index), &inline)?;
                continue;
            }
            let (child_file, child_dirs) = match path_attribute(&m.attrs) {
                Some(p) => {
                    // A file named by `#[path]` keeps its children beside it, as mod.rs does.
                    let f = dirs.path_attr.join(p);
                    let dir = f.parent().map(Path::to_owned).unwrap_or_default();
                    let d = Dirs {
                        children: dir.clone(),
                        path_attr: dir,
                    };
                    (f, d)
                }
                None => {
                    let flat = dirs.children.join(format!("{name}.rs"));
                    if workspace.join(&flat).is_file() {
                        let d = Dirs {
                            children: dirs.children.join(&name),
                            path_attr: dirs.children.clone(),
                        };
                        (flat, d)
                    } else {
                        let dir = dirs.children.join(&name);
                        let d = Dirs {
                            children: dir.clone(),
                            path_attr: dir.clone(),
                        };
                        (dir.join("mod.rs"), d)
                    }
                }
            };
            if workspace.join(&child_file).is_file() {
                self.load_file(workspace, &child_file, child_path, Some(index), &child_dirs)?;
            }
        }
        Ok(())
    }

    /// The module `segments` lead to from module `from` (`crate`, `super`, `self`, a child
    /// or an imported module first), as deep as they name modules; `None` when they start
    /// outside the crate (another crate, a local name).
    pub fn resolve(&self, from: usize, segments: &[String]) -> Option<usize> {
        self.resolve_depth(from, segments, 0)
    }

    fn resolve_depth(&self, from: usize, segments: &[String], depth: usize) -> Option<usize> {
        let (first, rest) = segments.split_first()?;
        if depth > 8 {
            return None;
        }
        let (mut at, mut rest) = match first.as_str() {
            "crate" => (0, rest),
            "self" => (from, rest),
            "super" => {
                let mut at = self.modules[from].parent?;
                let mut rest = rest;
                while let Some(("super", tail)) = rest.split_first().map(|(h, t)| (h.as_str(), t)) {
                    at = self.modules[at].parent?;
                    rest = tail;
                }
                (at, rest)
            }
            name => {
                if self.modules[from].children.contains_key(name) {
                    (from, segments)
                } else {
                    let imported = self.modules[from].names.imports.get(name)?;
                    let mut full = imported.clone();
                    full.extend(rest.iter().cloned());
                    return self.resolve_depth(from, &full, depth + 1);
                }
            }
        };
        while let Some((next, tail)) = rest.split_first() {
            match self.modules[at].children.get(next) {
                Some(&child) => {
                    at = child;
                    rest = tail;
                }
                None => break,
            }
        }
        Some(at)
    }
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(l) => match &l.lit {
                Lit::Str(s) => Some(s.value()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}
