//! The allow-list: known debt the check tolerates, one [`crate::Finding::key`] per line.
//! `#` starts a comment; blank lines are ignored.

use crate::Finding;
use std::collections::BTreeSet;

/// The entries of an allow-list's text.
pub fn parse(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// What the check says about `findings` under `allowed`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Findings the list does not allow: each fails the check.
    pub new: Vec<String>,
    /// Entries that match no finding any more: each fails the check too, so that the list
    /// only shrinks (delete the line).
    pub stale: Vec<String>,
}

impl Verdict {
    /// Whether nothing fails.
    pub fn passes(&self) -> bool {
        self.new.is_empty() && self.stale.is_empty()
    }
}

/// Compares `findings` with the entries `allowed`.
pub fn judge(findings: &[Finding], allowed: &BTreeSet<String>) -> Verdict {
    let keys: BTreeSet<String> = findings.iter().map(Finding::key).collect();
    Verdict {
        new: findings
            .iter()
            .filter(|f| !allowed.contains(&f.key()))
            .map(ToString::to_string)
            .collect(),
        stale: allowed.difference(&keys).cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn new_findings_and_stale_entries_both_fail() {
        let allowed = parse("# debt\nfile src/a.rs   # a comment\n\nfile  src/gone.rs\n");
        let findings = [
            Finding::LongFile {
                path: PathBuf::from("src/a.rs"),
                lines: 401,
            },
            Finding::LongFile {
                path: PathBuf::from("src/b.rs"),
                lines: 500,
            },
        ];
        let v = judge(&findings, &allowed);
        assert_eq!(v.new.len(), 1);
        assert!(
            v.new[0].starts_with("src/b.rs has 500 lines"),
            "{:?}",
            v.new
        );
        assert_eq!(v.stale, ["file src/gone.rs"]);
        assert!(!v.passes());
    }
}
