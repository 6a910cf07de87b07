//! The Redis key of a counter, and the Cluster slot it lands on.
//!
//! ```text
//! fg:v2:{<fingerprint>}:<alg>:<requests_per_unit>:<unit>:<burst>
//! fg:v2:{de6897ffa21354441125f911bb38c2f1}:tb:100:s:20
//! ```
//!
//! - `fg:v2:` names the owner and the format version: a change to the format or to any
//!   script's state layout bumps it, so old and new replicas never misread each other's
//!   state (old keys simply expire). v1 embedded the descriptor's values, so a client
//!   sending a 1 MiB value made a 1 MiB Redis key; v2 keys are under 70 bytes whatever
//!   clients send.
//! - `{<fingerprint>}` is the counter's [`CounterKey`] (32 hex digits of a SHA-256-based
//!   fingerprint of the domain and the descriptor's entries) and is also the Redis Cluster
//!   hash tag: only the tag decides the slot, so every key of one counter (under any limit)
//!   lands on one slot, while different counters spread over the cluster. Hex digits never
//!   contain `}`, so no client input can cut the tag short.
//! - `<alg>:<rpu>:<unit>:<burst>` is the limit (`fw`, `tb`, `swl`, `swc`; `s m h d w mo
//!   y`, preceded by the `unit_multiplier` when it is not 1, e.g. `90m` for a 90-minute
//!   window, so a plain unit's key is what it always was; the burst is `-` outside the
//!   token bucket). A changed limit therefore starts a fresh
//!   counter, as in the memory store, and two replicas briefly running different
//!   configurations during a rollout count separately instead of resetting each other.
//!
//! - A prefix (`--redis-key-prefix`, the reference's `CACHE_KEY_PREFIX`), when one is
//!   given, goes before `fg:`.
//!
//! The descriptor itself is no longer readable in the key; an operator finds a client's
//! counter by computing its fingerprint. Golden tests below pin the format; changing it
//! means bumping the version.

use crate::algorithm::{Algorithm, Limit, Unit};
use crate::store::CounterKey;
use std::fmt::Write;

/// The key format version written into every key.
pub const VERSION: &str = "v2";

/// The most bytes a key prefix may have (`--redis-key-prefix`).
pub const MAX_PREFIX: usize = 64;

/// Whether `prefix` may go before every key: at most [`MAX_PREFIX`] printable ASCII
/// bytes other than space, `{` and `}` (a brace would move the Cluster hash tag).
pub fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX
        && prefix
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}')
}

/// The Redis key holding `counter` under `limit`, after `prefix` (the reference's
/// `CACHE_KEY_PREFIX`: deployments sharing one Redis under different prefixes count
/// apart; empty by default). The prefix is outside the hash tag, so it never moves a
/// counter's Cluster slot.
pub fn redis_key(prefix: &str, counter: &CounterKey, limit: &Limit) -> String {
    let mut k = String::with_capacity(64 + prefix.len());
    k.push_str(prefix);
    let _ = write!(
        k,
        "fg:{VERSION}:{{{}}}:{}:{}:",
        counter.hex(),
        algorithm_code(limit.algorithm),
        limit.requests_per_unit,
    );
    if limit.unit_multiplier.get() > 1 {
        let _ = write!(k, "{}", limit.unit_multiplier);
    }
    let _ = write!(k, "{}:", unit_code(limit.unit));
    match limit.algorithm {
        Algorithm::TokenBucket { burst } => {
            let _ = write!(k, "{burst}");
        }
        _ => k.push('-'),
    }
    k
}

/// The algorithm's code in keys and in the script's arguments.
pub fn algorithm_code(a: Algorithm) -> &'static str {
    match a {
        Algorithm::FixedWindow => "fw",
        Algorithm::TokenBucket { .. } => "tb",
        Algorithm::SlidingWindowLog => "swl",
        Algorithm::SlidingWindowCounter => "swc",
        Algorithm::Concurrency => "cc",
    }
}

