//! The Redis store: counters shared by every floodgate-server replica.
//!
//! Each request is decided by one Lua script ([`SCRIPT`], `check.lua`, whose header
//! documents its KEYS/ARGV contract and why it must be a script). The script holds the four
//! algorithms, each a Lua twin of its pure Rust version in [`crate::algorithm`], reads the
//! clock from Redis (`TIME`), and applies the same all-or-nothing rule as the memory store.
//! It runs with `EVALSHA`, loading itself on `NOSCRIPT` (after a Redis restart, say). The
//! conformance suite (`tests/conformance.rs`) runs the same scenarios against both stores
//! and requires the same answers, to the nanosecond.
//!
//! # One round trip per request, shared connections
//! All counters of a request go into one script call. On a single Redis (`--redis-url`)
//! that is always one call, so a request is all or nothing exactly. Calls from every
//! concurrent request share one multiplexed connection (auto-reconnecting), so concurrent
//! requests are pipelined on the wire.
//!
//! # Redis Cluster (`--redis-cluster`)
//! Keys carry a per-counter hash tag ([`key`]), so counters spread over the cluster. A
//! request whose keys all share a slot (every single-descriptor request) is still one
//! exact call. A request spanning slots is decided in two phases, each one call per slot
//! sent concurrently: `peek` decides without writing; if any enforced limit is over, that
//! is the answer and nothing is consumed; otherwise `commit` decides again and writes, per
//! slot. The weaker guarantee, documented: if between the two phases a concurrent request
//! exhausts a limit of one slot, the other slots may still consume for a request that is
//! answered over the limit. Each slot's own counters are always exact.
//!
//! # Outages
//! Every call is bounded by the timeout (`--redis-timeout-ms`) and by a cap on calls in
//! flight (`--redis-max-in-flight`, beyond which calls fail at once), so nothing piles up
//! and memory stays bounded. Three consecutive connectivity failures, or a failed probe,
//! mark the store down: [`Health`] says so (`/healthz` answers 503, `floodgate_store_up`
//! is 0), calls answer UNAVAILABLE at once without touching the network, and one warning is
//! logged, then a summary at most every [`LOG_EVERY`]. A probe `PING`s (a single Redis: `TIME`) every
//! [`PROBE_EVERY`] (reconnecting as needed); its first success marks the store up again.

pub mod deadline;
pub mod key;

use super::health::Health;
use super::{Check, Store, StoreError};
use crate::algorithm::{Algorithm, Decision};
use crate::clock::Clock;
use deadline::RedisClock;
use futures_util::future::join_all;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The decision script (see its header for the KEYS/ARGV contract).
pub const SCRIPT: &str = include_str!("check.lua");

/// How often the store probes Redis.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

/// At most one failure log line per this interval while Redis fails.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Consecutive connectivity failures that mark the store down.
const FAILURES_TO_DOWN: u32 = 3;

/// Hits above this never fit any limit (limits and bursts are `u32`), so the script gets
/// at most this many; it keeps the script's arithmetic within exact doubles.
const MAX_SCRIPT_HITS: u64 = 1 << 32;

/// Where Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One Redis server (or a proxy in front of several): `redis://HOST:PORT[/DB]`.
    Single(String),
    /// Redis Cluster, found through these seed nodes.
    Cluster(Vec<String>),
}

/// How to reach Redis and how long to wait for it.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Where Redis is.
    pub target: Target,
    /// The longest one call (connecting included) may take before it answers UNAVAILABLE.
    pub timeout: Duration,
    /// Calls in flight beyond which new calls fail at once.
    pub max_in_flight: usize,
}

/// The Redis store. See the module documentation.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("target", &self.inner.options.target)
            .field("up", &self.inner.health.is_up())
            .finish()
    }
}

struct Inner {
    conn: Conn,
    script: Script,
    options: RedisOptions,
    in_flight: Semaphore,
    health: Arc<Health>,
    /// Tests only: a clock whose time is passed to the script instead of Redis's `TIME`.
    clock: OnceLock<Arc<dyn Clock>>,
    /// Redis's clock as seen from here, for each call's "not after" (single Redis only).
    redis_clock: RedisClock,
    consecutive_failures: AtomicU32,
    log: Mutex<LogState>,
    failed_since_log: AtomicU64,
}

struct LogState {
    last: Option<Instant>,
    down_since: Option<Instant>,
}

enum Conn {
    Single(ConnectionManager),
    Cluster {
        client: Box<redis::cluster::ClusterClient>,
        conn: Mutex<Option<ClusterConnection>>,
    },
}

/// What went wrong with one call, for health and logs.
enum Failure {
    /// Redis could not be reached or did not answer in time: counts towards "down".
    Connectivity(String),
    /// Redis answered with an error or a reply the store does not understand.
    Reply(String),
}

