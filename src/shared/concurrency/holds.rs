//! The slot math of one concurrency key, as one value compare-and-swapped in shared data.
//!
//! A key's value is a short list of (deadline, count) pairs: `count` slots held by
//! requests that must have ended by `deadline` (milliseconds of the host clock). A hold
//! is added to the pair of its deadline, `now + max_duration` rounded **up** to a
//! multiple of `max_duration / 8` (rounded up), so that requests admitted within the
//! same eighth of the duration share a pair and the list stays bounded: every live
//! deadline lies in `(now, now + 9/8 × max_duration)`, which holds at most 9 multiples of
//! the width; [`MAX_PAIRS`] leaves one spare for clocks read a little apart by workers.
//!
//! - **Acquire** drops the pairs whose deadline passed (reclaimed: their holders
//!   vanished, or outlived `max_duration`), admits when the slots still held plus the
//!   cost fit `max`, and adds the cost to the pair of its deadline.
//! - **Release** subtracts the cost from the pair of the deadline it was added to. If
//!   that pair is gone it was reclaimed already: nothing is freed, so a late release
//!   never frees another request's slot.
//!
//! A hold therefore counts from its admission until its release or its deadline,
//! whichever comes first, and never longer: nothing leaks, whatever happened to its
//! holder.

/// How many pairs the duration is cut into: the granularity of deadlines.
pub const BUCKETS: u64 = 8;

/// The most pairs one key keeps (see the module documentation for why 9 suffice).
pub const MAX_PAIRS: usize = 10;

/// Bytes of a stored value before its pairs: the key's fingerprint and its rule's tag.
const HEADER_LEN: usize = 20;

/// Bytes of one stored pair: deadline u64, count u32, little-endian.
const PAIR_LEN: usize = 12;

/// The longest stored value.
pub const MAX_VALUE_LEN: usize = HEADER_LEN + MAX_PAIRS * PAIR_LEN;

/// The deadline of a hold taken at `now_ms` for at most `duration_ms`: `now + duration`,
/// rounded up to a multiple of the width (`duration / BUCKETS`, rounded up). Never
/// before `now + duration`: a hold is never reclaimed early.
pub fn deadline(now_ms: u64, duration_ms: u64) -> u64 {
    let width = duration_ms.div_ceil(BUCKETS).max(1);
    now_ms
        .saturating_add(duration_ms)
        .div_ceil(width)
        .saturating_mul(width)
}

/// What one key holds: its fingerprint, its rule's tag, and its (deadline, count) pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holds {
    /// The key's identity (see [`crate::shared::placement::PlacementKey::concurrency`]).
    pub fingerprint: u128,
    /// Which rule the key is of ([`rule_tag`]), so that whoever reclaims its expired
    /// holds can count them for that rule.
    pub tag: u32,
    pairs: [(u64, u32); MAX_PAIRS],
    len: usize,
}

/// What an acquire decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// Admitted: the cost was added to the pair of this deadline.
    Held {
        /// The deadline identifying the hold, for its release.
        deadline_ms: u64,
        /// Slots held after this one (this one included).
        in_flight: u64,
    },
    /// Rejected: nothing was added.
    Full {
        /// Slots held (after the reclaim).
        in_flight: u64,
    },
}

impl Holds {
    /// A key with nothing held.
    pub fn empty(fingerprint: u128, tag: u32) -> Holds {
        Holds {
            fingerprint,
            tag,
            pairs: [(0, 0); MAX_PAIRS],
            len: 0,
        }
    }

    /// The live pairs.
    pub fn pairs(&self) -> &[(u64, u32)] {
        &self.pairs[..self.len]
    }

