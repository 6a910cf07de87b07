//! A request's headers as the host hands them over all at once, so that a header sent
//! twice is seen as such.
//!
//! proxy-wasm's single-header look-up returns only the first value of a header (Envoy's
//! host says so in a TODO), while the upstream receives every value: a client could
//! send `x-cost: 1` then `x-cost: 1000`, be charged 1 and have the application read
//! 1000. [`HeaderMap`] decodes the full list (`proxy_get_header_map_pairs`) once per
//! request and tells one value from several. [`crate::reply::Headers`] writes the same
//! encoding, for the headers the module hands the host.

use std::cell::Cell;

/// What a request carries under one header name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Not there.
    Absent,
    /// Exactly one value, as raw bytes (header values may hold obs-text, not UTF-8).
    One(Vec<u8>),
    /// Two or more values: which one counts is ambiguous, so the caller refuses it.
    Repeated,
}

/// Every header of a request: the host's encoded pairs, checked once and walked in place
/// for each look-up (no vector of spans, no copy of the list).
#[derive(Debug, Clone, Default)]
pub struct HeaderMap {
    bytes: Vec<u8>,
    /// Whether a walk has found `bytes` whole and in the host's encoding, so that
    /// [`HeaderMap::content_type`] (a rejection's, after the rule's look-up) can walk
    /// them without the checks. Only set by a walk that checked these bytes, which
    /// nothing changes afterwards.
    checked: Cell<bool>,
}

/// Two maps are the same when they hold the same list: whether a walk has checked it
/// yet is only a shortcut for the next one.
impl PartialEq for HeaderMap {
    fn eq(&self, other: &HeaderMap) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for HeaderMap {}

/// Calls `each(pair)` for every pair of the proxy-wasm encoding in `bytes`, in order.
/// `None` when the bytes are not in that shape (found only once the walk reaches the
/// fault: a caller must not act on what it saw before); empty bytes are an empty list.
///
/// A field's place is an offset into the text, in 64-bit arithmetic (two u32 lengths and
/// an offset into a slice cannot overflow it): the pair's ends compared with the text's
/// length (one test in the module: the name's end is before the value's), then its two
/// NUL bytes read in place. The fields are sliced only when
/// the caller asks ([`Pair::name`], [`Pair::value`]): most names are told apart by their
/// length alone. A header whose name is not the one looked up costs ~52 instructions;
/// shrinking the text past each field with a check of its own cost ~65, splitting each
/// field and its NUL off separately ~110.
///
/// `CHECK` false skips the ends' test and the NULs, for bytes a walk with `CHECK` true
/// has accepted: the fields are still sliced with [`slice::get`], so even bytes that
/// were never checked could not be read outside themselves.
fn walk<'a, const CHECK: bool>(bytes: &'a [u8], mut each: impl FnMut(Pair<'a>)) -> Option<()> {
    let Some((count, rest)) = bytes.split_first_chunk::<4>() else {
        return bytes.is_empty().then_some(());
    };
    let lengths = (u32::from_le_bytes(*count) as usize).checked_mul(8)?;
    let (lengths, text) = rest.split_at_checked(lengths)?;
    let (mut at, len) = (0u64, text.len() as u64);
    for pair in lengths.chunks_exact(8) {
        // Both lengths in one load: the name's in the low half, the value's in the high.
        let pair = u64::from_le_bytes(*pair.first_chunk::<8>()?);
        let name_end = at + (pair & 0xffff_ffff);
        let value_end = name_end + 1 + (pair >> 32);
        if CHECK {
            // Both ends inside the text (so the casts below are exact), each on a NUL.
            if name_end >= len || value_end >= len {
                return None;
            }
            let (Some(0), Some(0)) = (text.get(name_end as usize), text.get(value_end as usize))
            else {
                return None;
            };
        }
        each(Pair {
            text,
            name_len: pair as u32 as usize,
            at: at as usize,
            name_end: name_end as usize,
            value_end: value_end as usize,
        });
        at = value_end + 1;
    }
    Some(())
}

/// One pair met by [`walk`]: where its fields lie in the text, checked to be inside it.
#[derive(Clone, Copy)]
struct Pair<'a> {
    text: &'a [u8],
    name_len: usize,
    at: usize,
    name_end: usize,
    value_end: usize,
}

