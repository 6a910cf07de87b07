//! The decision script on the wire: the `EVALSHA` command a batch becomes, and the reply
//! it answers, parsed into decisions. `check.lua`'s header is the contract both follow.

use super::failure::Failure;
use super::{key, Inner};
use crate::algorithm::concurrency::HoldOp;
use crate::algorithm::lease::{self, Grant};
use crate::algorithm::{Algorithm, Decision};
use crate::store::Check;
use redis::{ErrorKind, ServerErrorKind, Value};

/// The decision script (see `check.lua`'s header for the KEYS/ARGV contract): one script,
/// written in five files so that each stays readable (contract, exact integers, the rate
/// algorithms, concurrency, the driver), concatenated here in that order.
pub const SCRIPT: &str = concat!(
    include_str!("check.lua"),
    include_str!("check_numbers.lua"),
    include_str!("check_algorithms.lua"),
    include_str!("check_concurrency.lua"),
    include_str!("check_driver.lua"),
);

/// Hits above this never fit any limit (limits and bursts are `u32`), so the script gets
/// at most this many; it keeps the script's arithmetic within exact doubles.
const MAX_SCRIPT_HITS: u64 = 1 << 32;

/// The script's pseudo-algorithm for a `blocked` item: always over, its key never touched.
const BLOCKED: &str = "blk";

/// What the script answers, past its deadline, instead of decisions: it changed nothing.
const LATE: &[u8] = b"late";

/// What one script call does with the items it decides (`ARGV[1]`, see `check.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decide, then write if the request is admitted (all or nothing).
    Commit,
    /// Decide, then write every admitted item even if another item is over
    /// (`--counting per-descriptor`, the reference's default counting).
    Count,
    /// Decide only, write nothing (the first phase across Redis Cluster slots).
    Peek,
    /// Count every item whether it fits or not (a stream-end charge, see
    /// [`crate::store::Store::charge`]).
    Charge,
}

impl Mode {
    /// The word the script reads.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Commit => "commit",
            Mode::Count => "count",
            Mode::Peek => "peek",
            Mode::Charge => "charge",
        }
    }
}

/// When a call runs: the instant the script decides at, and the instant past which it must
/// do nothing. Each is a decimal count of microseconds in Redis's clock, or empty: Redis's
/// `TIME`, and no deadline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// Empty in production (the script reads `TIME`); tests pass a fake clock's time.
    pub now_us: String,
    /// The caller's deadline in Redis's clock (see [`super::deadline`]); empty for none.
    pub not_after_us: String,
}

/// The `EVALSHA` of `batch` in `mode`, with KEYS and ARGV as `check.lua` documents
/// them. The bench runs this same command in `redis-benchmark`.
/// `prefix` goes before every key (see [`key::redis_key`]).
pub fn script_cmd(
    sha: &str,
    prefix: &str,
    batch: &[&Check],
    mode: Mode,
    times: &CallTimes,
) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(sha).arg(batch.len());
    for c in batch {
        cmd.arg(key::redis_key(prefix, &c.key, &c.limit));
    }
    cmd.arg(mode.word())
        .arg(&times.now_us)
        .arg(&times.not_after_us)
        .arg(hold_arg(batch, mode));
    for c in batch {
        let burst = match c.limit.algorithm {
            Algorithm::TokenBucket { burst } => burst.get(),
            _ => 0,
        };
        let algorithm = if c.blocked {
            BLOCKED
        } else {
            key::algorithm_code(c.limit.algorithm)
        };
        let role = match (c.shadow, c.quota_mode) {
            (true, _) => "1",
            (false, true) => "q",
            (false, false) => "0",
        };
        cmd.arg(algorithm)
            .arg(c.limit.requests_per_unit.get())
            .arg(c.limit.window().seconds())
            .arg(burst)
            // Hits of 0 are check-only (the script counts nothing); above 2^32 nothing
            // fits either way.
            .arg(c.hits.min(MAX_SCRIPT_HITS))
            .arg(role)
            // The most hits to grant if admitted; 0: none asked (never for a quota-mode,
            // blocked or concurrency item: they get no lease).
            .arg(
                if c.quota_mode || c.blocked || c.limit.algorithm == Algorithm::Concurrency {
                    0
                } else {
                    c.quota.map_or(0, |q| q.requests.get())
                },
            );
    }
    cmd
}

/// `ARGV[4]`, the call's hold on its concurrency items (one op per call, see
/// [`crate::rls::HoldCall`]): none in a charge, which takes no hold.
fn hold_arg(batch: &[&Check], mode: Mode) -> String {
    let op = batch
        .iter()
        .find_map(|c| c.hold)
        .filter(|_| mode != Mode::Charge);
    match op {
        None => String::new(),
        Some(HoldOp::Acquire(id)) => format!("a:{}", id.as_str()),
        Some(HoldOp::Release(id)) => format!("r:{}", id.as_str()),
    }
}

/// The script's reply: four values per item then Redis's time in µs (the decisions, each
/// with the hits it granted, and that time), or [`LATE`].
fn parse_reply(reply: &[Value], items: usize) -> Result<(Vec<(Decision, u32)>, i64), Failure> {
    if let [Value::BulkString(b)] = reply {
        if b == LATE {
            // Redis got to the call after its caller gave up: as a timeout.
            return Err(Failure::Timeout(
                "Redis ran the call after its deadline and changed nothing".into(),
            ));
        }
    }
    let Some((Value::Int(redis_now), reply)) = reply.split_last() else {
        return Err(Failure::Reply("script answered no time".into()));
    };
    if reply.len() != 4 * items {
        return Err(Failure::Reply(format!(
            "script answered {} values for {items} items",
            reply.len() + 1
        )));
    }
    let decisions = reply
        .chunks_exact(4)
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
            let granted = match &v[3] {
                Value::Int(n) => u32::try_from(*n).map_err(|_| bad_value("granted", &v[3]))?,
                other => return Err(bad_value("granted", other)),
            };
            let decision = Decision {
                allowed,
                remaining,
                reset_in_ns,
                grant: None,
            };
            Ok((decision, granted))
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
    /// One `EVALSHA`; on `NOSCRIPT` (a restarted or flushed Redis) loads the script and
    /// sends it again.
    pub(super) async fn call<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        items: &[&Check],
        mode: Mode,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let prefix = &self.options.key_prefix;
        let cmd = script_cmd(self.script.get_hash(), prefix, items, mode, now);
        let reply: Vec<Value> = match cmd.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.load_async(conn).await?;
                cmd.query_async(conn).await?
            }
            other => other?,
        };
        let (decided, redis_now) = parse_reply(&reply, items.len())?;
        // A grant may be spent until its validity counted from the instant the script
        // decided at (Redis's clock, whole µs), by the same rule as the memory store's.
        let decided_ns = u64::try_from(redis_now).unwrap_or(0).saturating_mul(1_000);
        let decisions = decided
            .into_iter()
            .zip(items)
            .map(|((d, granted), c)| Decision {
                grant: c.quota.filter(|_| granted > 0).map(|q| Grant {
                    hits: granted,
                    valid_until_ns: lease::lease_ends_at(&c.limit, &q, decided_ns),
                }),
                ..d
            })
            .collect();
        if self.clock.get().is_none() {
            // Every answer is also a reading of Redis's clock (see `deadline`).
            self.redis_clock
                .observe(redis_now, self.redis_clock.local_us());
        }
        Ok(decisions)
    }
}

#[cfg(test)]
mod tests;
