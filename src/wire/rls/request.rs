//! The `ShouldRateLimit` request on the wire: [`encode_request`] writes it field by
//! field, the same bytes prost would (a property test compares them).

use super::Descriptor;
use crate::wire::grpc;

/// The encoded `ShouldRateLimit` request, framed as a gRPC call's body
/// (its prefix written by [`grpc::end_frame`]).
///
/// Written field by field rather than through prost's message types: those would copy
/// every key and value into owned strings first, on every request. The bytes are the
/// same as prost's (a property test compares them).
pub fn encode_request(domain: &str, descriptors: &[Descriptor<'_>]) -> Vec<u8> {
    // Quirk: a descriptor's own `hits_addend` overrides the request's, but services that
    // predate it only read the request's. When every descriptor has the same cost we set
    // both, so either kind of service counts it; 0 (absent) means 1.
    let first = descriptors.first().map_or(1, |d| d.cost);
    let uniform = descriptors.iter().all(|d| d.cost == first);
    let request_hits = if uniform && first != 1 { first } else { 0 };

    // Sized exactly first, then written in one pass: no growth, and no vector of sizes
    // (those of the first two descriptors, most calls' all, are kept on the stack).
    let mut len = bytes_field_len(domain.len());
    let mut sizes = [0usize; 2];
    for (i, d) in descriptors.iter().enumerate() {
        let size = descriptor_len(d);
        if let Some(kept) = sizes.get_mut(i) {
            *kept = size;
        }
        len += delimited_len(size);
    }
    if request_hits != 0 {
        len += 1 + varint_len(u64::from(request_hits));
    }
    let mut body = vec![0; grpc::FRAME_PREFIX + len];
    let mut out = Out(body.get_mut(grpc::FRAME_PREFIX..).unwrap_or_default());
    out.string_field(1, domain.as_bytes());
    for (i, d) in descriptors.iter().enumerate() {
        let size = sizes.get(i).copied().unwrap_or_else(|| descriptor_len(d));
        out.tag(2, LENGTH_DELIMITED);
        out.varint(size as u64);
        for (e, value) in d.keys.iter().zip(d.values) {
            let key = e.key.as_bytes();
            out.tag(1, LENGTH_DELIMITED);
            out.varint(entry_len(key, value) as u64);
            out.string_field(1, key);
            out.string_field(2, value);
        }
        if d.cost == 0 {
            // Quirk: present with value 0 is "check only" (envoyproxy/ratelimit's
            // meaning), unlike the request's 0, which means 1. proto3 leaves the zero
            // value out, so the wrapper is present and empty.
            out.tag(3, LENGTH_DELIMITED);
            out.varint(0);
        } else if d.cost != 1 {
            // google.protobuf.UInt64Value { value = 1 }
            out.tag(3, LENGTH_DELIMITED);
            out.varint((1 + varint_len(u64::from(d.cost))) as u64);
            out.tag(1, VARINT);
            out.varint(u64::from(d.cost));
        }
    }
    if request_hits != 0 {
        out.tag(3, VARINT);
        out.varint(u64::from(request_hits));
    }
    debug_assert!(out.0.is_empty(), "the request was sized exactly");
    grpc::end_frame(&mut body);
    body
}

/// Protobuf wire types.
const VARINT: u8 = 0;
const LENGTH_DELIMITED: u8 = 2;

/// What is left to write of a body sized exactly beforehand: each write is a bounds check
/// on a slice held in locals, where `Vec::push` loaded, checked and stored its length
/// for every byte. (A write past the end, which the sizing rules out, is dropped; the
/// property test against prost would catch it.)
struct Out<'a>(&'a mut [u8]);

impl Out<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        if let Some((first, rest)) = std::mem::take(&mut self.0).split_first_mut() {
            *first = b;
            self.0 = rest;
        }
    }

    fn bytes(&mut self, s: &[u8]) {
        let rest = std::mem::take(&mut self.0);
        if s.len() <= rest.len() {
            let (head, rest) = rest.split_at_mut(s.len());
            head.copy_from_slice(s);
            self.0 = rest;
        }
    }

    fn tag(&mut self, field: u8, wire_type: u8) {
        self.byte(field << 3 | wire_type);
    }

    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.byte((n as u8) | 0x80);
            n >>= 7;
        }
        self.byte(n as u8);
    }

    /// A string field (its UTF-8 bytes), left out when empty as proto3 does.
    fn string_field(&mut self, field: u8, s: &[u8]) {
        if !s.is_empty() {
            self.tag(field, LENGTH_DELIMITED);
            self.varint(s.len() as u64);
            self.bytes(s);
        }
    }
}

/// The bytes of `n` as a varint: compares for the small lengths of every request, rather
/// than counting its bits.
fn varint_len(n: u64) -> usize {
    if n < 1 << 7 {
        1
    } else if n < 1 << 14 {
        2
    } else {
        (64 - n.leading_zeros() as usize).div_ceil(7)
    }
}

fn bytes_field_len(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 + varint_len(n as u64) + n
    }
}

/// A length-delimited field of `n` bytes with its key and length.
fn delimited_len(n: usize) -> usize {
    1 + varint_len(n as u64) + n
}

fn entry_len(key: &[u8], value: &[u8]) -> usize {
    bytes_field_len(key.len()) + bytes_field_len(value.len())
}

fn descriptor_len(d: &Descriptor<'_>) -> usize {
    let entries: usize = d
        .keys
        .iter()
        .zip(d.values)
        .map(|(e, v)| delimited_len(entry_len(e.key.as_bytes(), v)))
        .sum();
    let hits = if d.cost == 0 {
        2
    } else if d.cost != 1 {
        delimited_len(1 + varint_len(u64::from(d.cost)))
    } else {
        0
    };
    entries + hits
}

#[cfg(test)]
mod tests;
