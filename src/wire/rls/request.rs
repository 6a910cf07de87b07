//! The `ShouldRateLimit` request on the wire: [`encode_request`] writes it field by
//! field, the same bytes prost would (a property test compares them).

use super::Descriptor;
use crate::wire::grpc;

/// The encoded `ShouldRateLimit` request, framed as a gRPC call's body
/// ([`grpc::start_frame`]).
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

    let sizes: Vec<usize> = descriptors.iter().map(descriptor_len).collect();
    let mut out = grpc::start_frame(
        bytes_field_len(domain.len())
            + sizes
                .iter()
                .map(|&n| 1 + varint_len(n as u64) + n)
                .sum::<usize>()
            + 6,
    );
    string_field(&mut out, 1, domain);
    for (d, &size) in descriptors.iter().zip(&sizes) {
        tag(&mut out, 2, LENGTH_DELIMITED);
        varint(&mut out, size as u64);
        for &(key, value) in &d.entries {
            tag(&mut out, 1, LENGTH_DELIMITED);
            varint(&mut out, entry_len(key, value) as u64);
            string_field(&mut out, 1, key);
            string_field(&mut out, 2, value);
        }
        if d.cost == 0 {
            // Quirk: present with value 0 is "check only" (envoyproxy/ratelimit's
            // meaning), unlike the request's 0, which means 1. proto3 leaves the zero
            // value out, so the wrapper is present and empty.
            tag(&mut out, 3, LENGTH_DELIMITED);
            varint(&mut out, 0);
        } else if d.cost != 1 {
            // google.protobuf.UInt64Value { value = 1 }
            tag(&mut out, 3, LENGTH_DELIMITED);
            varint(&mut out, (1 + varint_len(u64::from(d.cost))) as u64);
            tag(&mut out, 1, VARINT);
            varint(&mut out, u64::from(d.cost));
        }
    }
    if request_hits != 0 {
        tag(&mut out, 3, VARINT);
        varint(&mut out, u64::from(request_hits));
    }
    grpc::end_frame(&mut out);
    out
}

/// Protobuf wire types.
const VARINT: u8 = 0;
const LENGTH_DELIMITED: u8 = 2;

fn tag(out: &mut Vec<u8>, field: u8, wire_type: u8) {
    out.push(field << 3 | wire_type);
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_len(n: u64) -> usize {
    (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
}

/// A string field, left out when empty as proto3 does.
fn string_field(out: &mut Vec<u8>, field: u8, s: &str) {
    if !s.is_empty() {
        tag(out, field, LENGTH_DELIMITED);
        varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

fn bytes_field_len(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 + varint_len(n as u64) + n
    }
}

fn entry_len(key: &str, value: &str) -> usize {
    bytes_field_len(key.len()) + bytes_field_len(value.len())
}

fn descriptor_len(d: &Descriptor<'_>) -> usize {
    let entries: usize = d
        .entries
        .iter()
        .map(|&(k, v)| {
            let n = entry_len(k, v);
            1 + varint_len(n as u64) + n
        })
        .sum();
    let hits = if d.cost == 0 {
        2
    } else if d.cost != 1 {
        let inner = 1 + varint_len(u64::from(d.cost));
        1 + varint_len(inner as u64) + inner
    } else {
        0
    };
    entries + hits
}

#[cfg(test)]
mod tests;
