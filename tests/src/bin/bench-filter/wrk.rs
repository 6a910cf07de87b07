//! Running wrk and reading what it measured.

use std::process::Command;

/// What one wrk run measured.
#[derive(Default, Clone, Copy)]
pub struct Sample {
    pub requests: f64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub cpu_us: f64,
    /// p50 and p99 with one connection: each request alone, no queueing behind others.
    pub alone_p50_ms: f64,
    pub alone_p99_ms: f64,
    /// Responses other than 2xx or 3xx (wrk's `Non-2xx or 3xx responses`).
    pub non_success: f64,
}

/// The unit of `/proc` CPU times (100 on Linux unless told otherwise).
pub fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// One wrk run against `url`, pinned to CPU 1 beside the upstream; its report.
pub fn wrk(url: &str, seconds: u64, connections: u64) -> String {
    let out = Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1", "--latency"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .args(["-H", "x-tenant-id: bench", url])
        .output()
        .expect("run wrk (apt-get install wrk)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A wrk latency like `1.23ms`, `850.00us` or `1.01s`, in milliseconds.
fn millis(text: &str) -> f64 {
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().unwrap_or(f64::NAN) * factor
}

/// The figures of a wrk `--latency` report (CPU is measured apart).
pub fn parse_wrk(text: &str) -> Sample {
    let mut s = Sample::default();
    for line in text.lines().map(str::trim) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["50%", v] => s.p50_ms = millis(v),
            ["99%", v] => s.p99_ms = millis(v),
            ["Requests/sec:", v] => s.rps = v.parse().unwrap_or(0.0),
            [n, "requests", "in", ..] => s.requests = n.parse().unwrap_or(0.0),
            ["Non-2xx", "or", "3xx", "responses:", n] => s.non_success = n.parse().unwrap_or(0.0),
            _ => {}
        }
    }
    s
}

/// The median: what each figure is reported as, over rounds.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
