//! The Redis store: counters shared by every floodgate-server replica.
//!
//! Each request is decided by one Lua script ([`SCRIPT`], `check.lua`, whose header
//! documents its KEYS/ARGV contract and why it must be a script). The script holds the five
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
//! # Redis Sentinel (`--redis-sentinel`)
//! The probe asks the sentinels where the master is and moves to it after a failover
//! ([`sentinel`]); between the old master's death and the move, calls fail as in any
//! outage. Nothing is retried, so nothing is counted twice.
//!
//! # Credentials and TLS
//! [`access`]: passwords from a file or the environment, held where `Debug` cannot show
//! them, URLs shown redacted ([`target::redact`]); `rediss://` over rustls with a CA file
//! and an optional client certificate.
//!
//! # Outages
//! Every call is bounded by the timeout (`--redis-timeout-ms`) and by a cap on calls in
//! flight (`--redis-max-in-flight`, beyond which calls fail at once), so nothing piles up
//! and memory stays bounded. Three consecutive failures that say Redis cannot decide
//! (unreachable, timed out, refused our credentials, refusing commands), or a failed probe,
//! mark the store down: [`Health`] says so and why (`/healthz` answers 503,
//! `floodgate_store_up` is 0), calls answer UNAVAILABLE at once without touching the
//! network, and one warning is logged, then a summary at most every [`LOG_EVERY`]. Every
//! failure is counted by cause. A probe runs every [`PROBE_EVERY`] (reconnecting as
//! needed): `PING` (a single Redis: `TIME`), then the decision script on no counters, so a
//! Redis that answers but cannot decide (a missing password, an ACL, no scripting) is down
//! too; its first success marks the store up again.
//!
//! # Files
//! [`conn`] holds the connection, [`script`] the command and reply formats, [`cluster`]
//! the two-phase Redis Cluster path, [`failure`] what a call's failure was, [`outage`] the
//! breaker, log throttle and probe; this file ties them into one call: refuse when down, bound, time, call, record.

pub mod access;
pub mod deadline;
pub mod key;
pub mod target;

mod cluster;
mod conn;
mod failure;
mod outage;
mod script;
mod sentinel;

pub use access::{Access, Auth, Secret, TlsMaterial};
pub use outage::{LOG_EVERY, PROBE_EVERY};
pub use script::{script_cmd, CallTimes, Mode, SCRIPT};
pub use target::Target;

use super::batch::{rejected, report_unconsumed};
use super::health::Health;
use super::{Check, Counting, Store, StoreError};
use crate::algorithm::Decision;
use crate::clock::Clock;
use conn::Conn;
use deadline::RedisClock;
use failure::Failure;
use outage::Outage;
use redis::Script;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// How to reach Redis and how long to wait for it.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Where Redis is.
    pub target: Target,
    /// Credentials and TLS, apart from the URL.
    pub access: Access,
    /// The longest one call (connecting included) may take before it answers UNAVAILABLE.
    pub timeout: Duration,
    /// Calls in flight beyond which new calls fail at once.
    pub max_in_flight: usize,
    /// Which items of a request consume (`--counting`).
    pub counting: Counting,
    /// Put before every key (`--redis-key-prefix`, the reference's `CACHE_KEY_PREFIX`;
    /// empty by default): see [`key::redis_key`].
    pub key_prefix: String,
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
            .field("up", &self.inner.outage.health.is_up())
            .finish()
    }
}

struct Inner {
    conn: Conn,
    script: Script,
    options: RedisOptions,
    in_flight: Semaphore,
    outage: Outage,
    /// Tests only: a clock whose time is passed to the script instead of Redis's `TIME`.
    clock: OnceLock<Arc<dyn Clock>>,
    /// Redis's clock as seen from here, for each call's "not after" (single Redis only).
    redis_clock: RedisClock,
}

