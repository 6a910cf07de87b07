//! The soak's judge: what the client saw, what the upstream counted and what Envoy and
//! floodgate-server counted, checked against what must have happened. Pure: plain data
//! in, a list of [`Check`]s out (the reasoning is in the [module guide](super)).

use std::collections::HashMap;

/// Which mode limits a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `/local/`: a local rule, never refilled (exactly its capacity per tenant).
    Local,
    /// `/global/`: a global rule, decided by floodgate-server on Redis.
    Global,
}

/// What was broken while a generation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing: every decision must be exact and no failure mode may be taken.
    Calm,
    /// Redis was killed at its start (its counters lost) and came back before its end.
    RedisDown,
    /// floodgate-server was killed at its start and came back before its end.
    ServerDown,
}

/// Envoy's counters, as deltas over one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnvoyCounts {
    /// `floodgate_allowed` (failure-mode admissions included).
    pub allowed: u64,
    /// `floodgate_denied`.
    pub denied: u64,
    /// `floodgate_failure_mode_allowed`.
    pub failure_allowed: u64,
    /// `floodgate_failure_mode_denied` (the soak runs `failure_mode: allow`: always 0).
    pub failure_denied: u64,
    /// Every `floodgate_rls_error_*`, summed: each failure counted under one cause.
    pub rls_errors: u64,
    /// `floodgate_rls_error_unavailable` alone.
    pub rls_unavailable: u64,
    /// `floodgate_bucket_evictions`.
    pub evictions: u64,
}

/// floodgate-server's counters, as deltas over one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// `floodgate_errors_total{kind="store_unavailable"}`.
    pub store_unavailable: u64,
    /// `floodgate_errors_total{kind="store_overloaded"}`.
    pub store_overloaded: u64,
}

/// One stretch of the soak between two fences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// Its number, part of every tenant id used in it.
    pub id: u32,
    /// What was broken during it.
    pub phase: Phase,
    /// The local rule's capacity in the plugin configuration it ran with.
    pub local_limit: u64,
    /// Envoy's counters over it.
    pub envoy: EnvoyCounts,
    /// floodgate-server's counters over it.
    pub server: ServerCounts,
    /// Whether Envoy's counters caught up with the client's replies at its end.
    pub synced: bool,
}

/// What one tenant sent and got back (and, at the end, what reached the upstream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenant {
    /// Local or global (`None` only in a `Default`).
    pub class: Option<Class>,
    /// The generation it lived in.
    pub generation: u32,
    /// Requests sent.
    pub sent: u64,
    /// 200s decided by a limiter: local, or global with the service's headers.
    pub admitted: u64,
    /// 200s without the service's headers on a global rule: the failure mode.
    pub failure_admitted: u64,
    /// 429s.
    pub rejected: u64,
    /// 429s whose body was not the generation's configured one.
    pub wrong_body: u64,
    /// Any other status, or no answer (each also in [`Evidence::unexpected`]).
    pub unexpected: u64,
    /// Requests with its id the upstream received.
    pub upstream: u64,
}

/// The outcome of one check, for the summary table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// Figures, or the first counterexamples.
    pub detail: String,
}

impl Check {
    /// A check from a condition and its detail.
    pub fn new(name: &str, passed: bool, detail: String) -> Check {
        Check {
            name: name.to_string(),
            passed,
            detail,
        }
    }
}

/// Everything the judge needs.
pub struct Evidence<'a> {
    /// Every generation, in order.
    pub generations: &'a [Generation],
    /// Every tenant, by id.
    pub tenants: &'a HashMap<String, Tenant>,
    /// The global rule's limit per tenant.
    pub global_limit: u64,
    /// Unexpected answers by description (status and path, or the error).
    pub unexpected: &'a HashMap<String, u64>,
    /// 200s on the unlimited path.
    pub open_admitted: u64,
    /// Everything the upstream received.
    pub upstream_total: u64,
}

/// How many counterexamples a failed check shows.
const SHOWN: usize = 3;

