//! The over-limit cache: denials of the rate limit service, remembered in shared data so
//! that every worker of an Envoy rejects a matching request without asking again.
//!
//! When the service answers OVER_LIMIT for a global rule's descriptor with a
//! `duration_until_reset`, the descriptor is over until `now + duration` for requests of
//! that cost. An entry ([`Denial`]) records the smallest cost denied and that instant; a
//! later request matching it is rejected from the cache only if its cost is at least that
//! cost and the instant has not passed ([`Denial::covers`]). A cheaper request asks the
//! service: a denial at cost 10 says nothing about cost 1. This is safe because a service
//! reports `duration_until_reset` no later than the instant a request of the denied cost
//! would be admitted, and a costlier request is denied whenever a cheaper one is.
//!
//! Memory is fixed like the bucket table's ([`crate::table`]): `sets` shared-data keys
//! created before traffic, each holding at most [`WAYS`] entries of at most
//! [`ENTRY_MAX`] bytes. An entry is keyed by a 128-bit fingerprint of the domain, rule
//! and descriptor values, never the client's bytes. Looking a descriptor up is one read
//! of its set. An expired entry is free; when a set is full of live entries, the one that
//! expires first is evicted (counted). The service's `raw_body` and response headers (only
//! those [`crate::service_headers`] let through) are kept in the entry so that the cached
//! reply is the service's; a denial whose body and headers do not fit is not cached
//! (counted).
//!
//! Format (version 2, pinned by tests): key `floodgate/v2/olc/<index>`; key
//! `floodgate/v2/olc/sets` holds how many set keys exist (u32 little-endian). A set's
//! value is its entries one after the other, each little-endian: fingerprint u128, until
//! (host clock, ns) u64, smallest cost denied u32, limit u32, body length u16 and body,
//! header count u8 and each header as name length u16, name, value length u16, value.

use crate::response::{Headers, Standing};
use crate::sets::{edit, Edit, Sets};
use crate::shared::{SharedData, StoreError};
use std::num::NonZeroU32;

/// Entries one set holds.
pub const WAYS: u32 = 4;

/// The most bytes one entry takes, the service's body and headers included.
pub const ENTRY_MAX: usize = 512;

/// Fixed part of an entry: fingerprint, until, cost, limit, body length, header count.
const FIXED_LEN: usize = 16 + 8 + 4 + 4 + 2 + 1;

/// Prefix of the cache's set keys.
const PREFIX: &[u8] = b"floodgate/v2/olc/";

/// The key counting how many set keys exist.
pub const SETS_KEY: &str = "floodgate/v2/olc/sets";

/// Attempts at writing a set when other workers write it at the same time.
const WRITE_ATTEMPTS: u32 = 4;

/// One remembered denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Which descriptor (see [`crate::descriptor::over_limit_fingerprint`]).
    pub fingerprint: u128,
    /// Host-clock instant (ns) until which the denial holds.
    pub until_ns: u64,
    /// The smallest cost the service denied.
    pub min_cost: u32,
    /// The limit the service reported (`x-ratelimit-limit`).
    pub limit: u32,
    /// The service's `raw_body` (empty: the configured body).
    pub body: Vec<u8>,
    /// The service's response headers that passed the safety check.
    pub headers: Vec<(String, String)>,
}

impl Denial {
    /// Whether this denial rejects a request of `cost` at `now_ns`: the instant has not
    /// passed and the cost is at least the one denied.
    pub fn covers(&self, cost: u32, now_ns: u64) -> bool {
        now_ns < self.until_ns && cost >= self.min_cost
    }

    /// Where the limit stands at `now_ns`, as the service's status said it, counting down.
    ///
    /// The entry keeps the limit, not its unit: the draft-10 `RateLimit-Policy` of a
    /// reply from the cache has `q` but no `w`.
    pub fn standing(&self, rule: usize, now_ns: u64) -> Standing {
        let left = self.until_ns.saturating_sub(now_ns);
        Standing {
            rule,
            limit: self.limit,
            window_s: None,
            remaining: 0,
            reset_ns: Some(left),
            next_ns: Some(left),
            allowed: false,
            retry_ns: Some(left),
            shadow: false,
        }
    }

    /// The service's headers, as a reply takes them.
    pub fn reply_headers(&self) -> Headers {
        self.headers
            .iter()
            .map(|(k, v)| (k.clone().into(), v.clone()))
            .collect()
    }

    /// Whether this denial says at least what `other` says: as cheap and as long.
    fn dominates(&self, other: &Denial) -> bool {
        self.min_cost <= other.min_cost && self.until_ns >= other.until_ns
    }