    /// Slots held, expired pairs included until [`Holds::reclaim`] drops them.
    pub fn in_flight(&self) -> u64 {
        self.pairs().iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// Drops the pairs whose deadline is not after `now_ms`; the slots they held.
    pub fn reclaim(&mut self, now_ms: u64) -> u64 {
        let mut reclaimed = 0;
        let mut kept = 0;
        for i in 0..self.len {
            let (deadline, n) = self.pairs[i];
            if deadline <= now_ms {
                reclaimed += u64::from(n);
            } else {
                self.pairs[kept] = (deadline, n);
                kept += 1;
            }
        }
        self.len = kept;
        reclaimed
    }

    /// Admits `cost` slots (0 counts as 1) at `now_ms` if they fit `max` with those held
    /// (call [`Holds::reclaim`] first), adding them to the pair of their deadline.
    pub fn acquire(&mut self, now_ms: u64, duration_ms: u64, max: u32, cost: u32) -> Acquired {
        let cost = cost.max(1);
        let held = self.in_flight();
        if held + u64::from(cost) > u64::from(max) {
            return Acquired::Full { in_flight: held };
        }
        let wanted = deadline(now_ms, duration_ms);
        let at = match self.pairs().iter().position(|&(d, _)| d == wanted) {
            Some(i) => i,
            None if self.len < MAX_PAIRS => {
                self.pairs[self.len] = (wanted, 0);
                self.len += 1;
                self.len - 1
            }
            // Cannot happen with one clock (see the module documentation); with clocks
            // far apart, the latest pair takes the hold: it is live, and the release
            // finds it by the deadline returned.
            None => self.latest(),
        };
        let (deadline_ms, n) = &mut self.pairs[at];
        *n = n.saturating_add(cost);
        Acquired::Held {
            deadline_ms: *deadline_ms,
            in_flight: held + u64::from(cost),
        }
    }

    /// Frees `cost` slots (0 counts as 1) of the hold of `deadline_ms`; the slots freed:
    /// 0 when that pair is gone (reclaimed already).
    pub fn release(&mut self, deadline_ms: u64, cost: u32) -> u32 {
        let Some(i) = self.pairs().iter().position(|&(d, _)| d == deadline_ms) else {
            return 0;
        };
        let freed = cost.max(1).min(self.pairs[i].1);
        self.pairs[i].1 -= freed;
        if self.pairs[i].1 == 0 {
            self.pairs[i] = self.pairs[self.len - 1];
            self.len -= 1;
        }
        freed
    }

    fn latest(&self) -> usize {
        let mut best = 0;
        for (i, &(d, _)) in self.pairs().iter().enumerate() {
            if d > self.pairs[best].0 {
                best = i;
            }
        }
        best
    }

    /// The stored bytes: fingerprint u128, tag u32, then each pair, little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.len * PAIR_LEN);
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.tag.to_le_bytes());
        for &(d, n) in self.pairs() {
            out.extend_from_slice(&d.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
        }
        out
    }

    /// The holds in `bytes`; `None` for a free slot (empty, or anything we cannot read:
    /// a value of the wrong shape holds nothing we could free).
    pub fn decode(bytes: &[u8]) -> Option<Holds> {
        if bytes.len() < HEADER_LEN || (bytes.len() - HEADER_LEN) % PAIR_LEN != 0 {
            return None;
        }
        let (header, rest) = bytes.split_at(HEADER_LEN);
        let count = rest.len() / PAIR_LEN;
        if count > MAX_PAIRS {
            return None;
        }
        let mut holds = Holds::empty(
            u128::from_le_bytes(header[..16].try_into().ok()?),
            u32::from_le_bytes(header[16..].try_into().ok()?),
        );
        for pair in rest.chunks_exact(PAIR_LEN) {
            let d = u64::from_le_bytes(pair[..8].try_into().ok()?);
            let n = u32::from_le_bytes(pair[8..].try_into().ok()?);
            if n > 0 {
                holds.pairs[holds.len] = (d, n);
                holds.len += 1;
            }
        }
        Some(holds)
    }
}

/// A rule's tag in the keys it holds: a hash of its name (FNV-1a), the same in every
/// VM and configuration that has the rule.
pub fn rule_tag(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