impl Failure {
    fn message(&self) -> &str {
        match self {
            Failure::Connectivity(m) | Failure::Reply(m) => m,
        }
    }
}

impl From<RedisError> for Failure {
    fn from(e: RedisError) -> Self {
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_cluster_error()
        {
            Failure::Connectivity(e.to_string())
        } else {
            Failure::Reply(e.to_string())
        }
    }
}

impl RedisStore {
    /// A store on `options.target`, reporting reachability to `health`.
    ///
    /// Connecting is lazy: an unreachable Redis does not stop the server from starting;
    /// the store starts down and comes up when Redis does. Errors only for an unusable
    /// URL. Must be called within a Tokio runtime (it spawns the probe).
    pub async fn connect(options: RedisOptions, health: Arc<Health>) -> Result<Self, String> {
        let t = options.timeout;
        let conn = match &options.target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())
                    .map_err(|e| format!("--redis-url {url}: {e}"))?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(t))
                    .set_response_timeout(Some(t))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_secs(1));
                let manager = ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| format!("--redis-url {url}: {e}"))?;
                Conn::Single(manager)
            }
            Target::Cluster(seeds) => {
                let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(t)
                    .response_timeout(t)
                    .retries(1)
                    .build()
                    .map_err(|e| format!("--redis-cluster {}: {e}", seeds.join(",")))?;
                Conn::Cluster {
                    client: Box::new(client),
                    conn: Mutex::new(None),
                }
            }
        };
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                script: Script::new(SCRIPT),
                in_flight: Semaphore::new(options.max_in_flight),
                options,
                health,
                clock: OnceLock::new(),
                redis_clock: RedisClock::default(),
                consecutive_failures: AtomicU32::new(0),
                log: Mutex::new(LogState {
                    last: None,
                    down_since: None,
                }),
                failed_since_log: AtomicU64::new(0),
            }),
        };
        store.inner.probe().await;
        tokio::spawn(probe_forever(Arc::downgrade(&store.inner)));
        Ok(store)
    }

    /// For tests: passes `clock`'s time (truncated to whole microseconds) to the script
    /// instead of letting it read Redis's `TIME`, so the Redis and memory stores can be
    /// compared on the same instants. The server never uses it.
    /// Set once; later calls are ignored.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        let _ = self.inner.clock.set(clock);
        self
    }

    /// The script's SHA-1, as `EVALSHA` names it.
    pub fn script_sha(&self) -> &str {
        self.inner.script.get_hash()
    }

    /// Whether Redis answered the last call or probe.
    pub fn is_up(&self) -> bool {
        self.inner.health.is_up()
    }
}

impl Store for RedisStore {
    async fn check(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.inner.check(batch).await
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}

/// When a call runs: the instant the script decides at, and the instant past which it must
/// do nothing. Each is a decimal count of microseconds in Redis's clock, or empty: Redis's
/// `TIME`, and no deadline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// Empty in production (the script reads `TIME`); tests pass a fake clock's time.
    pub now_us: String,
    /// The caller's deadline in Redis's clock (see [`deadline`]); empty for none.
    pub not_after_us: String,
}

/// The `EVALSHA` of `batch` (`mode` "commit" or "peek"), with KEYS and ARGV as
/// `check.lua` documents them. The bench runs this same command in `redis-benchmark`.
pub fn script_cmd(sha: &str, batch: &[&Check], mode: &str, times: &CallTimes) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(sha).arg(batch.len());
    for c in batch {
        cmd.arg(key::redis_key(&c.key, &c.limit));
    }
    cmd.arg(mode).arg(&times.now_us).arg(&times.not_after_us);
    for c in batch {
        let burst = match c.limit.algorithm {
            Algorithm::TokenBucket { burst } => burst.get(),
            _ => 0,
        };
        cmd.arg(key::algorithm_code(c.limit.algorithm))
            .arg(c.limit.requests_per_unit.get())
            .arg(c.limit.unit.seconds())
            .arg(burst)
            // Hits of 0 mean 1, as everywhere; above 2^32 nothing fits either way.
            .arg(c.hits.clamp(1, MAX_SCRIPT_HITS))
            .arg(if c.shadow { "1" } else { "0" });
    }
    cmd
}

/// What the script answers, past its deadline, instead of decisions: it changed nothing.
const LATE: &[u8] = b"late";

