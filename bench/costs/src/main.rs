//! `make costs`: every path's counts as a table, checked against the budget.
//!
//! - no argument: print the tables, then what is over or well under budget (exit 1 if
//!   any path is over);
//! - `--write-budget`: write the counts as the new budget (`make costs-budget`);
//! - `--fit FILE`: fit the µs model to a `make bench` output saved in FILE and print it
//!   with each configuration's residual.

use floodgate_costs::{budget, calibration, measure, paths, report};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let paths = paths::all();
    let measured = match paths
        .iter()
        .map(measure::measure)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => {
            println!("{}", report::table(&paths, &measured));
            let text = match std::fs::read_to_string(budget::file()) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("{}: {e}", budget::file().display());
                    return ExitCode::FAILURE;
                }
            };
            let verdict = match budget::parse(&text) {
                Ok(b) => budget::check(&measured, &b),
                Err(e) => {
                    eprintln!("{}: {e}", budget::file().display());
                    return ExitCode::FAILURE;
                }
            };
            for line in &verdict.under {
                println!("under budget, lower it: {line}");
            }
            for line in &verdict.over {
                println!("OVER BUDGET: {line}");
            }
            if verdict.over.is_empty() {
                println!(
                    "every path within its budget ({})",
                    budget::file().display()
                );
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        ["--write-budget"] => match std::fs::write(budget::file(), budget::render(&measured)) {
            Ok(()) => {
                println!("wrote {}", budget::file().display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", budget::file().display());
                ExitCode::FAILURE
            }
        },
        ["--fit", file] => {
            let output = match std::fs::read_to_string(file) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("{file}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let figures = calibration::bench_figures(&output);
            let rows: Vec<_> = measured
                .iter()
                .filter_map(|m| figures.get(m.name).map(|&us| (m.name, m.cost.clone(), us)))
                .collect();
            let pairs: Vec<_> = rows.iter().map(|(_, c, us)| (c.clone(), *us)).collect();
            let Some(model) = calibration::fit(&pairs) else {
                eprintln!(
                    "the bench output does not determine the model ({} rows)",
                    rows.len()
                );
                return ExitCode::FAILURE;
            };
            println!("{model:?}\n\n| path | measured µs | expected µs | residual |\n|---|---:|---:|---:|");
            for (name, cost, us) in &rows {
                let expected = model.expected_us(cost);
                println!(
                    "| {name} | {us:.2} | {expected:.2} | {:+.2} |",
                    us - expected
                );
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: floodgate-costs [--write-budget | --fit BENCH_OUTPUT]");
            ExitCode::FAILURE
        }
    }
}
