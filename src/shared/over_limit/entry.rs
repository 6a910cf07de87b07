//! One over-limit cache entry: a remembered denial of one set of descriptors, as plain
//! data, the decisions on it (does it reject this request, what does its reply say), and
//! its encoding. The cache ([`super::OverLimitCache`]) reads, decides with these and
//! writes by compare-and-swap.

use crate::reply::{Headers, Standing};
use smallvec::SmallVec;

/// The hits of each descriptor of a set, in order: inline for two, as a request's global
/// rules are (no heap for the look-up every global request makes).
pub type Costs = SmallVec<[u32; 2]>;

/// The over descriptors of a denial: inline for two (no heap for a cached rejection).
pub type Overs = SmallVec<[Over; 2]>;

/// The most bytes one entry takes, the service's body and headers included.
pub const ENTRY_MAX: usize = 512;

/// Fixed part of an entry: fingerprint, until, cost count, over count, body length,
/// header count.
pub(super) const FIXED_LEN: usize = 16 + 8 + 1 + 1 + 2 + 1;

/// Bytes of one cost.
const COST_LEN: usize = 4;

/// Bytes of one [`Over`].
const OVER_LEN: usize = 1 + 4 + 8;

/// A descriptor the service said was over, as the reply from the cache shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Over {
    /// Its position among the call's global descriptors.
    pub position: u8,
    /// The limit the service reported (`x-ratelimit-limit`).
    pub limit: u32,
    /// Host-clock instant (ns) at which the service said it resets.
    pub reset_at_ns: u64,
}

/// One remembered denial of a whole set of descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Which set (see [`crate::shared::placement::PlacementKey::denial`]).
    pub fingerprint: u128,
    /// Host-clock instant (ns) until which the denial is trusted: the earliest reset of
    /// the descriptors the service said were over, and no later than the trust cap.
    pub until_ns: u64,
    /// The hits each descriptor of the set was asked for, in order (the smallest denied
    /// for this set).
    pub costs: Costs,
    /// The enforced descriptors the service said were over, for the reply.
    pub over: Overs,
    /// The service's `raw_body` (empty: the configured body).
    pub body: Vec<u8>,
    /// The service's response headers that passed the safety check.
    pub headers: Vec<(String, String)>,
}

impl Denial {
    /// Whether this denial rejects a request of the same set asking `costs` at `now_ns`:
    /// it is still trusted, and each descriptor asks at least the hits denied (a costlier
    /// request is denied whenever a cheaper one is).
    pub fn covers(&self, costs: &[u32], now_ns: u64) -> bool {
        now_ns < self.until_ns
            && costs.len() == self.costs.len()
            && costs.iter().zip(&self.costs).all(|(c, denied)| c >= denied)
    }

    /// Where each over descriptor stands at `now_ns`, counting down to the reset the
    /// service reported (not to [`Denial::until_ns`]: `retry-after` says when the service
    /// said to come back). `rule` maps a position to the rule's index.
    ///
    /// The entry keeps the limit, not its unit: the draft-10 `RateLimit-Policy` of a
    /// reply from the cache has `q` but no `w`.
    pub fn standings(&self, rule: impl Fn(u8) -> Option<usize>, now_ns: u64) -> Vec<Standing> {
        self.over
            .iter()
            .filter_map(|o| {
                let left = o.reset_at_ns.saturating_sub(now_ns);
                Some(Standing {
                    rule: rule(o.position)?,
                    limit: o.limit,
                    window_s: None,
                    remaining: 0,
                    reset_ns: Some(left),
                    next_ns: Some(left),
                    allowed: false,
                    retry_ns: Some(left),
                    shadow: false,
                })
            })
            .collect()
    }

    /// The service's headers, as a reply takes them.
    pub fn reply_headers(&self) -> Headers {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Whether this denial says at least what `other` (of the same set) says: as cheap
    /// for every descriptor, and trusted as long.
    pub(super) fn dominates(&self, other: &Denial) -> bool {
        self.until_ns >= other.until_ns
            && self.costs.len() == other.costs.len()
            && self.costs.iter().zip(&other.costs).all(|(a, b)| a <= b)
    }

    /// Bytes this entry takes in its set.
    pub fn encoded_len(&self) -> usize {
        FIXED_LEN
            + COST_LEN * self.costs.len()
            + OVER_LEN * self.over.len()
            + self.body.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| 4 + k.len() + v.len())
                .sum::<usize>()
    }

    /// Whether the entry fits the bound of one entry ([`ENTRY_MAX`]).
    pub fn fits(&self) -> bool {
        let count = usize::from(u8::MAX);
        self.encoded_len() <= ENTRY_MAX
            && self.headers.len() <= count
            && self.costs.len() <= count
            && self.over.len() <= count
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.until_ns.to_le_bytes());
        // Counts and lengths fit: `fits` is checked before an entry is stored.
        out.push(self.costs.len() as u8);
        for c in &self.costs {
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.push(self.over.len() as u8);
        for o in &self.over {
            out.push(o.position);
            out.extend_from_slice(&o.limit.to_le_bytes());
            out.extend_from_slice(&o.reset_at_ns.to_le_bytes());
        }
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

/// The first entry of a set that is `wanted`, read as [`decode_set`] reads them (up to
/// the first that is not whole): a look-up stops at the one it wants, with no vector of
/// the others.
pub fn find_entry(mut bytes: &[u8], wanted: impl Fn(&Denial) -> bool) -> Option<Denial> {
    while !bytes.is_empty() {
        let (denial, rest) = decode_entry(bytes)?;
        if wanted(&denial) {
            return Some(denial);
        }
        bytes = rest;
    }
    None
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

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    fn count(&mut self) -> Option<u8> {
        self.array::<1>().map(|[n]| n)
    }

    fn string(&mut self) -> Option<String> {
        let len = u16::from_le_bytes(self.array()?);
        String::from_utf8(self.take(usize::from(len))?.to_vec()).ok()
    }
}

fn decode_entry(bytes: &[u8]) -> Option<(Denial, &[u8])> {
    let mut r = Reader(bytes);
    let fingerprint = u128::from_le_bytes(r.array()?);
    let until_ns = r.u64()?;
    let costs = (0..r.count()?)
        .map(|_| r.u32())
        .collect::<Option<Costs>>()?;
    let over = (0..r.count()?)
        .map(|_| {
            Some(Over {
                position: r.count()?,
                limit: r.u32()?,
                reset_at_ns: r.u64()?,
            })
        })
        .collect::<Option<Overs>>()?;
    let body_len = u16::from_le_bytes(r.array()?);
    let body = r.take(usize::from(body_len))?.to_vec();
    let headers = (0..r.count()?)
        .map(|_| Some((r.string()?, r.string()?)))
        .collect::<Option<Vec<_>>>()?;
    let denial = Denial {
        fingerprint,
        until_ns,
        costs,
        over,
        body,
        headers,
    };
    Some((denial, r.0))
}