impl<'a> Pair<'a> {
    /// The name (empty only if [`walk`] let an impossible place through).
    fn name(&self) -> &'a [u8] {
        self.text.get(self.at..self.name_end).unwrap_or_default()
    }

    /// The value, between the name's NUL and its own.
    fn value(&self) -> &'a [u8] {
        self.text
            .get(self.name_end + 1..self.value_end)
            .unwrap_or_default()
    }
}

/// `a.eq_ignore_ascii_case(b)`, testing plain equality first, eight bytes at a time (a
/// name of eight bytes or more as whole words, the last one overlapping the one before
/// it, so no tail is compared byte by byte): header names are lower case on both sides
/// (Envoy's maps and the configuration's names), so the case is folded only when the
/// bytes differ.
fn same_name(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let same = match (a.last_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(a_last), Some(b_last)) => {
            let mut words = a.chunks_exact(8).zip(b.chunks_exact(8));
            words.all(|(x, y)| word(x) == word(y))
                && u64::from_ne_bytes(*a_last) == u64::from_ne_bytes(*b_last)
        }
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    };
    same || a.eq_ignore_ascii_case(b)
}

/// Eight bytes of a name as one word (`chunks_exact(8)` hands only whole ones).
fn word(bytes: &[u8]) -> Option<u64> {
    bytes.first_chunk::<8>().map(|w| u64::from_ne_bytes(*w))
}

impl HeaderMap {
    /// Checks the proxy-wasm encoding of a header list: a little-endian u32 count, a
    /// (name length, value length) u32 pair per header, then each name and value followed
    /// by a NUL byte. `None` when the bytes are not in that shape. For tests and tools:
    /// the request path takes the host's bytes as they are ([`HeaderMap::from_host`]).
    pub fn decode(bytes: Vec<u8>) -> Option<HeaderMap> {
        walk::<true>(&bytes, |_| {})?;
        Some(HeaderMap {
            bytes,
            checked: Cell::new(true),
        })
    }

    /// The host's encoded list, not checked here: every [`HeaderMap::lookup`] walks the
    /// whole list anyway (a repeat can come last), and checks it on the way, so checking
    /// it first as well would walk it twice.
    pub fn from_host(bytes: Vec<u8>) -> HeaderMap {
        HeaderMap {
            bytes,
            checked: Cell::new(false),
        }
    }

    /// The values under `name` (compared without regard to ASCII case). A list not in
    /// the host's encoding has no header at all ([`Lookup::Absent`]), whatever the walk
    /// met before the fault: the same answer for every name, as when the host cannot
    /// give the list.
    pub fn lookup(&self, name: &str) -> Lookup {
        let name = name.as_bytes();
        let (walked, found) = find::<true>(&self.bytes, |pair| {
            pair.name_len == name.len() && same_name(pair.name(), name)
        });
        self.checked.set(walked);
        found
    }

    /// `lookup("content-type")`, to frame a reply. Once a look-up has checked the list,
    /// walked without the checks and tested with [`is_content_type`] (~30 instructions a
    /// header, where a look-up's walk costs ~52): a rejection reads it after the rule's
    /// own look-up. Never inlined: its caller, which most often answers without it, stays
    /// small enough to inline.
    #[inline(never)]
    pub fn content_type(&self) -> Lookup {
        if !self.checked.get() {
            return self.lookup("content-type");
        }
        find::<false>(&self.bytes, |pair| {
            pair.name_len == 12 && is_content_type(pair.name())
        })
        .1
    }
}

