//! What a `make bench` run measured and when: printed above its tables, so that a table
//! pasted into the documentation keeps its date, the commit its modules came from and the
//! machine's speed that day (the no-filter baseline) beside it.

use std::process::Command;

/// The first line of a command's standard output, if it ran and printed one.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (out.status.success() && !line.is_empty()).then(|| line.to_string())
}

/// "2026-12-04 03:40 UTC, commit abc1234" (with "plus uncommitted changes" when the tree
/// the modules were built from differs from that commit), the load average when the run
/// ended, and the no-filter baseline `base_us`.
pub fn line(base_us: f64) -> String {
    let date = first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "?".into());
    let commit = first_line("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "?".into());
    let dirty = first_line("git", &["status", "--porcelain", "--untracked-files=no"])
        .map_or("", |_| " plus uncommitted changes");
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!(
        "make bench, {date}, modules built from commit {commit}{dirty}; load average {load} at \
         the end; baseline: a request with no filter cost its worker {base_us:.1} µs"
    )
}
