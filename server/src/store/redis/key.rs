//! The Redis key of a counter, and the Cluster slot it lands on.
//!
//! ```text
//! fg:v1:{<tag>}:<alg>:<requests_per_unit>:<unit>:<burst>:<counter key>
//! fg:v1:{c073397bf850560d}:tb:100:s:20:3:web|6:tenant=4:acme
//! ```
//!
//! - `fg:v1:` names the owner and the format version: a change to the format or to any
//!   script's state layout bumps it, so old and new replicas never misread each other's
//!   state (old keys simply expire).
//! - `{<tag>}` is the Redis Cluster hash tag: 16 hex digits of a 64-bit FNV-1a hash of the
//!   counter key. Only the tag decides the slot, so every key of one counter (under any
//!   limit) lands on one slot, while different counters spread over the cluster. It is a
//!   hash rather than the counter key itself because a client-supplied `}` would cut a tag
//!   short.
//! - `<alg>:<rpu>:<unit>:<burst>` is the limit (`fw`, `tb`, `swl`, `swc`; `s m h d w`; the
//!   burst is `-` outside the token bucket). A changed limit therefore starts a fresh
//!   counter, as in the memory store, and two replicas briefly running different
//!   configurations during a rollout count separately instead of resetting each other.
//! - The counter key ([`CounterKey`], length-prefixed, unambiguous) comes last, readable.
//!
//! Golden tests below pin the format; changing it means bumping the version.

use crate::algorithm::{Algorithm, Limit, Unit};
use crate::store::CounterKey;
use std::fmt::Write;

/// The key format version written into every key.
pub const VERSION: &str = "v1";

/// The Redis key holding `counter` under `limit`.
pub fn redis_key(counter: &CounterKey, limit: &Limit) -> String {
    let c = counter.as_str();
    let mut k = String::with_capacity(c.len() + 48);
    let _ = write!(
        k,
        "fg:{VERSION}:{{{:016x}}}:{}:{}:{}:",
        fnv1a64(c.as_bytes()),
        algorithm_code(limit.algorithm),
        limit.requests_per_unit,
        unit_code(limit.unit)
    );
    match limit.algorithm {
        Algorithm::TokenBucket { burst } => {
            let _ = write!(k, "{burst}:");
        }
        _ => k.push_str("-:"),
    }
    k.push_str(c);
    k
}

/// The algorithm's code in keys and in the script's arguments.
pub fn algorithm_code(a: Algorithm) -> &'static str {
    match a {
        Algorithm::FixedWindow => "fw",
        Algorithm::TokenBucket { .. } => "tb",
        Algorithm::SlidingWindowLog => "swl",
        Algorithm::SlidingWindowCounter => "swc",
    }
}

fn unit_code(u: Unit) -> &'static str {
    match u {
        Unit::Second => "s",
        Unit::Minute => "m",
        Unit::Hour => "h",
        Unit::Day => "d",
        Unit::Week => "w",
    }
}

/// 64-bit FNV-1a: stable across versions and machines, which the key format needs.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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
    use std::num::NonZeroU32;

    fn limit(rpu: u32, unit: Unit, algorithm: Algorithm) -> Limit {
        Limit {
            requests_per_unit: NonZeroU32::new(rpu).unwrap(),
            unit,
            algorithm,
        }
    }

    #[test]
    fn key_format_is_pinned() {
        let counter = CounterKey::new("web", [("tenant", "acme")]);
        let burst = NonZeroU32::new(20).unwrap();
        assert_eq!(
            redis_key(
                &counter,
                &limit(100, Unit::Second, Algorithm::TokenBucket { burst })
            ),
            "fg:v1:{c073397bf850560d}:tb:100:s:20:3:web|6:tenant=4:acme"
        );
        assert_eq!(
            redis_key(&counter, &limit(5, Unit::Week, Algorithm::FixedWindow)),
            "fg:v1:{c073397bf850560d}:fw:5:w:-:3:web|6:tenant=4:acme"
        );
        assert_eq!(
            redis_key(
                &counter,
                &limit(7, Unit::Minute, Algorithm::SlidingWindowLog)
            ),
            "fg:v1:{c073397bf850560d}:swl:7:m:-:3:web|6:tenant=4:acme"
        );
        let braces = CounterKey::new("d", [("k", "}{x}")]);
        assert_eq!(
            redis_key(
                &braces,
                &limit(1, Unit::Hour, Algorithm::SlidingWindowCounter)
            ),
            "fg:v1:{9a2036ed33f20cd8}:swc:1:h:-:1:d|1:k=4:}{x}"
        );
    }

    #[test]
    fn every_key_of_a_counter_shares_a_slot_and_counters_spread() {
        let counter = CounterKey::new("web", [("tenant", "acme")]);
        let a = redis_key(&counter, &limit(1, Unit::Second, Algorithm::FixedWindow));
        let b = redis_key(&counter, &limit(9, Unit::Day, Algorithm::SlidingWindowLog));
        assert_eq!(slot(&a), slot(&b));
        let slots: std::collections::HashSet<u16> = (0..100)
            .map(|i| {
                let c = CounterKey::new("web", [("tenant", i.to_string().as_str())]);
                slot(&redis_key(
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
}