impl RedisStore {
    /// A store on `options.target`, reporting reachability to `health`.
    ///
    /// Connecting is lazy: an unreachable Redis does not stop the server from starting;
    /// the store starts down and comes up when Redis does. Errors only for an unusable
    /// URL. Must be called within a Tokio runtime (it spawns the probe).
    pub async fn connect(options: RedisOptions, health: Arc<Health>) -> Result<Self, String> {
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn: Conn::open(&options)?,
                script: Script::new(SCRIPT),
                in_flight: Semaphore::new(options.max_in_flight),
                options,
                outage: Outage::new(health),
                clock: OnceLock::new(),
                redis_clock: RedisClock::default(),
            }),
        };
        store.inner.probe().await;
        tokio::spawn(outage::probe_forever(Arc::downgrade(&store.inner)));
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
        self.inner.outage.health.is_up()
    }
}

impl Store for RedisStore {
    async fn check(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.inner.check(batch, Mode::Commit).await
    }

    async fn charge(&self, batch: &[Check]) -> Result<Vec<Decision>, StoreError> {
        self.inner.check(batch, Mode::Charge).await
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}

impl Inner {
    /// One request: refused at once while down or over the in-flight cap, else decided
    /// within the timeout, the outcome fed to the breaker.
    async fn check(&self, batch: &[Check], mode: Mode) -> Result<Vec<Decision>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let health = &self.outage.health;
        if !health.is_up() {
            // Known down: answer at once; the probe brings the store back.
            self.outage.refused_while_down();
            return Err(StoreError::Unavailable(format!(
                "redis: {}",
                health.describe()
            )));
        }
        let Ok(_permit) = self.in_flight.try_acquire() else {
            return Err(StoreError::Overloaded(self.options.max_in_flight));
        };
        let times = self.call_times();
        let outcome = match tokio::time::timeout(
            self.options.timeout,
            self.decide(batch, mode, &times),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(format!(
                "no answer within {:?}",
                self.options.timeout
            ))),
        };
        match outcome {
            Ok(mut d) => {
                self.outage.succeeded();
                // A charge consumed everything: its items report what they hold.
                if mode != Mode::Charge
                    && !self.options.counting.consumes_rejected()
                    && rejected(batch, &d)
                {
                    report_unconsumed(batch, &mut d);
                }
                Ok(d)
            }
            Err(f) => {
                self.outage.failed(&f, false);
                Err(StoreError::Unavailable(format!("redis: {}", f.message())))
            }
        }
    }

    /// The times a call starting now passes to the script. A fake clock (tests) has no
    /// deadline; neither has Redis Cluster, whose nodes' clocks each differ from the one
    /// the probe reads (`docs/server/stores.md` states its bound instead).
    fn call_times(&self) -> CallTimes {
        if let Some(c) = self.clock.get() {
            return CallTimes {
                now_us: (c.now_ns() / 1_000).to_string(),
                not_after_us: String::new(),
            };
        }
        let not_after = match self.conn {
            Conn::Single(_) | Conn::Sentinel(_) => self
                .redis_clock
                .not_after(self.redis_clock.local_us(), self.options.timeout),
            Conn::Cluster { .. } => None,
        };
        CallTimes {
            now_us: String::new(),
            not_after_us: not_after.map(|t| t.to_string()).unwrap_or_default(),
        }
    }

    /// The script's writing mode for a decision asked in `mode` (`check.lua`'s ARGV[1]):
    /// under `--counting per-descriptor`, a commit writes every admitted item regardless
    /// (`count`); the other modes are the same under either counting.
    fn writing(&self, mode: Mode) -> Mode {
        match (mode, self.options.counting) {
            (Mode::Commit, Counting::PerDescriptor) => Mode::Count,
            (m, _) => m,
        }
    }

    /// One script call on a single Redis; the cluster path on a cluster.
    async fn decide(
        &self,
        batch: &[Check],
        mode: Mode,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let mode = self.writing(mode);
        match &self.conn {
            Conn::Single(manager) => {
                let items: Vec<&Check> = batch.iter().collect();
                let mut conn = manager.clone();
                self.call(&mut conn, &items, mode, now).await
            }
            Conn::Sentinel(sentinel) => {
                let items: Vec<&Check> = batch.iter().collect();
                let mut conn = sentinel.master()?;
                self.call(&mut conn, &items, mode, now).await
            }
            Conn::Cluster { conn, .. } => {
                let conn = Conn::cluster(conn)?;
                self.decide_cluster(conn, batch, mode, now).await
            }
        }
    }
}
