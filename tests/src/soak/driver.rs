//! Runs the soak: starts the pieces, keeps the load on, carries out the schedule's
//! faults between fences, and gathers the evidence for the checks.

use super::counters::{self, ServerTotals};
use super::load::{new_client, Epoch, Load};
use super::oracle::{self, Check, EnvoyCounts, Evidence, Generation, Phase, ServerCounts};
use super::redis::Redis;
use super::report::{self, Rss};
use super::schedule::{Event, Schedule, REDIS_DOWN, SERVER_DOWN};
use super::setup::{self, Plugin, FIRST, GLOBAL_LIMIT, SECOND};
use crate::lds::DynamicEnvoy;
use crate::{paths, Envoy, Server, Upstream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The counter of listener files Envoy applied.
const LDS_SUCCESS: &str = "listener_manager.lds.update_success";

/// How long floodgate-server may take to report healthy after Redis or itself is back.
const HEAL_TIMEOUT: Duration = Duration::from_secs(30);

/// What a soak run produced.
pub struct Outcome {
    /// Every check, in the order printed.
    pub checks: Vec<Check>,
    /// Figures worth printing (name, value).
    pub figures: Vec<(String, String)>,
}

/// The generations closed so far and the counters at the last fence.
struct Books {
    generations: Vec<Generation>,
    phase: Phase,
    plugin: Plugin,
    envoy: EnvoyCounts,
    server: ServerCounts,
    totals: ServerTotals,
}

impl Books {
    /// Ends generation `id` (no request in flight, `decided` limited replies so far) and
    /// starts the next one in `next`.
    async fn close(&mut self, id: u32, decided: u64, envoy: &Envoy, server: &Server, next: Phase) {
        let (envoy_now, synced) = counters::envoy_synced(envoy, decided).await;
        let server_now = self.totals.read(server).await;
        self.generations.push(Generation {
            id,
            phase: self.phase,
            local_limit: self.plugin.local_limit,
            envoy: counters::envoy_delta(&envoy_now, &self.envoy),
            server: counters::server_delta(&server_now, &self.server),
            synced,
        });
        (self.envoy, self.server, self.phase) = (envoy_now, server_now, next);
    }
}

/// The processes under test.
struct Rig {
    redis: Redis,
    server: Server,
    server_flags: Vec<String>,
    upstream: Upstream,
    /// Envoy, with its listener from an LDS file.
    envoy: DynamicEnvoy,
    /// The listener's port, kept across the update.
    port: u16,
}

impl Rig {
    /// Starts Redis, floodgate-server on it, the upstream and Envoy, each ready.
    async fn start() -> Result<Rig, String> {
        let redis = Redis::start()?;
        let server_flags: Vec<String> = [
            "--redis-url",
            &redis.url(),
            "--redis-timeout-ms",
            setup::REDIS_TIMEOUT_MS,
            "--response-headers",
        ]
        .map(String::from)
        .into();
        let flags: Vec<&str> = server_flags.iter().map(String::as_str).collect();
        let server = Server::start(setup::SERVER_CONFIG, &flags);
        let upstream = Upstream::start().await;
        let port = setup::free_port()?;
        let clusters = setup::clusters(upstream.addr(), server.grpc());
        let envoy = DynamicEnvoy::start(vec![FIRST.listener(port)], clusters, 2).await;
        Ok(Rig {
            redis,
            server,
            server_flags,
            upstream,
            envoy,
            port,
        })
    }

    /// `http://127.0.0.1:PORT` of the listener.
    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Ends the current generation (the caller holds the fence) and starts one in `next`.
    async fn close(&self, books: &mut Books, generation: u32, decided: u64, next: Phase) {
        books
            .close(generation, decided, &self.envoy, &self.server, next)
            .await;
    }
}

/// What one event adds to the report.
#[derive(Default)]
struct Added {
    checks: Vec<Check>,
    figures: Vec<(String, String)>,
}

/// Carries out `event` (scheduled at `at`) between fences: the generation it breaks
/// runs from the fault to the moment floodgate-server is healthy again.
async fn inject(
    rig: &mut Rig,
    load: &Load,
    books: &mut Books,
    rss: &mut Rss,
    (at, event): (Duration, Event),
) -> Result<Added, String> {
    let mut added = Added::default();
    let mut epoch = load.fence().await;
    let (outage, down) = match event {
        Event::RestartRedis => (Phase::RedisDown, REDIS_DOWN),
        Event::RestartServer => (Phase::ServerDown, SERVER_DOWN),
        Event::ChangeConfig => (Phase::Calm, Duration::ZERO),
    };
    rig.close(books, epoch.generation, load.decided(), outage)
        .await;
    epoch.generation += 1;
    match event {
        Event::RestartRedis => rig.redis.kill(),
        Event::RestartServer => {
            rss.server_before_restart(rig.server.pid());
            keep_log("floodgate-server-1.log", &rig.server.log());
            books.totals.carry_over();
            rig.server.stop();
        }
        Event::ChangeConfig => {
            let success = |stats: &std::collections::HashMap<String, u64>| {
                stats.get(LDS_SUCCESS).copied().unwrap_or(0)
            };
            let before = success(&rig.envoy.stats().await);
            let applied = rig
                .envoy
                .try_update_listeners(vec![SECOND.listener(rig.port)])
                .await;
            let after = success(&rig.envoy.stats().await);
            added.checks.push(Check::new(
                "listener update applied",
                applied.is_ok() && after > before,
                match &applied {
                    Ok(()) => format!("{LDS_SUCCESS} {before} → {after}; new capacity and body"),
                    Err(e) => format!("Envoy refused it: {e}"),
                },
            ));
            books.plugin = SECOND;
            epoch.client = new_client();
            epoch.body = SECOND.body;
            return Ok(added);
        }
    }
    drop(epoch);
    tokio::time::sleep(down).await;
    if event == Event::RestartRedis {
        rig.redis.restart()?;
    } else {
        let flags: Vec<&str> = rig.server_flags.iter().map(String::as_str).collect();
        rig.server.restart(&flags);
    }
    let back = Instant::now();
    wait_healthy(&rig.server).await?;
    added.figures.push((
        format!("{event:?} at {:.0} s", at.as_secs_f64()),
        format!(
            "down {} s, server healthy {} ms after",
            down.as_secs(),
            back.elapsed().as_millis()
        ),
    ));
    let mut epoch = load.fence().await;
    rig.close(books, epoch.generation, load.decided(), Phase::Calm)
        .await;
    epoch.generation += 1;
    Ok(added)
}

/// Runs a soak of `schedule` at `rate` requests per second.
pub async fn run(schedule: &Schedule, rate: u64) -> Result<Outcome, String> {
    let mut rig = Rig::start().await?;
    let started = Instant::now();
    let first = Epoch {
        generation: 0,
        client: new_client(),
        body: FIRST.body,
    };
    let load = Load::start(rig.base(), rate, first);
    let mut books = Books {
        generations: Vec::new(),
        phase: Phase::Calm,
        plugin: FIRST,
        envoy: EnvoyCounts::default(),
        server: ServerCounts::default(),
        totals: ServerTotals::default(),
    };
    let (mut checks, mut figures) = (Vec::new(), Vec::new());
    sleep_until(started, schedule.warm_up).await;
    let mut rss = Rss::start(rig.envoy.pid(), rig.server.pid());
    for &(at, event) in &schedule.events {
        sleep_until(started, at).await;
        let added = inject(&mut rig, &load, &mut books, &mut rss, (at, event)).await?;
        checks.extend(added.checks);
        figures.extend(added.figures);
    }

    sleep_until(started, schedule.end).await;
    let last_generation = load.fence().await.generation;
    let mut seen = load.stop().await;
    let decided = seen
        .tenants
        .values()
        .map(|t| t.admitted + t.failure_admitted + t.rejected)
        .sum();
    rig.close(&mut books, last_generation, decided, Phase::Calm)
        .await;
    let upstream_total = rig.upstream.count();
    for (id, tenant) in seen.tenants.iter_mut() {
        tenant.upstream = rig.upstream.count_for(id);
    }
    checks.extend(oracle::judge(&Evidence {
        generations: &books.generations,
        tenants: &seen.tenants,
        global_limit: GLOBAL_LIMIT,
        unexpected: &seen.unexpected,
        open_admitted: seen.open_admitted,
        upstream_total,
    }));
    checks.extend(final_exact_check(&rig.base(), &rig.upstream, books.plugin).await);
    checks.extend(rss.end(rig.envoy.pid(), rig.server.pid()));

    keep_log("floodgate-server-2.log", &rig.server.log());
    keep_log("envoy.log", &rig.envoy.log());
    figures.push(("logs".to_string(), logs_dir().display().to_string()));
    let sent: u64 = seen.tenants.values().map(|t| t.sent).sum();
    let failure: u64 = books
        .generations
        .iter()
        .map(|g| g.envoy.failure_allowed)
        .sum();
    figures.extend(report::load_figures(
        &seen,
        sent,
        failure,
        &books.generations,
    ));
    figures.extend(rss.figures());
    Ok(Outcome { checks, figures })
}

/// After the last fault: a fresh tenant in each mode sends its limit and 3 more, one at a
/// time; exactly the limit is admitted, and exactly that reaches the upstream.
async fn final_exact_check(base: &str, upstream: &Upstream, plugin: Plugin) -> Vec<Check> {
    let client = new_client();
    let mut checks = Vec::new();
    for (path, tenant, limit) in [
        ("local", "final-local", plugin.local_limit),
        ("global", "final-global", GLOBAL_LIMIT),
    ] {
        let mut statuses = Vec::new();
        for _ in 0..limit + 3 {
            let reply = client
                .get(format!("{base}/{path}/item"))
                .header("x-tenant-id", tenant)
                .send()
                .await;
            statuses.push(match reply {
                Ok(r) if path == "global" && !r.headers().contains_key("x-ratelimit-limit") => {
                    format!("{} undecided", r.status().as_u16())
                }
                Ok(r) => r.status().as_u16().to_string(),
                Err(e) => e.to_string(),
            });
        }
        let admitted = statuses.iter().filter(|s| *s == "200").count() as u64;
        let expected: Vec<String> = (0..limit + 3)
            .map(|i| if i < limit { "200" } else { "429" }.to_string())
            .collect();
        let reached = upstream.count_for(tenant);
        checks.push(Check::new(
            &format!("exact {path} limit after the last restart"),
            statuses == expected && reached == limit,
            format!(
                "{admitted} of {} admitted (limit {limit}), upstream got {reached}: {}",
                limit + 3,
                statuses.join(" ")
            ),
        ));
    }
    checks
}

/// Where the soak leaves the processes' logs for a post-mortem: `target/soak/`.
fn logs_dir() -> PathBuf {
    paths::repo_root().join("target").join("soak")
}

/// Keeps `text` as `name` in [`logs_dir`] (best effort: a log that cannot be written
/// fails no check).
fn keep_log(name: &str, text: &str) {
    let dir = logs_dir();
    if let Err(e) =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(name), text))
    {
        eprintln!("soak: cannot keep {name} in {}: {e}", dir.display());
    }
}

/// Waits until floodgate-server's `/healthz` answers 200 (its store is up).
async fn wait_healthy(server: &Server) -> Result<(), String> {
    let deadline = Instant::now() + HEAL_TIMEOUT;
    while server.health().await != Some(200) {
        if Instant::now() > deadline {
            return Err(format!(
                "floodgate-server not healthy {HEAL_TIMEOUT:?} after the fault:\n{}",
                server.log()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Sleeps until `at` after `started` (the schedule's clock; nothing waits on it for
/// readiness).
async fn sleep_until(started: Instant, at: Duration) {
    tokio::time::sleep_until((started + at).into()).await;
}
