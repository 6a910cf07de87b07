//! The committed budget: each path's counts as a ceiling (`bench/costs/budget.toml`).
//!
//! A path over its budget in any figure fails `make test`, with the difference printed.
//! A change that costs more raises the budget in the same commit and says why in its
//! message (`make costs-budget` writes the file from a run). A path well under its budget
//! gets a note to lower it, so that the ceiling follows the code down.

use crate::measure::Measured;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Each path's figures, by name ([`crate::cost::Cost::figures`]).
pub type Budget = BTreeMap<String, BTreeMap<String, u64>>;

/// Instructions or bulk bytes this far under budget (in %) earn a note to lower it; any
/// other figure earns one as soon as it is lower.
pub const LOWER_MARGIN_PERCENT: u64 = 2;

/// The budget file.
pub fn file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("budget.toml")
}

/// Reads a budget file's text.
pub fn parse(text: &str) -> Result<Budget, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        paths: Budget,
    }
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    Ok(file.paths)
}

/// The budget file's text for these measurements (their counts as the ceilings).
pub fn render(measured: &[Measured]) -> String {
    let mut out = String::from(
        "# What each request path may cost, counted by `make costs` (bench/costs: the real\n\
         # modules under a deterministic proxy-wasm host). `make test` fails when a path\n\
         # costs more than this. A change that costs more raises these figures in the same\n\
         # commit (`make costs-budget` rewrites this file) and says why in its message.\n\
         # instructions: wasm instructions executed; bulk_bytes: bytes moved by memory.copy\n\
         # and memory.fill; bulk_ops: how many of those (each a call into C in V8);\n\
         # vm_entries: callbacks and allocations Envoy enters the VM for;\n\
         # bytes_in / bytes_out: bytes the host copied into / read out of the module.\n",
    );
    for m in measured {
        out.push_str(&format!("\n[paths.\"{}\"]\n", m.name));
        for (figure, value) in m.cost.figures() {
            if figure.contains('.') {
                out.push_str(&format!("\"{figure}\" = {value}\n"));
            } else {
                out.push_str(&format!("{figure} = {value}\n"));
            }
        }
    }
    out
}

/// What comparing measurements with a budget found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Figures over budget, one line each: these fail.
    pub over: Vec<String>,
    /// Figures well under budget, one line each: lower the budget.
    pub under: Vec<String>,
}

/// Compares every measured figure with its ceiling (a figure the budget lacks has a
/// ceiling of 0; a path the budget lacks fails whole).
pub fn check(measured: &[Measured], budget: &Budget) -> Verdict {
    let mut verdict = Verdict::default();
    for m in measured {
        let Some(ceilings) = budget.get(m.name) else {
            verdict.over.push(format!(
                "{}: no budget (run `make costs-budget` and commit it)",
                m.name
            ));
            continue;
        };
        let figures: BTreeMap<String, u64> = m.cost.figures().into_iter().collect();
        let names: std::collections::BTreeSet<&String> =
            figures.keys().chain(ceilings.keys()).collect();
        for figure in names {
            let now = figures.get(figure).copied().unwrap_or(0);
            let ceiling = ceilings.get(figure).copied().unwrap_or(0);
            let line = || {
                let percent = if ceiling == 0 {
                    String::new()
                } else {
                    format!(
                        " ({:+.1} %)",
                        (now as f64 - ceiling as f64) * 100.0 / ceiling as f64
                    )
                };
                format!(
                    "{}: {figure} {ceiling} -> {now}, {:+}{percent}",
                    m.name,
                    now as i128 - ceiling as i128
                )
            };
            let margin = if figure == "instructions" || figure == "bulk_bytes" {
                ceiling * LOWER_MARGIN_PERCENT / 100
            } else {
                0
            };
            if now > ceiling {
                verdict.over.push(line());
            } else if now + margin < ceiling {
                verdict.under.push(line());
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Cost;
    use crate::envoy::Outcome;

    fn measured(instructions: u64, calls: &[&str]) -> Measured {
        let mut cost = Cost {
            instructions,
            ..Cost::default()
        };
        for c in calls {
            cost.call(c);
        }
        Measured {
            name: "p",
            cost,
            outcome: Outcome::Forwarded,
            calls: 0,
        }
    }

    #[test]
    fn the_rendered_budget_reads_back_and_passes_itself() {
        let m = [measured(1000, &["proxy_get_shared_data"])];
        let budget = parse(&render(&m)).expect("parses");
        assert_eq!(budget["p"]["call.proxy_get_shared_data"], 1);
        let verdict = check(&m, &budget);
        assert!(
            verdict.over.is_empty() && verdict.under.is_empty(),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_new_host_call_or_more_instructions_fail_with_the_difference() {
        let budget = parse(&render(&[measured(1000, &[])])).expect("parses");
        let verdict = check(&[measured(1001, &["proxy_get_header_map_pairs"])], &budget);
        assert_eq!(
            verdict.over,
            [
                "p: call.proxy_get_header_map_pairs 0 -> 1, +1",
                "p: host_calls 0 -> 1, +1",
                "p: instructions 1000 -> 1001, +1 (+0.1 %)",
            ]
        );
    }

    #[test]
    fn a_cheaper_path_is_told_to_lower_its_budget_past_the_margin() {
        let budget = parse(&render(&[measured(1000, &["proxy_log"])])).expect("parses");
        let verdict = check(&[measured(990, &[])], &budget);
        assert!(verdict.over.is_empty());
        assert_eq!(
            verdict.under,
            [
                "p: call.proxy_log 1 -> 0, -1 (-100.0 %)",
                "p: host_calls 1 -> 0, -1 (-100.0 %)"
            ],
            "1 % fewer instructions is within the margin"
        );
        assert_eq!(
            check(&[measured(970, &["proxy_log"])], &budget).under.len(),
            1
        );
    }

    #[test]
    fn a_path_without_budget_fails() {
        let verdict = check(&[measured(1, &[])], &Budget::new());
        assert_eq!(verdict.over.len(), 1);
    }
}