/// The script's reply: three values per item then Redis's time in µs (the decisions and
/// that time), or [`LATE`].
fn parse_reply(reply: &[Value], items: usize) -> Result<(Vec<Decision>, i64), Failure> {
    if let [Value::BulkString(b)] = reply {
        if b == LATE {
            // Redis got to the call after its caller gave up: as a timeout.
            return Err(Failure::Connectivity(
                "Redis ran the call after its deadline and changed nothing".into(),
            ));
        }
    }
    let Some((Value::Int(redis_now), reply)) = reply.split_last() else {
        return Err(Failure::Reply("script answered no time".into()));
    };
    if reply.len() != 3 * items {
        return Err(Failure::Reply(format!(
            "script answered {} values for {items} items",
            reply.len() + 1
        )));
    }
    let decisions = reply
        .chunks_exact(3)
        .map(|v| {
            let allowed = match &v[0] {
                Value::Int(1) => true,
                Value::Int(0) => false,
                other => return Err(bad_value("allowed", other)),
            };
            let remaining = match &v[1] {
                Value::Int(n) => u32::try_from((*n).max(0)).unwrap_or(u32::MAX),
                other => return Err(bad_value("remaining", other)),
            };
            let reset_in_ns = match &v[2] {
                Value::BulkString(b) => {
                    parse_saturating(b).ok_or_else(|| bad_value("reset", &v[2]))?
                }
                other => return Err(bad_value("reset", other)),
            };
            Ok(Decision {
                allowed,
                remaining,
                reset_in_ns,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((decisions, *redis_now))
}

fn bad_value(what: &str, v: &Value) -> Failure {
    Failure::Reply(format!("script answered {what} = {v:?}"))
}

/// A decimal string as a `u64`, saturating (as the Rust algorithms do) when larger.
fn parse_saturating(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n.saturating_mul(10).saturating_add(u64::from(d - b'0'));
    }
    Some(n)
}

impl Inner {
    async fn check(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        if !self.health.is_up() {
            // Known down: answer at once; the probe brings the store back.
            self.failed_since_log.fetch_add(1, Ordering::Relaxed);
            self.log_still_down();
            return Err(StoreError::Unavailable(format!(
                "redis unreachable: {}",
                self.health.reason()
            )));
        }
        let Ok(_permit) = self.in_flight.try_acquire() else {
            return Err(StoreError::Overloaded(self.options.max_in_flight));
        };
        let times = self.call_times();
        let outcome =
            match tokio::time::timeout(self.options.timeout, self.decide(batch, &times)).await {
                Ok(r) => r,
                Err(_) => Err(Failure::Connectivity(format!(
                    "no answer within {:?}",
                    self.options.timeout
                ))),
            };
        match outcome {
            Ok(d) => {
                self.succeeded();
                Ok(d)
            }
            Err(f) => {
                self.failed(&f, false);
                Err(StoreError::Unavailable(format!("redis: {}", f.message())))
            }
        }
    }

    /// The times a call starting now passes to the script. A fake clock (tests) has no
    /// deadline; neither has Redis Cluster, whose nodes' clocks each differ from the one
    /// the probe reads (the README states its bound instead).
    fn call_times(&self) -> CallTimes {
        if let Some(c) = self.clock.get() {
            return CallTimes {
                now_us: (c.now_ns() / 1_000).to_string(),
                not_after_us: String::new(),
            };
        }
        let not_after = match self.conn {
            Conn::Single(_) => self
                .redis_clock
                .not_after(self.redis_clock.local_us(), self.options.timeout),
            Conn::Cluster { .. } => None,
        };
        CallTimes {
            now_us: String::new(),
            not_after_us: not_after.map(|t| t.to_string()).unwrap_or_default(),
        }
    }

    async fn decide(&self, batch: &[Check], now: &CallTimes) -> Result<Vec<Decision>, Failure> {
        match &self.conn {
            Conn::Single(manager) => {
                let items: Vec<&Check> = batch.iter().collect();
                let mut conn = manager.clone();
                self.call(&mut conn, &items, "commit", now).await
            }
            Conn::Cluster { conn, .. } => {
                let conn = conn
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .ok_or_else(|| Failure::Connectivity("not connected to the cluster".into()))?;
                self.decide_cluster(conn, batch, now).await
            }
        }
    }

    /// Groups by slot: one exact call when there is one slot, else peek then commit.
    async fn decide_cluster(
        &self,
        conn: ClusterConnection,
        batch: &[Check],
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, c) in batch.iter().enumerate() {
            let slot = key::slot(&key::redis_key(&c.key, &c.limit));
            groups.entry(slot).or_default().push(i);
        }
        if groups.len() == 1 {
            let items: Vec<&Check> = batch.iter().collect();
            return self.call(&mut conn.clone(), &items, "commit", now).await;
        }
        let peek = self.call_groups(&conn, batch, &groups, "peek", now).await?;
        let blocked = peek.iter().zip(batch).any(|(d, c)| !d.allowed && !c.shadow);
        if blocked {
            return Ok(peek);
        }
        self.call_groups(&conn, batch, &groups, "commit", now).await
    }

    async fn call_groups(
        &self,
        conn: &ClusterConnection,
        batch: &[Check],
        groups: &BTreeMap<u16, Vec<usize>>,
        mode: &str,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let calls = groups.values().map(|idx| {
            let mut conn = conn.clone();
            async move {
                let items: Vec<&Check> = idx.iter().map(|&i| &batch[i]).collect();
                self.call(&mut conn, &items, mode, now).await
            }
        });
        let answers = join_all(calls).await;
        let mut out: Vec<Option<Decision>> = vec![None; batch.len()];
        for (idx, answer) in groups.values().zip(answers) {
            for (&i, d) in idx.iter().zip(answer?) {
                out[i] = Some(d);
            }
        }
        out.into_iter()
            .map(|d| d.ok_or_else(|| Failure::Reply("a slot group went unanswered".into())))
            .collect()
    }

    /// One `EVALSHA`; on `NOSCRIPT` (a restarted or flushed Redis) loads the script and
    /// sends it again.
    async fn call<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        items: &[&Check],
        mode: &str,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let cmd = script_cmd(self.script.get_hash(), items, mode, now);
        let reply: Vec<Value> = match cmd.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.load_async(conn).await?;
                cmd.query_async(conn).await?
            }
            other => other?,
        };
        let (decisions, redis_now) = parse_reply(&reply, items.len())?;
        if self.clock.get().is_none() {
            // Every answer is also a reading of Redis's clock (see `deadline`).
            self.redis_clock
                .observe(redis_now, self.redis_clock.local_us());
        }
        Ok(decisions)
    }

    fn succeeded(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        if self.health.set_up() {
            let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
            let down_for = log.down_since.take().map(|t| t.elapsed());
            let failed = self.failed_since_log.swap(0, Ordering::Relaxed);
            log.last = None;
            tracing::info!(?down_for, failed_calls = failed, "Redis reachable again");
        }
    }

    /// Records a failure; `probe` failures mark the store down at once.
    fn failed(&self, f: &Failure, probe: bool) {
        if !probe {
            self.failed_since_log.fetch_add(1, Ordering::Relaxed);
        }
        let down = match f {
            Failure::Connectivity(reason) => {
                let n = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
                (probe || n >= FAILURES_TO_DOWN) && self.health.set_down(reason)
            }
            Failure::Reply(_) => false,
        };
        if down {
            let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
            log.down_since = Some(Instant::now());
            log.last = Some(Instant::now());
            tracing::warn!(
                error = f.message(),
                "Redis unreachable: answering UNAVAILABLE until it is back"
            );
        } else {
            self.log_throttled(f.message());
        }
    }

    fn log_still_down(&self) {
        self.log_throttled(&self.health.reason());
    }

    /// At most one line per [`LOG_EVERY`], saying how many calls failed since the last.
    fn log_throttled(&self, error: &str) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        log.last = Some(Instant::now());
        let failed = self.failed_since_log.swap(0, Ordering::Relaxed);
        if failed == 0 {
            return;
        }
        tracing::warn!(
            failed_calls = failed,
            error,
            up = self.health.is_up(),
            "Redis calls failing"
        );
    }

    /// One probe: connects if needed and `PING`s (`TIME` on a single Redis), within the timeout.
    async fn probe(&self) {
        let t = self.options.timeout;
        let result = tokio::time::timeout(t, self.ping()).await;
        match result {
            Ok(Ok(())) => self.succeeded(),
            Ok(Err(f)) => self.failed(&f, true),
            Err(_) => self.failed(
                &Failure::Connectivity(format!("no answer to the probe within {t:?}")),
                true,
            ),
        }
    }

    async fn ping(&self) -> Result<(), Failure> {
        match &self.conn {
            Conn::Single(manager) => {
                // TIME rather than PING: it also tells the store Redis's clock.
                let mut conn = manager.clone();
                let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
                let received = self.redis_clock.local_us();
                let redis_us = secs.saturating_mul(1_000_000).saturating_add(micros);
                self.redis_clock.observe(redis_us, received);
            }
            Conn::Cluster { client, conn } => {
                let current = conn.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let mut c = match current {
                    Some(c) => c,
                    None => {
                        let c = client.get_async_connection().await?;
                        *conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(c.clone());
                        c
                    }
                };
                redis::cmd("PING").query_async::<()>(&mut c).await?;
            }
        }
        Ok(())
    }
}

/// Probes every [`PROBE_EVERY`] for as long as the store exists.
async fn probe_forever(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        inner.probe().await;
    }
}

#[cfg(test)]
mod tests;