fn unit_code(u: Unit) -> &'static str {
    match u {
        Unit::Second => "s",
        Unit::Minute => "m",
        Unit::Hour => "h",
        Unit::Day => "d",
        Unit::Week => "w",
        Unit::Month => "mo",
        Unit::Year => "y",
    }
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, modulo 16384, as
/// Redis computes it. Used to group a request's keys by slot.
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = key
        .find('{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16(hashed) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::{NonZeroU16, NonZeroU32};

    fn limit(rpu: u32, unit: Unit, algorithm: Algorithm) -> Limit {
        Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap(),
            unit,
            unit_multiplier: NonZeroU16::MIN,
            algorithm,
        }
    }

    #[test]
    fn key_format_is_pinned() {
        let counter = CounterKey::new("web", [("tenant", "acme")]);
        let burst = NonZeroU32::new(20).unwrap();
        assert_eq!(
            redis_key(
                "",
                &counter,
                &limit(100, Unit::Second, Algorithm::TokenBucket { burst })
            ),
            "fg:v2:{de6897ffa21354441125f911bb38c2f1}:tb:100:s:20"
        );
        assert_eq!(
            redis_key("", &counter, &limit(5, Unit::Week, Algorithm::FixedWindow)),
            "fg:v2:{de6897ffa21354441125f911bb38c2f1}:fw:5:w:-"
        );
        assert_eq!(
            redis_key(
                "",
                &counter,
                &limit(7, Unit::Minute, Algorithm::SlidingWindowLog)
            ),
            "fg:v2:{de6897ffa21354441125f911bb38c2f1}:swl:7:m:-"
        );
        let ninety_minutes = Limit {
            unit_multiplier: NonZeroU16::new(90).unwrap(),
            ..limit(7, Unit::Minute, Algorithm::FixedWindow)
        };
        assert_eq!(
            redis_key("", &counter, &ninety_minutes),
            "fg:v2:{de6897ffa21354441125f911bb38c2f1}:fw:7:90m:-"
        );
        let braces = CounterKey::new("d", [("k", "}{x}")]);
        assert_eq!(
            redis_key(
                "",
                &braces,
                &limit(1, Unit::Hour, Algorithm::SlidingWindowCounter)
            ),
            "fg:v2:{b621df8584c50b42725f53f9591a7866}:swc:1:h:-"
        );
    }

    #[test]
    fn the_key_is_as_long_whatever_the_value() {
        let burst = NonZeroU32::new(20).unwrap();
        let l = limit(100, Unit::Second, Algorithm::TokenBucket { burst });
        let big = "v".repeat(1 << 20);
        let long = redis_key("", &CounterKey::new("web", [("tenant", big.as_str())]), &l);
        let short = redis_key("", &CounterKey::new("web", [("tenant", "a")]), &l);
        assert_eq!(long.len(), short.len());
        assert_eq!(long.len(), 52);
    }

    #[test]
    fn every_key_of_a_counter_shares_a_slot_and_counters_spread() {
        let counter = CounterKey::new("web", [("tenant", "acme")]);
        let a = redis_key(
            "",
            &counter,
            &limit(1, Unit::Second, Algorithm::FixedWindow),
        );
        let b = redis_key(
            "",
            &counter,
            &limit(9, Unit::Day, Algorithm::SlidingWindowLog),
        );
        assert_eq!(slot(&a), slot(&b));
        let slots: std::collections::HashSet<u16> = (0..100)
            .map(|i| {
                let c = CounterKey::new("web", [("tenant", i.to_string().as_str())]);
                slot(&redis_key(
                    "",
                    &c,
                    &limit(1, Unit::Second, Algorithm::FixedWindow),
                ))
            })
            .collect();
        assert!(slots.len() > 90, "{} distinct slots", slots.len());
    }

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("foo{{bar}}zap"), crc16(b"{bar") % 16384);
        assert_eq!(
            slot("foo{}{bar}"),
            crc16(b"foo{}{bar}") % 16384,
            "an empty tag hashes the whole key"
        );
    }

    #[test]
    fn a_prefix_goes_before_the_key_and_leaves_the_slot_alone() {
        let key = CounterKey::new("web", [("user", "a")]);
        let l = limit(5, Unit::Second, Algorithm::FixedWindow);
        let plain = redis_key("", &key, &l);
        let prefixed = redis_key("team-a:", &key, &l);
        assert_eq!(prefixed, format!("team-a:{plain}"));
        assert_eq!(slot(&prefixed), slot(&plain));
        assert!(valid_prefix("") && valid_prefix("team-a:") && valid_prefix(&"x".repeat(64)));
        for bad in ["{", "}", "a b", "é", &"x".repeat(65)] {
            assert!(!valid_prefix(bad), "{bad:?}");
        }
    }
}
