//! Matching a request descriptor against a domain's tree, as envoyproxy/ratelimit does.
//!
//! The descriptor's entries walk down the tree one level each. At each level the node for
//! the entry's key is chosen in this order: the exact value; else the first wildcard value
//! (`*` anywhere) that matches, in configuration order; else the node with the key and no
//! value. A limit applies only when the walk consumes *every* entry and ends on a node with
//! a `rate_limit`; a descriptor that stops short, goes deeper than the tree, or misses at
//! any level has no limit.
//!
//! A wildcard node with `share_threshold` counts every matching value as the wildcard
//! itself, so they share one counter: [`Found::counted`] puts the pattern in place of the
//! value for those entries.

use super::{Domain, Level, Node, Rule, MAX_DEPTH};

/// The rule a request descriptor matched, and how to name its counter.
#[derive(Debug, Clone, Copy)]
pub struct Found<'c> {
    /// The rule at the end of the walk.
    pub rule: &'c Rule,
    /// Per entry, in request order: the `share_threshold` wildcard its value is counted as.
    /// A match consumes one entry per level, so there are at most [`MAX_DEPTH`].
    shared: [Option<&'c str>; MAX_DEPTH],
}

impl<'c> Found<'c> {
    /// The entries of this match (the same `entries` that were matched) as its counter
    /// counts them: their own values, except where a `share_threshold` wildcard matched,
    /// which stands as written for every value it matches.
    pub fn counted<'a, I>(&self, entries: I) -> impl Iterator<Item = (&'a str, &'a str)>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        'c: 'a,
    {
        let shared = self.shared;
        entries
            .into_iter()
            .enumerate()
            .map(move |(i, (key, value))| (key, shared.get(i).copied().flatten().unwrap_or(value)))
    }
}

impl Domain {
    /// The rule for a request descriptor given as `(key, value)` entries, if any.
    pub fn find<'a, I>(&self, entries: I) -> Option<&Rule>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        self.lookup(entries).map(|f| f.rule)
    }

    /// The match for a request descriptor, with what its counter key needs.
    pub fn lookup<'a, I>(&self, entries: I) -> Option<Found<'_>>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut level = &self.root;
        let mut node: Option<&Node> = None;
        let mut shared = [None; MAX_DEPTH];
        for (i, (key, value)) in entries.into_iter().enumerate() {
            if let Some(n) = node {
                level = &n.children;
            }
            let next = step(level, key, value)?;
            if let Some(pattern) = next.shared_as.as_deref() {
                // A level exists for each entry consumed so far, so `i` < MAX_DEPTH.
                *shared.get_mut(i)? = Some(pattern);
            }
            node = Some(next);
        }
        let rule = node?.rule.as_ref()?;
        Some(Found { rule, shared })
    }
}

/// The node of `level` for one entry; a `share_threshold` node's `shared_as` is only set
/// on wildcard nodes, so an exact or key-only match never shares.
fn step<'l>(level: &'l Level, key: &str, value: &str) -> Option<&'l Node> {
    let nodes = level.by_key.get(key)?;
    nodes
        .exact
        .get(value)
        .or_else(|| {
            nodes
                .wildcards
                .iter()
                .find(|(p, _)| p.matches(value))
                .map(|(_, n)| n)
        })
        .or(nodes.any.as_deref())
}
