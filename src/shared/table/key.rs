//! The table's shared-data keys (format version 2, pinned by tests).
//!
//! A slot's key depends on its index only, never on the table's size: a table of any size
//! uses a prefix of the same keys, so changing `max_buckets` creates keys only when the
//! table grows past the largest size this Envoy has had (keys can never be deleted).

/// Prefix of every key of the table.
const PREFIX: &[u8] = b"floodgate/v2/";

/// The key counting how many slot keys exist (`0..count`), as a little-endian u32.
pub const SLOTS_KEY: &[u8] = b"floodgate/v2/slots";

/// A slot's shared-data key, built on the stack: this runs twice per request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SlotKey {
    buf: [u8; SlotKey::CAPACITY],
    len: usize,
}

impl SlotKey {
    /// The prefix and a u32 in decimal fit with room to spare.
    const CAPACITY: usize = 32;

    /// The key of slot `index`: `floodgate/v2/<index>`.
    pub fn new(index: u32) -> SlotKey {
        SlotKey::with_prefix(PREFIX, index)
    }

    /// The key `<prefix><index>`, for another fixed table of keys in the same shared
    /// data (the over-limit cache). `prefix` is ours, at most 22 bytes.
    pub fn with_prefix(prefix: &[u8], index: u32) -> SlotKey {
        let mut key = SlotKey {
            buf: [0; SlotKey::CAPACITY],
            len: 0,
        };
        key.push(prefix);
        key.push_number(index);
        key
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn push_number(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[start..]);
    }
}

impl std::fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self))
    }
}

/// The key as bytes, the form the host takes: shared-data keys need no UTF-8 check (the
/// ABI passes a pointer and a length), and checking one cost ~100 instructions per call.
impl std::ops::Deref for SlotKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The number of slot keys [`SLOTS_KEY`] records; 0 for a value we cannot read (every
/// key is then checked again, which is always safe).
pub fn decode_count(value: &[u8]) -> u32 {
    value.try_into().map_or(0, u32::from_le_bytes)
}

/// What [`SLOTS_KEY`] stores for `count` slot keys.
pub fn encode_count(count: u32) -> [u8; 4] {
    count.to_le_bytes()
}

/// What a table of `size` slots mixes into the fingerprints it stores, so that a bucket
/// written by a table of another size is never taken for one of ours: changing
/// `max_buckets` moves every bucket's home slot, and this makes the restart that implies
/// exact instead of leaving some buckets found and others not. A fixed bijective mix
/// (SplitMix64's finaliser) of the size, in both halves.
pub fn salt(size: u32) -> u128 {
    let mut z = u64::from(size).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    u128::from(z) << 64 | u128::from(z.rotate_left(32))
}
