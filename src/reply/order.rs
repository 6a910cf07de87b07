//! Standings in configuration order: they arrive grouped (local rules, then global
//! ones), and every rule-by-rule list a reply shows (the details, the draft-10 items, the
//! problem's `violated-policies`) is in the order the rules are configured.

use super::Standing;
use smallvec::SmallVec;

/// Whether every standing rejects and they are in configuration order: what
/// [`insert_in_rule_order`] would make of them is them, as they are.
pub(super) fn all_reject_in_rule_order(standings: &[Standing]) -> bool {
    let mut last = 0;
    standings.iter().all(|s| {
        let in_order = s.rejects() && s.rule >= last;
        last = s.rule;
        in_order
    })
}

/// Puts `s` into `sorted` after every standing of a rule not after its own: configuration
/// order, stable. An insertion sort: a request has a few rules, and the standard sorts
/// would add kilobytes of code to the module for it.
pub(super) fn insert_in_rule_order(sorted: &mut SmallVec<[Standing; 2]>, s: Standing) {
    let at = sorted
        .iter()
        .rposition(|t| t.rule <= s.rule)
        .map_or(0, |i| i + 1);
    // Mostly at the end already (one rule, or each group in order): no shifting then.
    if at == sorted.len() {
        sorted.push(s);
    } else {
        sorted.insert(at, s);
    }
}

/// `standings` in configuration order (they arrive grouped: local rules, then global
/// ones). An insertion sort, stable: a request has a few rules, and the standard sorts
/// would add kilobytes of code to the module for it.
pub(super) fn in_rule_order<'a>(
    standings: impl Iterator<Item = &'a Standing>,
) -> SmallVec<[&'a Standing; 4]> {
    let mut sorted: SmallVec<[&Standing; 4]> = SmallVec::new();
    for s in standings {
        let at = sorted
            .iter()
            .rposition(|t| t.rule <= s.rule)
            .map_or(0, |i| i + 1);
        sorted.insert(at, s);
    }
    sorted
}