/// Runs every check of the oracle.
pub fn judge(e: &Evidence) -> Vec<Check> {
    let generation = |id: u32| e.generations.iter().find(|g| g.id == id);
    let mut local_bad = Vec::new();
    let mut global_bad = Vec::new();
    let mut upstream_bad = Vec::new();
    let mut per_gen_failures: HashMap<u32, u64> = HashMap::new();
    let mut per_gen_replies: HashMap<u32, u64> = HashMap::new();
    let (mut wrong_bodies, mut over_limit_sent) = (0, 0);
    let mut tenants: Vec<(&String, &Tenant)> = e.tenants.iter().collect();
    tenants.sort_by(|a, b| a.0.cmp(b.0));
    for (id, t) in &tenants {
        *per_gen_failures.entry(t.generation).or_default() += t.failure_admitted;
        *per_gen_replies.entry(t.generation).or_default() +=
            t.admitted + t.failure_admitted + t.rejected;
        wrong_bodies += t.wrong_body;
        if t.upstream != t.admitted + t.failure_admitted {
            upstream_bad.push(format!(
                "{id}: upstream {} != admitted {}",
                t.upstream,
                t.admitted + t.failure_admitted
            ));
        }
        let Some(g) = generation(t.generation) else {
            global_bad.push(format!("{id}: unknown generation {}", t.generation));
            continue;
        };
        match t.class {
            Some(Class::Local) => {
                let exact = t.sent.min(g.local_limit);
                over_limit_sent += t.sent.saturating_sub(g.local_limit);
                if t.admitted != exact || t.failure_admitted != 0 {
                    local_bad.push(format!(
                        "{id}: {} admitted of {} sent, limit {}",
                        t.admitted, t.sent, g.local_limit
                    ));
                }
            }
            Some(Class::Global) => {
                over_limit_sent += t.sent.saturating_sub(e.global_limit);
                let wrong = match g.phase {
                    Phase::Calm => {
                        t.admitted != t.sent.min(e.global_limit) || t.failure_admitted != 0
                    }
                    Phase::RedisDown | Phase::ServerDown => t.admitted > e.global_limit,
                };
                if wrong {
                    global_bad.push(format!(
                        "{id} ({:?}): {} decided + {} failure-mode admitted of {} sent, limit {}",
                        g.phase, t.admitted, t.failure_admitted, t.sent, e.global_limit
                    ));
                }
            }
            None => global_bad.push(format!("{id}: no class")),
        }
    }
    let admitted_total: u64 = tenants
        .iter()
        .map(|(_, t)| t.admitted + t.failure_admitted)
        .sum::<u64>()
        + e.open_admitted;
    let unexpected_total: u64 = e.unexpected.values().sum();
    let mut unexpected: Vec<String> = e
        .unexpected
        .iter()
        .map(|(what, n)| format!("{n} × {what}"))
        .collect();
    unexpected.sort();
    let count = |n: usize| format!("{} tenants", n);
    vec![
        Check::new(
            "no unexpected status",
            unexpected_total == 0 && wrong_bodies == 0,
            if unexpected_total == 0 && wrong_bodies == 0 {
                "only 200 and 429 (with the configured body)".to_string()
            } else {
                format!("{unexpected:?}; {wrong_bodies} rejections with another body")
            },
        ),
        Check::new(
            "upstream got only admitted requests",
            upstream_bad.is_empty() && e.upstream_total == admitted_total,
            format!(
                "upstream {} = admitted {admitted_total}; {}",
                e.upstream_total,
                first(&upstream_bad, "every tenant equal")
            ),
        ),
        Check::new(
            "local limit exact per tenant",
            local_bad.is_empty(),
            first(&local_bad, &count(class_count(&tenants, Class::Local))),
        ),
        Check::new(
            "global limit held per tenant",
            global_bad.is_empty(),
            format!(
                "{}; {over_limit_sent} requests sent over a limit in all",
                first(&global_bad, &count(class_count(&tenants, Class::Global)))
            ),
        ),
        failures_counted(e.generations, &per_gen_failures),
        failures_only_in_outages(e.generations),
        envoy_counted_every_reply(e.generations, &per_gen_replies),
        Check::new(
            "no local bucket evicted",
            e.generations.iter().all(|g| g.envoy.evictions == 0),
            "an eviction would hand a fresh bucket to a tenant: the local oracle needs none"
                .to_string(),
        ),
    ]
}

