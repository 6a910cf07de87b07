//! Every path within its committed budget (`bench/costs/budget.toml`): counted, not timed,
//! so it gives the same answer on any machine for the same modules.

use floodgate_costs::{budget, measure, paths, report};

#[test]
fn every_path_costs_at_most_its_budget() {
    let paths = paths::all();
    let measured: Vec<_> = paths
        .iter()
        .map(|p| measure::measure(p).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let text = std::fs::read_to_string(budget::file()).expect("bench/costs/budget.toml");
    let verdict = budget::check(
        &measured,
        &budget::parse(&text).expect("a valid budget file"),
    );
    for line in &verdict.under {
        eprintln!("note: under budget, lower it (`make costs-budget`): {line}");
    }
    assert!(
        verdict.over.is_empty(),
        "paths over their budget (if the cost is meant, raise the budget in the same \
         commit with `make costs-budget` and say why in its message):\n{}\n\n{}",
        verdict.over.join("\n"),
        report::table(&paths, &measured)
    );
}
