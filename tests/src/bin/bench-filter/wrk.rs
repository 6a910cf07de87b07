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

/// The median: what each figure is reported as, over rounds ([`Spread`]'s).
pub fn median(values: Vec<f64>) -> f64 {
    Spread::of(values).median
}

/// A figure taken once a round: its median, and the middle half of the rounds (first to
/// third quartile). One run's paired figure swings by more than some of the differences
/// it is read for; the spread printed beside it says how far to trust it.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

impl Spread {
    pub fn of(mut values: Vec<f64>) -> Spread {
        values.sort_by(f64::total_cmp);
        let quartile = |q: usize| values[(values.len() - 1) * q / 4];
        Spread {
            median: values[values.len() / 2],
            low: quartile(1),
            high: quartile(3),
        }
    }
}

/// The median, then the middle half in parentheses, each with the format's precision and
/// sign: `{:+.1}` prints `+3.5 (+2.9 to +4.1)`. A reader that takes the first word (the
/// cost model's price lines) still finds the median.
impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let precision = f.precision().unwrap_or(2);
        let show = |v: f64| {
            if f.sign_plus() {
                format!("{v:+.precision$}")
            } else {
                format!("{v:.precision$}")
            }
        };
        write!(
            f,
            "{} ({} to {})",
            show(self.median),
            show(self.low),
            show(self.high)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn a_spread_prints_its_median_then_its_middle_half() {
        let s = Spread::of(vec![5.0, 1.0, 4.0, 2.0, 3.0, 8.0, 7.0, 6.0]);
        assert_eq!((s.median, s.low, s.high), (5.0, 2.0, 6.0));
        assert_eq!(format!("{s:+.1}"), "+5.0 (+2.0 to +6.0)");
        assert_eq!(format!("{s:.2}"), "5.00 (2.00 to 6.00)");
    }
}
