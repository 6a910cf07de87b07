//! Import circles between sibling modules.
//!
//! A reference from module `x` to module `y` (neither inside the other) is an arrow, in
//! their lowest common ancestor, from its child holding `x` to its child holding `y`. A
//! circle is a set of siblings each reachable from the others along those arrows (a
//! strongly connected component of two or more, found with Tarjan's algorithm).

use crate::tree::Crate;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// Sibling modules that import each other in a circle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// The crate's root file.
    pub root_file: PathBuf,
    /// The module whose children they are, `crate::a`.
    pub parent: String,
    /// The children, sorted.
    pub members: Vec<String>,
    /// One reference per arrow of the circle: `file: path` that makes it.
    pub evidence: Vec<String>,
}

impl Circle {
    /// The `allow.txt` line: `circle ROOT MODULE A B…`.
    pub fn key(&self) -> String {
        format!(
            "circle {} {} {}",
            self.root_file.display(),
            self.parent,
            self.members.join(" ")
        )
    }
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the children {} of {} import each other in a circle:",
            self.root_file.display(),
            self.members.join(" ↔ "),
            self.parent
        )?;
        for e in &self.evidence {
            write!(f, "\n    {e}")?;
        }
        Ok(())
    }
}

/// Arrows between the children of one module: (from, to) → the first reference seen.
type Arrows = BTreeMap<(String, String), String>;

/// Every circle in `krate`.
pub fn find(krate: &Crate) -> Vec<Circle> {
    let mut graphs: BTreeMap<usize, Arrows> = BTreeMap::new();
    for (from, module) in krate.modules.iter().enumerate() {
        for named in &module.names.named {
            let Some(to) = krate.resolve(from, &named.segments) else {
                continue;
            };
            let Some((parent, a, b)) = arrow(krate, from, to) else {
                continue;
            };
            let why = format!("{}: {}", module.file.display(), named.text());
            graphs
                .entry(parent)
                .or_default()
                .entry((a, b))
                .or_insert(why);
        }
    }
    let mut circles = Vec::new();
    for (parent, arrows) in graphs {
        for members in strongly_connected(&arrows) {
            let set: BTreeSet<&String> = members.iter().collect();
            let evidence = arrows
                .iter()
                .filter(|((a, b), _)| set.contains(a) && set.contains(b))
                .map(|(_, why)| why.clone())
                .collect();
            circles.push(Circle {
                root_file: krate.root_file.clone(),
                parent: krate.modules[parent].display(),
                members,
                evidence,
            });
        }
    }
    circles
}

/// The arrow a reference from `from` to `to` makes: their lowest common ancestor and its
/// two children leading to them, or `None` when one is inside the other.
fn arrow(krate: &Crate, from: usize, to: usize) -> Option<(usize, String, String)> {
    let a = &krate.modules[from].path;
    let b = &krate.modules[to].path;
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if common == a.len() || common == b.len() {
        return None;
    }
    let mut parent = 0;
    for name in &a[..common] {
        parent = *krate.modules[parent].children.get(name)?;
    }
    Some((parent, a[common].clone(), b[common].clone()))
}

/// The strongly connected components of two or more nodes, each sorted.
fn strongly_connected(arrows: &Arrows) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&String> = BTreeSet::new();
    for (a, b) in arrows.keys() {
        nodes.insert(a);
        nodes.insert(b);
    }
    let nodes: Vec<&String> = nodes.into_iter().collect();
    let index_of = |n: &String| nodes.iter().position(|m| *m == n).unwrap_or(0);
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (a, b) in arrows.keys() {
        next[index_of(a)].push(index_of(b));
    }
    let mut t = Tarjan {
        next: &next,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        counter: 0,
        found: Vec::new(),
    };
    for v in 0..nodes.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .found
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|&i| nodes[i].clone()).collect();
            names.sort();
            names
        })
        .collect();
    out.sort();
    out
}

struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    found: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for &w in &self.next[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.found.push(component);
        }
    }
}
