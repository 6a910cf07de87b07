//! `make costs`: every path's counts as a table, checked against the budget.
//!
//! - no argument: print the tables, then what is over or well under budget (exit 1 if
//!   any path is over);
//! - `--write-budget`: write the counts as the new budget (`make costs-budget`);
//! - `--fit FILE`: fit the µs model to a `make bench` output saved in FILE (with the
//!   host-call prices it printed, or the ones measured before) and print it with each
//!   configuration's residual;
//! - `--profile PATH [MODULE]`: where PATH's measured request executes its instructions,
//!   by function, on MODULE (a build of the path's module that keeps function names) or
//!   on the path's own module (stripped: functions by index).

use floodgate_costs::{budget, calibration, instrument, measure, paths, report};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let paths = paths::all();
    if args.first().map(String::as_str) == Some("--profile") {
        return profile(&paths, &args[1..]);
    }
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
            let prices = calibration::bench_prices(&output);
            let allocation = calibration::bench_allocation(&output);
            let Some(mut model) = calibration::fit(&pairs, prices, allocation) else {
                eprintln!(
                    "the bench output does not determine the model ({} rows)",
                    rows.len()
                );
                return ExitCode::FAILURE;
            };
            model.baseline = calibration::bench_baseline(&output).unwrap_or(f64::NAN);
            println!("{}", report::calibration(&model));
            println!("\n| path | measured µs | expected µs | residual |\n|---|---:|---:|---:|");
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

/// `--profile PATH [MODULE]`: the measured request's instructions by function, most first.
fn profile(paths: &[paths::Path], args: &[String]) -> ExitCode {
    let Some(path) = args
        .first()
        .and_then(|name| paths.iter().find(|p| p.name == name))
    else {
        eprintln!(
            "usage: floodgate-costs --profile PATH [MODULE]; paths: {:?}",
            paths.iter().map(|p| p.name).collect::<Vec<_>>()
        );
        return ExitCode::FAILURE;
    };
    let wasm = match args.get(1) {
        Some(file) => std::fs::read(file).map_err(|e| format!("{file}: {e}")),
        None => measure::module(path),
    };
    let run = wasm.and_then(|wasm| {
        Ok((
            measure::profile(path, &wasm)?,
            instrument::function_names(&wasm),
        ))
    });
    let ((measured, functions), names) = match run {
        Ok(run) => run,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let total = measured.cost.instructions.max(1);
    let mut ranked: Vec<(u32, [u64; 2])> = functions.into_iter().collect();
    ranked.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then(a.0.cmp(&b.0)));
    println!(
        "{}: {} instructions, {} bulk-memory operations\n\n\
         | function | instructions | share | copies |\n|---|---:|---:|---:|",
        path.name, measured.cost.instructions, measured.cost.bulk_ops
    );
    for (index, [n, copies]) in ranked.iter().take(40) {
        let name = names
            .get(index)
            .map_or_else(|| format!("#{index}"), Clone::clone);
        println!(
            "| {name} | {n} | {:.1} % | {copies} |",
            *n as f64 * 100.0 / total as f64
        );
    }
    ExitCode::SUCCESS
}
