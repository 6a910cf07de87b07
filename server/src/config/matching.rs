//! Matching a request descriptor against a domain's tree, as envoyproxy/ratelimit does.
//!
//! The descriptor's entries walk down the tree one level each. At each level the most
//! specific node for the entry wins: an exact value, else the longest matching `prefix*`
//! wildcard, else a node with the key and no value. A limit applies only when the walk
//! consumes *every* entry and ends on a node with a `rate_limit`; a descriptor that stops
//! short, goes deeper than the tree, or misses at any level has no limit.

use super::{Domain, Level, Node, Rule};

impl Domain {
    /// The rule for a request descriptor given as `(key, value)` entries, if any.
    pub fn find<'a, I>(&self, entries: I) -> Option<&Rule>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut level = &self.root;
        let mut node: Option<&Node> = None;
        for (key, value) in entries {
            if let Some(n) = node {
                level = &n.children;
            }
            node = Some(step(level, key, value)?);
        }
        node?.rule.as_ref()
    }
}

fn step<'l>(level: &'l Level, key: &str, value: &str) -> Option<&'l Node> {
    let nodes = level.by_key.get(key)?;
    nodes
        .exact
        .get(value)
        .or_else(|| {
            nodes
                .prefix
                .iter()
                .find(|(p, _)| value.starts_with(p.as_str()))
                .map(|(_, n)| n)
        })
        .or(nodes.any.as_deref())
}
