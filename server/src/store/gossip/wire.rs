//! A part as gossip carries it: one chitchat key per counter a node counts on, its value the
//! limit it counts under and the node's part. Versioned by the key's prefix, pinned by a
//! golden test: nodes of two versions must either read each other or ignore each other.
//!
//! Key: `c1:` and the counter's fingerprint in hex (35 bytes). Value:
//! `f|s RPU/PERIOD_S WINDOW A B` separated by spaces (`f` fixed window: A count, B debt;
//! `s` sliding window counter: A previous, B current), about 30 to 50 bytes.

use super::part::Part;
use crate::algorithm::{Algorithm, Limit, NANOS_PER_SECOND};
use crate::store::CounterKey;
use std::fmt::Write;

/// The prefix of every counter key (its version: `c1`).
pub const PREFIX: &str = "c1:";

/// The gossip key of `key`'s counter.
pub fn key(key: &CounterKey) -> String {
    let mut s = String::with_capacity(PREFIX.len() + 32);
    s.push_str(PREFIX);
    s.push_str(&key.hex());
    s
}

/// The counter a gossip key names; `None` for a key of another kind or version.
pub fn parse_key(text: &str) -> Option<CounterKey> {
    CounterKey::from_hex(text.strip_prefix(PREFIX)?)
}

/// The limit a part counts under, as gossip names it: a peer's part counts only towards
/// a counter under the same limit (after a reload changed it, old parts are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    /// Whether it is a sliding window counter (else a fixed window).
    sliding: bool,
    /// `requests_per_unit`.
    rpu: u32,
    /// The window, in seconds.
    period_s: u64,
}

impl Tag {
    /// The tag of `limit`.
    pub fn of(limit: &Limit) -> Tag {
        Tag {
            sliding: limit.algorithm == Algorithm::SlidingWindowCounter,
            rpu: limit.requests_per_unit.get(),
            period_s: limit.period_ns() / NANOS_PER_SECOND,
        }
    }

    /// The window's length in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.period_s.saturating_mul(NANOS_PER_SECOND)
    }
}

/// The value that publishes `part` under `limit`.
pub fn value(limit: &Limit, part: &Part) -> String {
    let tag = Tag::of(limit);
    let (kind, a, b) = match *part {
        Part::Fixed { count, debt, .. } => ('f', count, debt),
        Part::Sliding {
            previous, current, ..
        } => ('s', previous, current),
    };
    let mut s = String::with_capacity(48);
    let _ = write!(
        s,
        "{kind} {}/{} {} {a} {b}",
        tag.rpu,
        tag.period_s,
        part.window()
    );
    s
}

/// A peer's value read back: its limit's tag and its part. `None` when malformed (a
/// peer's bytes are never trusted to be well formed).
pub fn parse_value(text: &str) -> Option<(Tag, Part)> {
    let mut fields = text.split(' ');
    let kind = fields.next()?;
    let (rpu, period_s) = fields.next()?.split_once('/')?;
    let window: u64 = fields.next()?.parse().ok()?;
    let a: u64 = fields.next()?.parse().ok()?;
    let b: u64 = fields.next()?.parse().ok()?;
    if fields.next().is_some() {
        return None;
    }
    let (sliding, part) = match kind {
        "f" => (
            false,
            Part::Fixed {
                window,
                count: a,
                debt: b,
            },
        ),
        "s" => (
            true,
            Part::Sliding {
                window,
                previous: a,
                current: b,
            },
        ),
        _ => return None,
    };
    let tag = Tag {
        sliding,
        rpu: rpu.parse().ok()?,
        period_s: period_s.parse().ok()?,
    };
    Some((tag, part))
}
