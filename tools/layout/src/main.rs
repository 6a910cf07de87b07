//! `cargo run -p floodgate-layout [ROOT]`: every layout finding in the workspace, each
//! marked `allowed` when `allow.txt` lists it, then the allow-list entries that match
//! nothing. Exits 1 when the check (`tests/workspace.rs`) would fail.

use floodgate_layout::{allow, check};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = std::env::args()
        .nth(1)
        .map_or_else(floodgate_layout::workspace_root, PathBuf::from);
    let findings = match check(&root) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("floodgate-layout: {e}");
            return ExitCode::from(2);
        }
    };
    let allowed = allow::parse(&floodgate_layout::allow_list());
    for f in &findings {
        let mark = if allowed.contains(&f.key()) {
            "allowed"
        } else {
            "NEW"
        };
        println!("[{mark}] {f}");
    }
    let verdict = allow::judge(&findings, &allowed);
    for s in &verdict.stale {
        println!("[STALE] allow.txt: {s}");
    }
    if verdict.passes() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
