//! The request's bytes against prost's, and what each descriptor's cost becomes on the wire.

use super::*;
use crate::wire::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use crate::wire::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use crate::wire::rls::Descriptor;
use proptest::prelude::*;
use prost::Message;

fn descriptor<'a>(pairs: &[(&'a str, &'a str)], cost: u32) -> Descriptor<'a> {
    Descriptor {
        entries: pairs.to_vec(),
        cost,
    }
}

/// What prost makes of the same request: the reference for our hand-written encoder.
fn prost_encoding(domain: &str, descriptors: &[Descriptor<'_>]) -> Vec<u8> {
    let first = descriptors.first().map_or(1, |d| d.cost);
    let uniform = descriptors.iter().all(|d| d.cost == first);
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors: descriptors
            .iter()
            .map(|d| RateLimitDescriptor {
                entries: d
                    .entries
                    .iter()
                    .map(|(k, v)| Entry {
                        key: k.to_string(),
                        value: v.to_string(),
                    })
                    .collect(),
                limit: None,
                hits_addend: (d.cost != 1).then_some(u64::from(d.cost)),
            })
            .collect(),
        hits_addend: if uniform && first != 1 { first } else { 0 },
    }
    .encode_to_vec()
}

/// The message in a body [`encode_request`] framed, its prefix checked.
fn unframed(body: &[u8]) -> &[u8] {
    let (prefix, message) = body.split_at(crate::wire::grpc::FRAME_PREFIX);
    assert_eq!(prefix[0], 0, "uncompressed");
    assert_eq!(
        u32::from_be_bytes(prefix[1..].try_into().unwrap()) as usize,
        message.len()
    );
    message
}

proptest! {
    /// The hand-written encoder produces exactly prost's bytes.
    #[test]
    fn encoding_matches_prost(
        domain in ".{0,20}",
        descriptors in prop::collection::vec(
            (prop::collection::vec((".{0,12}", ".{0,300}"), 0..4), 0u32..5),
            0..4,
        ),
    ) {
        let owned: Vec<Descriptor<'_>> = descriptors
            .iter()
            .map(|(entries, cost)| Descriptor {
                entries: entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
                cost: *cost,
            })
            .collect();
        let body = encode_request(&domain, &owned);
        let reference = prost_encoding(&domain, &owned);
        prop_assert_eq!(unframed(&body), reference.as_slice());
    }
}

fn decode(body: &[u8]) -> RateLimitRequest {
    RateLimitRequest::decode(unframed(body)).unwrap()
}

#[test]
fn the_request_carries_domain_and_entries_in_order() {
    let bytes = encode_request(
        "edge",
        &[
            descriptor(&[("tenant", "acme"), ("path", "/api")], 1),
            descriptor(&[("client", "10.0.0.1")], 1),
        ],
    );
    let request = decode(&bytes);
    assert_eq!(request.domain, "edge");
    assert_eq!(request.hits_addend, 0, "absent means 1");
    let entries: Vec<Vec<(String, String)>> = request
        .descriptors
        .iter()
        .map(|d| {
            d.entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect()
        })
        .collect();
    assert_eq!(
        entries,
        vec![
            vec![
                ("tenant".into(), "acme".into()),
                ("path".into(), "/api".into())
            ],
            vec![("client".into(), "10.0.0.1".into())],
        ]
    );
    assert!(request.descriptors.iter().all(|d| d.hits_addend.is_none()));
}

/// The exact bytes on the wire for a small request, so a change to the encoding is
/// deliberate (fields 1, 2 with nested entries, 3).
#[test]
fn the_wire_format_is_pinned() {
    let bytes = encode_request("d", &[descriptor(&[("k", "v")], 3)]);
    assert_eq!(
        bytes,
        [
            0x00, 0x00, 0x00, 0x00, 0x13, // uncompressed, 19 bytes
            0x0a, 0x01, b'd', // domain = "d"
            0x12, 0x0c, // descriptors[0], 12 bytes
            0x0a, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v', // entries[0] = (k, v)
            0x1a, 0x02, 0x08, 0x03, // hits_addend = UInt64Value(3)
            0x18, 0x03, // request hits_addend = 3
        ]
    );
}

#[test]
fn costs_go_per_descriptor_and_on_the_request_when_uniform() {
    let same = decode(&encode_request(
        "d",
        &[descriptor(&[("a", "1")], 5), descriptor(&[("b", "2")], 5)],
    ));
    assert_eq!(same.hits_addend, 5);
    assert!(same.descriptors.iter().all(|d| d.hits_addend == Some(5)));
    let mixed = decode(&encode_request(
        "d",
        &[descriptor(&[("a", "1")], 5), descriptor(&[("b", "2")], 1)],
    ));
    assert_eq!(mixed.hits_addend, 0);
    assert_eq!(mixed.descriptors[0].hits_addend, Some(5));
    assert_eq!(mixed.descriptors[1].hits_addend, None);
}

#[test]
fn check_only_descriptors_send_an_explicit_zero() {
    let d = [descriptor(&[("k", "v")], 0)];
    let bytes = encode_request("", &d);
    assert_eq!(decode(&bytes).descriptors[0].hits_addend, Some(0));
    assert_eq!(decode(&bytes).hits_addend, 0);
}