/// The values of the pairs `is_it` picks in the list `bytes`, walked with or without the
/// checks ([`walk`]): one, several or none, and whether the walk accepted the list (a list
/// it refused has no header at all).
fn find<const CHECK: bool>(bytes: &[u8], is_it: impl Fn(&Pair<'_>) -> bool) -> (bool, Lookup) {
    let mut found: Option<&[u8]> = None;
    let mut repeated = false;
    let walked = walk::<CHECK>(bytes, |pair| {
        if is_it(&pair) {
            repeated |= found.is_some();
            found = Some(pair.value());
        }
    });
    let lookup = match (walked, repeated, found) {
        (None, _, _) => Lookup::Absent,
        (Some(()), true, _) => Lookup::Repeated,
        (Some(()), false, Some(v)) => Lookup::One(v.to_vec()),
        (Some(()), false, None) => Lookup::Absent,
    };
    (walked.is_some(), lookup)
}

/// `name.eq_ignore_ascii_case(b"content-type")` in two comparisons: each letter's case
/// bit (0x20) set before comparing with the lower-case name, the `-` compared as it is
/// (its byte with 0x20 set would also match a carriage return).
fn is_content_type(name: &[u8]) -> bool {
    // 0x20 (a space) under each letter of `content-type`, 0 under its `-`.
    const FOLD: [u8; 12] = *b"       \0    ";
    let Some(name) = name.first_chunk::<12>().filter(|_| name.len() == 12) else {
        return false;
    };
    let halves = |w: [u8; 12]| {
        let (head, tail) = w.split_at(8);
        (
            word(head),
            tail.first_chunk::<4>().map(|t| u32::from_ne_bytes(*t)),
        )
    };
    let ((h, t), (fh, ft), (ch, ct)) = (halves(*name), halves(FOLD), halves(*b"content-type"));
    h.zip(fh).map(|(h, f)| h | f) == ch && t.zip(ft).map(|(t, f)| t | f) == ct
}

/// The proxy-wasm encoding of a list of pairs, as [`HeaderMap::decode`] reads it: a count,
/// every (key, value) length, then every key and value each followed by a NUL byte. All
/// integers little-endian u32. The encoder the module used before
/// [`crate::reply::Headers`] wrote its fields in this encoding as they were pushed: kept
/// as the tests' reference, and to encode their inputs.
#[cfg(test)]
pub fn encode_pairs<K: AsRef<str>, V: AsRef<[u8]>>(pairs: &[(K, V)]) -> Vec<u8> {
    let mut out = vec![0; encoded_len(pairs)];
    fill_pairs(pairs, &mut out);
    out
}

/// The length of the encoding of `pairs`.
#[cfg(test)]
fn encoded_len<K: AsRef<str>, V: AsRef<[u8]>>(pairs: &[(K, V)]) -> usize {
    let text: usize = pairs
        .iter()
        .map(|pair| {
            let (k, v) = fields(pair);
            k.len() + v.len() + 2
        })
        .sum();
    4 + 8 * pairs.len() + text
}

/// Writes the encoding of `pairs` into `out`, zeroed and [`encoded_len`] long: the
/// lengths through fixed 8-byte slots, the text through one cursor.
#[cfg(test)]
fn fill_pairs<K: AsRef<str>, V: AsRef<[u8]>>(pairs: &[(K, V)], out: &mut [u8]) {
    let Some((count, rest)) = out.split_first_chunk_mut::<4>() else {
        return;
    };
    *count = (pairs.len() as u32).to_le_bytes();
    let Some((lengths, text)) = rest.split_at_mut_checked(8 * pairs.len()) else {
        return;
    };
    let mut at = 0;
    for (slot, pair) in lengths.chunks_exact_mut(8).zip(pairs) {
        let (k, v) = fields(pair);
        let (k_len, v_len) = slot.split_at_mut(4);
        k_len.copy_from_slice(&(k.len() as u32).to_le_bytes());
        v_len.copy_from_slice(&(v.len() as u32).to_le_bytes());
        // Each field, then its NUL (left as zeroed).
        if let Some(place) = text.get_mut(at..at + k.len()) {
            place.copy_from_slice(k);
        }
        at += k.len() + 1;
        if let Some(place) = text.get_mut(at..at + v.len()) {
            place.copy_from_slice(v);
        }
        at += v.len() + 1;
    }
}

/// `encoded` (a list in the host's encoding) with (`name`, `value`) added last: the bytes
/// of the longer list, without decoding the shorter one. `None`
/// when `encoded` is not in that shape.
pub fn append_pair(encoded: &[u8], name: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let count = u32::from_le_bytes(*encoded.first_chunk::<4>()?) as usize;
    let (lengths, text) = (
        encoded.get(4..4 + 8 * count)?,
        encoded.get(4 + 8 * count..)?,
    );
    let mut out = Vec::with_capacity(encoded.len() + 10 + name.len() + value.len());
    out.extend_from_slice(&(count as u32 + 1).to_le_bytes());
    out.extend_from_slice(lengths);
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(text);
    out.extend_from_slice(name);
    out.push(0);
    out.extend_from_slice(value);
    out.push(0);
    Some(out)
}

/// A pair's key and value as bytes.
#[cfg(test)]
fn fields<K: AsRef<str>, V: AsRef<[u8]>>((k, v): &(K, V)) -> (&[u8], &[u8]) {
    (k.as_ref().as_bytes(), v.as_ref())
}

#[cfg(test)]
mod tests;