/// Every failure-mode admission the client saw is counted by Envoy, in its generation,
/// once as a failure mode and once under one `rls_error` cause.
fn failures_counted(generations: &[Generation], seen: &HashMap<u32, u64>) -> Check {
    let bad: Vec<String> = generations
        .iter()
        .filter_map(|g| {
            let seen = seen.get(&g.id).copied().unwrap_or(0);
            let e = &g.envoy;
            let ok = e.failure_allowed == seen && e.rls_errors == seen && e.failure_denied == 0;
            (!ok).then(|| {
                format!(
                    "gen {}: client saw {seen}, failure_mode_allowed {}, rls_error_* {}, denied {}",
                    g.id, e.failure_allowed, e.rls_errors, e.failure_denied
                )
            })
        })
        .collect();
    let total: u64 = generations.iter().map(|g| g.envoy.failure_allowed).sum();
    Check::new(
        "every failure-mode decision counted",
        bad.is_empty(),
        first(
            &bad,
            &format!("{total} failure-mode admissions, each counted"),
        ),
    )
}

/// Calm generations take no failure mode on either side; every outage is felt, and
/// during a Redis outage Envoy's UNAVAILABLE failures are the server's UNAVAILABLE answers.
fn failures_only_in_outages(generations: &[Generation]) -> Check {
    let bad: Vec<String> = generations
        .iter()
        .filter_map(|g| {
            let (e, s) = (&g.envoy, &g.server);
            let server_errors = s.store_unavailable + s.store_overloaded;
            let ok = match g.phase {
                Phase::Calm => e.failure_allowed == 0 && e.rls_errors == 0 && server_errors == 0,
                Phase::RedisDown => {
                    e.failure_allowed > 0
                        && s.store_unavailable > 0
                        && e.rls_unavailable == server_errors
                        && e.rls_errors == e.rls_unavailable
                }
                Phase::ServerDown => e.failure_allowed > 0,
            };
            (!ok).then(|| {
                format!(
                    "gen {} ({:?}): failure_mode_allowed {}, rls_error_* {} (unavailable {}), \
                     server store_unavailable {} store_overloaded {}",
                    g.id,
                    g.phase,
                    e.failure_allowed,
                    e.rls_errors,
                    e.rls_unavailable,
                    s.store_unavailable,
                    s.store_overloaded
                )
            })
        })
        .collect();
    let outages = generations
        .iter()
        .filter(|g| g.phase != Phase::Calm)
        .count();
    Check::new(
        "failure modes only during outages",
        bad.is_empty(),
        first(
            &bad,
            &format!(
                "{outages} outages felt, {} calm stretches clean",
                generations.len() - outages
            ),
        ),
    )
}

/// At each fence Envoy's allowed + denied equal the limited requests answered 200 or 429.
fn envoy_counted_every_reply(generations: &[Generation], replies: &HashMap<u32, u64>) -> Check {
    let bad: Vec<String> = generations
        .iter()
        .filter_map(|g| {
            let replies = replies.get(&g.id).copied().unwrap_or(0);
            let counted = g.envoy.allowed + g.envoy.denied;
            (!g.synced || counted != replies).then(|| {
                format!(
                    "gen {}: Envoy counted {counted}, client got {replies}",
                    g.id
                )
            })
        })
        .collect();
    Check::new(
        "Envoy counted every decision",
        bad.is_empty(),
        first(&bad, &format!("{} generations", generations.len())),
    )
}

fn class_count(tenants: &[(&String, &Tenant)], class: Class) -> usize {
    tenants
        .iter()
        .filter(|(_, t)| t.class == Some(class))
        .count()
}

/// `ok` when nothing went wrong, else the first few counterexamples and how many.
fn first(bad: &[String], ok: &str) -> String {
    if bad.is_empty() {
        return ok.to_string();
    }
    let shown: Vec<&str> = bad.iter().take(SHOWN).map(String::as_str).collect();
    format!("{} ({} in all)", shown.join("; "), bad.len())
}

#[cfg(test)]
#[path = "oracle_tests.rs"]
mod tests;
