//! `make soak`: a long mixed load through Envoy and floodgate while Redis,
//! floodgate-server and the listener configuration change under it; prints figures and
//! checks, and exits 1 if any check fails (see `floodgate_integration::soak`).
//!
//! Environment: `SOAK_SECONDS` (default 600, at least 60), `SOAK_RATE` (requests per
//! second, default 200).

use floodgate_integration::soak::{driver, report, schedule::Schedule};
use std::process::ExitCode;
use std::time::Duration;

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a whole number, got {v:?}")),
        Err(_) => Ok(default),
    }
}

async fn soak() -> Result<bool, String> {
    let seconds = env_u64("SOAK_SECONDS", 600)?;
    let rate = env_u64("SOAK_RATE", 200)?;
    let schedule = Schedule::new(Duration::from_secs(seconds))?;
    println!(
        "soak: {seconds} s at {rate} requests/s; warm-up {} s; events {:?}",
        schedule.warm_up.as_secs(),
        schedule
            .events
            .iter()
            .map(|(t, e)| format!("{e:?}@{}s", t.as_secs()))
            .collect::<Vec<_>>()
    );
    let outcome = driver::run(&schedule, rate).await?;
    Ok(report::print(&outcome.figures, &outcome.checks))
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("soak: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(soak()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::FAILURE
        }
    }
}