    /// Bytes this entry takes in its set.
    pub fn encoded_len(&self) -> usize {
        FIXED_LEN
            + self.body.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| 4 + k.len() + v.len())
                .sum::<usize>()
    }

    /// Whether the entry fits the bound of one entry ([`ENTRY_MAX`]).
    pub fn fits(&self) -> bool {
        self.encoded_len() <= ENTRY_MAX && self.headers.len() <= usize::from(u8::MAX)
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.until_ns.to_le_bytes());
        out.extend_from_slice(&self.min_cost.to_le_bytes());
        out.extend_from_slice(&self.limit.to_le_bytes());
        // Lengths fit: `fits` is checked before an entry is stored.
        out.extend_from_slice(&(self.body.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(self.headers.len() as u8);
        for (k, v) in &self.headers {
            for s in [k, v] {
                out.extend_from_slice(&(s.len() as u16).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
}

/// The entries of a set's value, in order; decoding stops at the first entry that cannot
/// be read (what follows it carries nothing we could trust).
pub fn decode_set(mut bytes: &[u8]) -> Vec<Denial> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        match decode_entry(bytes) {
            Some((denial, rest)) => {
                out.push(denial);
                bytes = rest;
            }
            None => break,
        }
    }
    out
}

/// What a set of `entries` stores.
pub fn encode_set(entries: &[Denial]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.iter().map(Denial::encoded_len).sum());
    for e in entries {
        e.encode_into(&mut out);
    }
    out
}

/// A cursor over little-endian fields.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn string(&mut self) -> Option<String> {
        let len = u16::from_le_bytes(self.array()?);
        String::from_utf8(self.take(usize::from(len))?.to_vec()).ok()
    }
}

fn decode_entry(bytes: &[u8]) -> Option<(Denial, &[u8])> {
    let mut r = Reader(bytes);
    let fingerprint = u128::from_le_bytes(r.array()?);
    let until_ns = u64::from_le_bytes(r.array()?);
    let min_cost = u32::from_le_bytes(r.array()?);
    let limit = u32::from_le_bytes(r.array()?);
    let body_len = u16::from_le_bytes(r.array()?);
    let body = r.take(usize::from(body_len))?.to_vec();
    let [count] = r.array()?;
    let headers = (0..count)
        .map(|_| Some((r.string()?, r.string()?)))
        .collect::<Option<Vec<_>>>()?;
    let denial = Denial {
        fingerprint,
        until_ns,
        min_cost,
        limit,
        body,
        headers,
    };
    Some((denial, r.0))
}

/// What storing a denial did (gave up: the denial is not remembered).
pub use crate::sets::Stored;

/// The cache's shape: how many sets of [`WAYS`] entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimitCache {
    sets: Sets,
}

impl OverLimitCache {
    /// A cache of at least `slots` entries (rounded up to whole sets).
    pub fn new(slots: NonZeroU32) -> OverLimitCache {
        OverLimitCache {
            sets: Sets::new(PREFIX, SETS_KEY, slots.get().div_ceil(WAYS)),
        }
    }

    /// Number of set keys.
    pub fn sets(&self) -> u32 {
        self.sets.sets()
    }

    fn home(&self, fingerprint: u128) -> crate::table::SlotKey {
        self.sets.home(fingerprint)
    }

    /// Creates the set keys before traffic, as [`crate::table::Table::prepare`] does for
    /// the bucket table. Returns the number of keys created.
    pub fn prepare(&self, store: &impl SharedData) -> Result<u32, StoreError> {
        self.sets.prepare(store)
    }

    /// The live denial that rejects a request of `cost` for `fingerprint` at `now_ns`, if
    /// there is one. One shared-data read.
    pub fn lookup(
        &self,
        store: &impl SharedData,
        fingerprint: u128,
        cost: u32,
        now_ns: u64,
    ) -> Result<Option<Denial>, StoreError> {
        let Some(read) = store.get(&self.home(fingerprint))? else {
            return Ok(None);
        };
        Ok(decode_set(&read.value)
            .into_iter()
            .find(|d| d.fingerprint == fingerprint && d.covers(cost, now_ns)))
    }

    /// Remembers `denial` (which must [`fit`](Denial::fits)) at `now_ns`: expired entries
    /// of its set are dropped, a live entry for the same descriptor is replaced unless it
    /// already says at least as much, and when the set is full the entry expiring first
    /// is evicted.
    pub fn store(
        &self,
        store: &impl SharedData,
        denial: Denial,
        now_ns: u64,
    ) -> Result<Stored, StoreError> {
        let key = self.home(denial.fingerprint);
        let edited = edit(store, &key, WRITE_ATTEMPTS, |value| {
            match merge(decode_set(value), &denial, now_ns) {
                Some((entries, evicted)) => Edit::Write(encode_set(&entries), evicted),
                None => Edit::Keep(false),
            }
        })?;
        Ok(edited.into())
    }
}

/// The set `entries` becomes with `denial` in it at `now_ns`, and whether a live entry
/// was evicted; `None` when nothing needs writing (a live entry already dominates it).
fn merge(entries: Vec<Denial>, denial: &Denial, now_ns: u64) -> Option<(Vec<Denial>, bool)> {
    let mut live: Vec<Denial> = Vec::with_capacity(WAYS as usize);
    for e in entries.into_iter().filter(|e| e.until_ns > now_ns) {
        if e.fingerprint == denial.fingerprint {
            if e.dominates(denial) {
                return None;
            }
        } else {
            live.push(e);
        }
    }
    let mut evicted = false;
    while live.len() >= WAYS as usize {
        let first = live
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.until_ns)
            .map_or(0, |(i, _)| i);
        live.remove(first);
        evicted = true;
    }
    live.push(denial.clone());
    Some((live, evicted))
}

#[cfg(test)]
mod tests;
