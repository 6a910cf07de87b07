//! Memory samples, the figures and the summary table.

use super::counters::rss_kib;
use super::load::Seen;
use super::oracle::{Check, Class, Generation, Phase};

/// RSS may grow by this fraction of its start value, or by the process's slack below,
/// whichever is larger (the fraction only matters for processes much bigger than here).
const RSS_GROWTH_PERCENT: u64 = 5;
/// Envoy's slack. Allocators keep freed pages, V8 grows its heap in steps and the
/// listener update builds a second filter chain: one-off growth, measured at 0 to
/// +0.6 MiB over runs of 60 to 600 s. A leak of 1 KiB per tenant (about 8 000 local
/// ones in 600 s) or 100 bytes per request (about 110 000) outgrows it.
const ENVOY_SLACK_KIB: u64 = 8 * 1024;
/// floodgate-server's slack: it is a 15 MiB process, measured at -0.1 to +0.3 MiB; a
/// leak of 1 KiB per global tenant (about 8 000) or 100 bytes per call (about 45 000)
/// outgrows it.
const SERVER_SLACK_KIB: u64 = 4 * 1024;

/// Resident memory of Envoy and floodgate-server over the run.
pub struct Rss {
    envoy_start: Option<u64>,
    server_start: Option<u64>,
    server_before_restart: Option<u64>,
    envoy_end: Option<u64>,
    server_end: Option<u64>,
}

impl Rss {
    /// Samples both processes after the warm-up.
    pub fn start(envoy: u32, server: u32) -> Rss {
        Rss {
            envoy_start: rss_kib(envoy),
            server_start: rss_kib(server),
            server_before_restart: None,
            envoy_end: None,
            server_end: None,
        }
    }

    /// Samples the first floodgate-server just before it is killed.
    pub fn server_before_restart(&mut self, server: u32) {
        self.server_before_restart = rss_kib(server);
    }

    /// Samples both at the end and checks that neither grew past the tolerance: Envoy from
    /// start to end; floodgate-server from start to its restart and from start to the
    /// end (the second process, which must not outgrow the first one's start either).
    pub fn end(&mut self, envoy: u32, server: u32) -> Vec<Check> {
        self.envoy_end = rss_kib(envoy);
        self.server_end = rss_kib(server);
        let mut checks = vec![flat(
            "Envoy RSS flat",
            self.envoy_start,
            self.envoy_end,
            ENVOY_SLACK_KIB,
        )];
        if self.server_before_restart.is_some() {
            checks.push(flat(
                "floodgate-server RSS flat until its restart",
                self.server_start,
                self.server_before_restart,
                SERVER_SLACK_KIB,
            ));
        }
        checks.push(flat(
            "floodgate-server RSS flat to the end",
            self.server_start,
            self.server_end,
            SERVER_SLACK_KIB,
        ));
        checks
    }

    /// The samples, for the figures.
    pub fn figures(&self) -> Vec<(String, String)> {
        let show = |v: Option<u64>| v.map_or("-".to_string(), mib);
        vec![
            (
                "Envoy RSS start → end".to_string(),
                format!("{} → {}", show(self.envoy_start), show(self.envoy_end)),
            ),
            (
                "floodgate-server RSS start → before restart → end".to_string(),
                format!(
                    "{} → {} → {}",
                    show(self.server_start),
                    show(self.server_before_restart),
                    show(self.server_end)
                ),
            ),
        ]
    }
}

fn flat(name: &str, start: Option<u64>, end: Option<u64>, slack_kib: u64) -> Check {
    let (Some(start), Some(end)) = (start, end) else {
        return Check::new(
            name,
            false,
            format!("no sample: start {start:?}, end {end:?}"),
        );
    };
    let allowed = (start * RSS_GROWTH_PERCENT / 100).max(slack_kib);
    Check::new(
        name,
        end <= start + allowed,
        format!(
            "{} → {} ({:+.1} MiB, tolerance +{})",
            mib(start),
            mib(end),
            (end as f64 - start as f64) / 1024.0,
            mib(allowed)
        ),
    )
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// What the load did, for the figures.
pub fn load_figures(
    seen: &Seen,
    sent: u64,
    failure: u64,
    generations: &[Generation],
) -> Vec<(String, String)> {
    let tenants = |class| {
        seen.tenants
            .values()
            .filter(|t| t.class == Some(class))
            .count()
    };
    let rejected: u64 = seen.tenants.values().map(|t| t.rejected).sum();
    let outages = generations
        .iter()
        .filter(|g| g.phase != Phase::Calm)
        .count();
    vec![
        (
            "requests limited + open (open: 200s)".to_string(),
            format!("{sent} + {}", seen.open_admitted),
        ),
        ("rejected (429)".to_string(), rejected.to_string()),
        (
            "tenants local / global".to_string(),
            format!("{} / {}", tenants(Class::Local), tenants(Class::Global)),
        ),
        (
            "generations (outages)".to_string(),
            format!("{} ({outages})", generations.len()),
        ),
        ("failure-mode admissions".to_string(), failure.to_string()),
    ]
}

/// Prints the figures and the checks as two aligned tables; returns whether all passed.
pub fn print(figures: &[(String, String)], checks: &[Check]) -> bool {
    let width = figures.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("\nsoak figures");
    for (name, value) in figures {
        println!("  {name:<width$}  {value}");
    }
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    println!("\nsoak checks");
    for c in checks {
        let verdict = if c.passed { "PASS" } else { "FAIL" };
        println!("  {verdict}  {:<width$}  {}", c.name, c.detail);
    }
    let passed = checks.iter().all(|c| c.passed);
    let failed = checks.iter().filter(|c| !c.passed).count();
    if passed {
        println!("\nsoak: all {} checks passed", checks.len());
    } else {
        println!("\nsoak: {failed} of {} checks FAILED", checks.len());
    }
    passed
}
