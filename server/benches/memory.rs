//! `cargo bench -p floodgate-server --bench memory`: what a full memory store costs in
//! resident memory, per cell, and what the sweep gives back (not a test; judges nothing).
//!
//! Each row fills a fresh store to its capacity with distinct counters (one decision per
//! counter, as distinct client values would), reads this process's RSS (Linux,
//! `/proc/self/statm`), then lets every counter go idle, sweeps, and reads it again. The
//! per-cell figure of `docs/server/stores.md` comes from here.

use floodgate_server::algorithm::{Algorithm, Limit, Unit};
use floodgate_server::clock::ManualClock;
use floodgate_server::store::memory::MemoryStore;
use floodgate_server::store::{Check, CounterKey};
use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;

const S: u64 = 1_000_000_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn row(name: &str, algorithm: Algorithm, counters: usize, value_len: usize) {
    let rpu = NonZeroU32::new(1_000).unwrap_or(NonZeroU32::MIN);
    let limit = Limit {
        requests_per_unit: rpu,
        unit: Unit::Second,
        unit_multiplier: NonZeroU16::MIN,
        algorithm,
    };
    let cells_each = if algorithm == Algorithm::SlidingWindowLog {
        2
    } else {
        1
    };
    let clock = Arc::new(ManualClock::new(1_700_000_000 * S));
    let store = MemoryStore::with_clock(counters * cells_each, clock.clone());
    let padding = "v".repeat(value_len);
    let before = rss_bytes();
    for i in 0..counters {
        let value = format!("{i}{padding}");
        let check = Check {
            key: CounterKey::new("bench", [("tenant", value.as_str())]),
            limit,
            hits: 1,
            shadow: false,
            quota: None,
            quota_mode: false,
            blocked: false,
            hold: None,
        };
        if store.check_now(&[check]).is_err() {
            println!("{name}: full after {i} counters");
            break;
        }
    }
    let full = rss_bytes();
    let cells = store.cells();
    clock.advance(10 * S);
    store.sweep();
    let swept = rss_bytes();
    println!(
        "{name:<28} {cells:>9} cells  {:>7.1} MB  {:>5.0} B/cell  after sweep {:>7.1} MB ({} cells)",
        full.saturating_sub(before) as f64 / 1e6,
        full.saturating_sub(before) as f64 / cells.max(1) as f64,
        swept.saturating_sub(before) as f64 / 1e6,
        store.cells()
    );
}

/// The rows; each runs in a fresh process (this binary again, with the row's name), so
/// that memory freed by one row does not flatter the next.
const ROWS: [&str; 4] = [
    "fixed_window",
    "token_bucket",
    "sliding_window_log",
    "fixed_window_50k",
];

fn main() {
    let burst = NonZeroU32::new(1_000).unwrap_or(NonZeroU32::MIN);
    let row_arg = std::env::args()
        .skip(1)
        .find(|a| ROWS.contains(&a.as_str()));
    match row_arg.as_deref() {
        Some("fixed_window") => row(
            "fixed_window, 8 B values",
            Algorithm::FixedWindow,
            1_000_000,
            0,
        ),
        Some("token_bucket") => row(
            "token_bucket, 8 B values",
            Algorithm::TokenBucket { burst },
            1_000_000,
            0,
        ),
        Some("sliding_window_log") => row(
            "sliding_window_log",
            Algorithm::SlidingWindowLog,
            500_000,
            0,
        ),
        Some(_) => row(
            "fixed_window, 50 KB values",
            Algorithm::FixedWindow,
            200_000,
            50 * 1024,
        ),
        None => {
            let Ok(me) = std::env::current_exe() else {
                return;
            };
            for r in ROWS {
                let _ = std::process::Command::new(&me).arg(r).status();
            }
        }
    }
}
