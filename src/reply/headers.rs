//! Header fields as the host takes them: one buffer in the proxy-wasm pair encoding,
//! written field by field.
//!
//! The encoding is a little-endian u32 count, a (name length, value length) pair of u32
//! per field, then each name and value followed by a NUL byte (what
//! [`crate::request::header_map::HeaderMap`] reads). A reply's fields used to be a list of
//! strings, one allocation per value, encoded into another buffer when sent; here they
//! are encoded as they are pushed, numbers written as digits in place, so a rejection
//! allocates one buffer for all of them and the host reads it as it is
//! ([`Headers::encoded`]). Pushing a field moves the text already there up by its eight
//! bytes of lengths: one `memory.copy` of a few dozen bytes.

use floodgate_common::decimal::push_decimal_bytes;
use std::fmt;

/// The encoding of no field at all: a zero count.
const EMPTY: [u8; 4] = [0; 4];

/// A list of header fields (response headers, or a gRPC reply's metadata) kept in the
/// host's encoding: mostly fixed names, sometimes names a rate limit service sent.
///
/// Empty, it holds no buffer at all (no allocation for the many replies and passes that
/// carry none). Two lists are equal when they hold the same fields in the same order.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers {
    /// Empty, or the whole encoding of the fields pushed (never a zero count).
    bytes: Vec<u8>,
}

impl Headers {
    /// No field, and no buffer yet.
    pub const fn new() -> Headers {
        Headers { bytes: Vec::new() }
    }

    /// No field, with room for `bytes` bytes of encoding (the count, the lengths and the
    /// text): one allocation for a reply whose size is known roughly.
    pub fn with_capacity(bytes: usize) -> Headers {
        Headers {
            bytes: Vec::with_capacity(bytes),
        }
    }

    /// Whether there is no field.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.bytes
            .first_chunk::<4>()
            .map_or(0, |count| u32::from_le_bytes(*count) as usize)
    }

    /// Adds `name: value` last.
    pub fn push(&mut self, name: &str, value: &str) {
        self.push_bytes(name.as_bytes(), value.as_bytes());
    }

    /// Adds `name: n` last, `n` in decimal (the bytes of `n.to_string()`), the digits
    /// written in place.
    pub fn push_decimal(&mut self, name: &str, n: u64) {
        self.push_with(name.as_bytes(), |out| push_decimal_bytes(out, n));
    }

    /// Adds a field last whose name and value are known whole (a service's, or one
    /// moved from another list).
    pub fn push_bytes(&mut self, name: &[u8], value: &[u8]) {
        self.push_with(name, |out| out.extend_from_slice(value));
    }

    /// Adds a field named `name` last whose value is what `value` appends to the buffer
    /// it is handed (and nothing else: it must not touch what is there). For values
    /// written in place (numbers, the structured fields' lists); the value must be text a
    /// header field can hold, which every caller writes. Measured in the module, appending
    /// piece by piece costs less than growing the buffer once and copying each piece
    /// into a zeroed place (about 90 instructions a field either way, a few more that
    /// way), and less again than a batch of fields pushed at once (about 100 a field).
    pub fn push_with(&mut self, name: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
        self.push_parts(|out| out.extend_from_slice(name), value);
    }

    /// Adds a field last, its name and its value each written by its own writer (a rate
    /// limit service's names are lower-cased on the way in).
    pub fn push_parts(
        &mut self,
        name: impl FnOnce(&mut Vec<u8>),
        value: impl FnOnce(&mut Vec<u8>),
    ) {
        if self.bytes.is_empty() {
            self.bytes.extend_from_slice(&EMPTY);
        }
        let count = self.len();
        // The new field's lengths go after the others': the text moves up to make room.
        let (slot, end) = (4 + 8 * count, self.bytes.len());
        self.bytes.extend_from_slice(&[0; 8]);
        self.bytes.copy_within(slot..end, slot + 8);
        let name_at = self.bytes.len();
        name(&mut self.bytes);
        let name_len = self.bytes.len() - name_at;
        self.bytes.push(0);
        let value_at = self.bytes.len();
        value(&mut self.bytes);
        let value_len = self.bytes.len() - value_at;
        self.bytes.push(0);
        let pair = (name_len as u64) | ((value_len as u64) << 32);
        if let Some(place) = self.bytes.get_mut(slot..slot + 8) {
            place.copy_from_slice(&pair.to_le_bytes());
        }
        self.set_count(count + 1);
    }

    /// Writes the count of fields.
    fn set_count(&mut self, count: usize) {
        if let Some(c) = self.bytes.first_chunk_mut::<4>() {
            *c = (count as u32).to_le_bytes();
        }
    }

    /// Adds every field of `other` after these, in its order (taken whole when there are
    /// none here yet, which is most often so).
    pub fn append(&mut self, other: Headers) {
        if self.is_empty() {
            *self = other;
            return;
        }
        for (name, value) in other.pairs() {
            self.push_bytes(name, value);
        }
    }

    /// The fields in the host's encoding, as `proxy_send_local_response` and
    /// `proxy_http_call` take them (a zero count when there are none).
    pub fn encoded(&self) -> &[u8] {
        if self.bytes.is_empty() {
            &EMPTY
        } else {
            &self.bytes
        }
    }

    /// The encoding, owned (a call's headers, kept beyond the list).
    pub fn into_encoded(self) -> Vec<u8> {
        if self.bytes.is_empty() {
            EMPTY.to_vec()
        } else {
            self.bytes
        }
    }

    /// Each field's name and value, in order, as bytes (what the host's calls take).
    pub fn pairs(&self) -> Pairs<'_> {
        let count = self.len();
        let lengths = self.bytes.get(4..4 + 8 * count).unwrap_or_default();
        let text = self.bytes.get(4 + 8 * count..).unwrap_or_default();
        Pairs {
            lengths: lengths.chunks_exact(8),
            text,
        }
    }

    /// Each field's name and value, in order, as text (for tests, logs and the
    /// over-limit cache): every field was pushed as text.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let text = |bytes| std::str::from_utf8(bytes).unwrap_or_default();
        self.pairs()
            .map(move |(name, value)| (text(name), text(value)))
    }

    /// The value of the first field named `name` (compared exactly: names here are
    /// lower case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// The fields of a [`Headers`], in order: names and values as bytes.
pub struct Pairs<'a> {
    lengths: std::slice::ChunksExact<'a, u8>,
    text: &'a [u8],
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let pair = u64::from_le_bytes(*self.lengths.next()?.first_chunk::<8>()?);
        let (name_len, value_len) = ((pair & 0xffff_ffff) as usize, (pair >> 32) as usize);
        let name = self.text.get(..name_len)?;
        let value = self.text.get(name_len + 1..name_len + 1 + value_len)?;
        self.text = self
            .text
            .get(name_len + value_len + 2..)
            .unwrap_or_default();
        Some((name, value))
    }
}

/// Listed as pairs of text, as the list of strings they replace was.
impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A list of (name, value) pairs, pushed in order (tests and the rare lists built whole).
impl<'a> FromIterator<(&'a str, &'a str)> for Headers {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Headers {
        let mut headers = Headers::new();
        for (name, value) in pairs {
            headers.push(name, value);
        }
        headers
    }
}

#[cfg(test)]
mod tests;
