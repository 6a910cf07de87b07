//! The request's bytes against prost's, and what each descriptor's cost becomes on the wire.

use super::*;
use crate::wire::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use crate::wire::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use crate::wire::rls::Descriptor;
use proptest::prelude::*;
use prost::Message;

/// A descriptor's keys and values, owned for a test to borrow as a [`Descriptor`].
struct Owned {
    keys: Vec<crate::config::Entry>,
    values: Vec<Vec<u8>>,
    cost: u32,
}

impl Owned {
    fn new<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)], cost: u32) -> Owned {
        Owned {
            keys: pairs
                .iter()
                .map(|(k, _)| crate::config::Entry {
                    key: k.as_ref().to_owned(),
                    source: crate::config::Source::Path,
                })
                .collect(),
            values: pairs
                .iter()
                .map(|(_, v)| v.as_ref().as_bytes().to_vec())
                .collect(),
            cost,
        }
    }

    fn borrow(&self) -> Descriptor<'_> {
        Descriptor {
            keys: &self.keys,
            values: &self.values,
            cost: self.cost,
        }
    }
}

/// `encode_request` of descriptors given as (key, value) pairs and costs.
fn encode(domain: &str, descriptors: &[(&[(&str, &str)], u32)]) -> Vec<u8> {
    let owned: Vec<Owned> = descriptors
        .iter()
        .map(|(pairs, cost)| Owned::new(pairs, *cost))
        .collect();
    let borrowed: Vec<Descriptor<'_>> = owned.iter().map(Owned::borrow).collect();
    encode_request(domain, &borrowed)
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
                    .keys
                    .iter()
                    .zip(d.values)
                    .map(|(k, v)| Entry {
                        key: k.key.clone(),
                        value: String::from_utf8(v.clone()).unwrap(),
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
        let owned: Vec<Owned> = descriptors
            .iter()
            .map(|(entries, cost)| Owned::new(entries, *cost))
            .collect();
        let borrowed: Vec<Descriptor<'_>> = owned.iter().map(Owned::borrow).collect();
        let body = encode_request(&domain, &borrowed);
        let reference = prost_encoding(&domain, &borrowed);
        prop_assert_eq!(unframed(&body), reference.as_slice());
    }
}

fn decode(body: &[u8]) -> RateLimitRequest {
    RateLimitRequest::decode(unframed(body)).unwrap()
}

#[test]
fn the_request_carries_domain_and_entries_in_order() {
    let bytes = encode(
        "edge",
        &[
            (&[("tenant", "acme"), ("path", "/api")], 1),
            (&[("client", "10.0.0.1")], 1),
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
    let bytes = encode("d", &[(&[("k", "v")], 3)]);
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
    let same = decode(&encode("d", &[(&[("a", "1")], 5), (&[("b", "2")], 5)]));
    assert_eq!(same.hits_addend, 5);
    assert!(same.descriptors.iter().all(|d| d.hits_addend == Some(5)));
    let mixed = decode(&encode("d", &[(&[("a", "1")], 5), (&[("b", "2")], 1)]));
    assert_eq!(mixed.hits_addend, 0);
    assert_eq!(mixed.descriptors[0].hits_addend, Some(5));
    assert_eq!(mixed.descriptors[1].hits_addend, None);
}

#[test]
fn check_only_descriptors_send_an_explicit_zero() {
    let bytes = encode("", &[(&[("k", "v")], 0)]);
    assert_eq!(decode(&bytes).descriptors[0].hits_addend, Some(0));
    assert_eq!(decode(&bytes).hits_addend, 0);
}
