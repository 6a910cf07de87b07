//! The decoder against prost, the reference: the same bytes must be refused by both or
//! decoded by both to the same fields.

use super::*;
use crate::wire::proto::envoy::config::core::v3::HeaderValue as ProstHeader;
use crate::wire::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    quota::ExpirationSpecifier, DescriptorStatus, Quota as ProstQuota, RateLimit,
};
use crate::wire::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use proptest::prelude::*;
use prost::Message;

/// A decoded response with owned fields, so that both decoders' results compare.
#[derive(Debug, PartialEq, Eq)]
struct Owned {
    overall_code: i32,
    statuses: Vec<Status>,
    response_headers: Vec<(String, String, Vec<u8>)>,
    request_headers: Vec<(String, String, Vec<u8>)>,
    raw_body: Vec<u8>,
}

fn ours(bytes: &[u8]) -> Option<Owned> {
    let mut r = Response::default();
    decode(bytes, &mut r).ok()?;
    let owned = |h: &[HeaderValue<'_>]| {
        h.iter()
            .map(|h| (h.key.to_string(), h.value.to_string(), h.raw_value.to_vec()))
            .collect()
    };
    Some(Owned {
        overall_code: r.overall_code,
        statuses: r.statuses.to_vec(),
        response_headers: owned(&r.response_headers),
        request_headers: owned(&r.request_headers),
        raw_body: r.raw_body.to_vec(),
    })
}

fn prost(bytes: &[u8]) -> Option<Owned> {
    let r = RateLimitResponse::decode(bytes).ok()?;
    let owned = |h: &[ProstHeader]| {
        h.iter()
            .map(|h| (h.key.clone(), h.value.clone(), h.raw_value.clone()))
            .collect()
    };
    let status = |s: &DescriptorStatus| Status {
        code: s.code,
        current_limit: s.current_limit.as_ref().map(|l| Limit {
            requests_per_unit: l.requests_per_unit,
            unit: l.unit,
            unit_multiplier: l.unit_multiplier,
        }),
        limit_remaining: s.limit_remaining,
        duration_until_reset: s.duration_until_reset.map(|d| (d.seconds, d.nanos)),
        quota: s.quota.as_ref().map(|q| Quota {
            requests: q.requests,
            valid_until: q
                .expiration_specifier
                .map(|ExpirationSpecifier::ValidUntil(t)| (t.seconds, t.nanos)),
        }),
    };
    Some(Owned {
        overall_code: r.overall_code,
        statuses: r.statuses.iter().map(status).collect(),
        response_headers: owned(&r.response_headers_to_add),
        request_headers: owned(&r.request_headers_to_add),
        raw_body: r.raw_body,
    })
}

fn same_as_prost(bytes: &[u8]) -> Result<(), TestCaseError> {
    prop_assert_eq!(ours(bytes), prost(bytes), "bytes {:?}", bytes);
    Ok(())
}

fn key(tag: u32, wire: u8) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(u64::from(tag << 3 | u32::from(wire)), &mut out);
    out
}

fn delimited(tag: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = key(tag, DELIMITED);
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn arb_time() -> impl Strategy<Value = Option<prost_types::Timestamp>> {
    proptest::option::of((any::<i64>(), any::<i32>()))
        .prop_map(|t| t.map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos }))
}

fn arb_status() -> impl Strategy<Value = DescriptorStatus> {
    (
        -1i32..4,
        proptest::option::of((any::<u32>(), 0i32..8, ".{0,4}", any::<Option<u32>>())),
        any::<u32>(),
        arb_time(),
        proptest::option::of((any::<u32>(), arb_time(), ".{0,4}")),
    )
        .prop_map(|(code, limit, remaining, reset, quota)| DescriptorStatus {
            code,
            current_limit: limit.map(|(requests_per_unit, unit, name, unit_multiplier)| {
                RateLimit {
                    name,
                    requests_per_unit,
                    unit,
                    unit_multiplier,
                }
            }),
            limit_remaining: remaining,
            duration_until_reset: reset.map(|t| prost_types::Duration {
                seconds: t.seconds,
                nanos: t.nanos,
            }),
            quota: quota.map(|(requests, valid_until, id)| ProstQuota {
                requests,
                id,
                expiration_specifier: valid_until.map(ExpirationSpecifier::ValidUntil),
            }),
        })
}

fn arb_header() -> impl Strategy<Value = ProstHeader> {
    (
        ".{0,6}",
        ".{0,6}",
        proptest::collection::vec(any::<u8>(), 0..6),
    )
        .prop_map(|(key, value, raw_value)| ProstHeader {
            key,
            value,
            raw_value,
        })
}

fn arb_response() -> impl Strategy<Value = Vec<u8>> {
    (
        -1i32..4,
        proptest::collection::vec(arb_status(), 0..4),
        proptest::collection::vec(arb_header(), 0..3),
        proptest::collection::vec(arb_header(), 0..3),
        proptest::collection::vec(any::<u8>(), 0..8),
        proptest::option::of(arb_status()),
    )
        .prop_map(|(code, statuses, response, request, raw_body, quota)| {
            RateLimitResponse {
                overall_code: code,
                statuses,
                response_headers_to_add: response,
                request_headers_to_add: request,
                raw_body,
                dynamic_metadata: None,
                quota: quota.and_then(|s| s.quota),
            }
            .encode_to_vec()
        })
}

/// Fields of any tag and wire type, nested at random: unknown fields, groups (matched or
/// not), wrong wire types for known tags, messages where scalars belong.
fn arb_soup() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        (1u32..9, any::<u64>()).prop_map(|(t, v)| {
            let mut out = key(t, VARINT);
            prost::encoding::encode_varint(v, &mut out);
            out
        }),
        (1u32..9, proptest::collection::vec(any::<u8>(), 0..6)).prop_map(|(t, v)| delimited(t, &v)),
        (
            1u32..9,
            0u8..8,
            proptest::collection::vec(any::<u8>(), 0..9)
        )
            .prop_map(|(t, w, v)| {
                let mut out = key(t, w);
                out.extend_from_slice(&v);
                out
            }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            (1u32..9, proptest::collection::vec(inner.clone(), 0..4))
                .prop_map(|(t, fields)| delimited(t, &fields.concat())),
            (
                1u32..9,
                0u32..2,
                proptest::collection::vec(inner.clone(), 0..3)
            )
                .prop_map(|(t, off, fields)| {
                    let mut out = key(t, START_GROUP);
                    out.extend(fields.concat());
                    out.extend(key(t + off, END_GROUP));
                    out
                }),
            proptest::collection::vec(inner, 0..4).prop_map(|fields| fields.concat()),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A varint of any length (the one-word reader's up to eight bytes, the byte loop's
    /// longer or cut-off ones), followed by anything, reads as prost reads it: the same
    /// value and the same bytes left, or refused by both.
    #[test]
    fn varints_read_as_prost_reads_them(
        value in any::<u64>(),
        bits in 0u32..64,
        tail in proptest::collection::vec(any::<u8>(), 0..10),
        soup in proptest::collection::vec(prop_oneof![0x80u8..=0xff, any::<u8>()], 0..12),
    ) {
        let mut encoded = Vec::new();
        prost::encoding::encode_varint(value >> bits, &mut encoded);
        encoded.extend_from_slice(&tail);
        for bytes in [encoded, soup] {
            let mut reader = Reader(&bytes);
            let mut theirs: &[u8] = &bytes;
            let expected = prost::encoding::decode_varint(&mut theirs).ok();
            prop_assert_eq!(reader.varint().ok(), expected);
            if expected.is_some() {
                prop_assert_eq!(reader.0, theirs);
            }
        }
    }

    #[test]
    fn well_formed_answers_decode_as_prost_decodes_them(bytes in arb_response()) {
        prop_assert!(ours(&bytes).is_some());
        same_as_prost(&bytes)?;
    }

    #[test]
    fn two_answers_in_a_row_merge_as_prost_merges_them(a in arb_response(), b in arb_response()) {
        same_as_prost(&[a, b].concat())?;
    }

    #[test]
    fn a_status_sent_in_two_halves_merges_as_prost_merges_it(
        a in arb_status(),
        b in arb_status(),
    ) {
        let status = [a.encode_to_vec(), b.encode_to_vec()].concat();
        same_as_prost(&delimited(2, &status))?;
    }

    #[test]
    fn mangled_answers_are_refused_or_read_as_prost_does(
        bytes in arb_response(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        same_as_prost(&bytes[..cut.index(bytes.len() + 1)])?;
        if !bytes.is_empty() {
            let mut changed = bytes.clone();
            changed[at.index(bytes.len())] = byte;
            same_as_prost(&changed)?;
            changed.insert(at.index(bytes.len()), byte);
            same_as_prost(&changed)?;
        }
    }

    #[test]
    fn field_soup_is_refused_or_read_as_prost_does(soup in arb_soup()) {
        same_as_prost(&soup)?;
        // The same fields inside a status, a limit and a quota.
        same_as_prost(&delimited(2, &soup))?;
        same_as_prost(&delimited(2, &delimited(2, &soup)))?;
        same_as_prost(&delimited(2, &delimited(5, &soup)))?;
        same_as_prost(&delimited(6, &soup))?;
    }

    #[test]
    fn random_bytes_are_refused_or_read_as_prost_does(
        bytes in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        same_as_prost(&bytes)?;
    }
}

#[test]
fn groups_nested_past_the_recursion_limit_are_refused_as_prost_refuses_them() {
    for depth in [98, 99, 100, 101] {
        let mut bytes = Vec::new();
        for _ in 0..depth {
            bytes.extend(key(9, START_GROUP));
        }
        for _ in 0..depth {
            bytes.extend(key(9, END_GROUP));
        }
        assert_eq!(ours(&bytes), prost(&bytes), "{depth} groups");
        let nested = delimited(2, &delimited(2, &bytes));
        assert_eq!(ours(&nested), prost(&nested), "{depth} groups in a limit");
    }
}

#[test]
fn long_varints_are_refused_as_prost_refuses_them() {
    for tail in [0x00, 0x01, 0x02, 0x7f, 0x80] {
        let mut bytes = vec![0x08];
        bytes.extend([0xff; 9]);
        bytes.push(tail);
        assert_eq!(ours(&bytes), prost(&bytes), "tenth byte {tail:#x}");
    }
}

#[test]
fn a_typical_answer_is_read_without_copying_it() {
    let bytes = RateLimitResponse {
        overall_code: 1,
        statuses: vec![DescriptorStatus {
            code: 1,
            limit_remaining: 7,
            ..DescriptorStatus::default()
        }],
        raw_body: b"body".to_vec(),
        ..RateLimitResponse::default()
    }
    .encode_to_vec();
    let mut r = Response::default();
    decode(&bytes, &mut r).expect("decodes");
    assert!(!r.statuses.spilled());
    assert_eq!(r.statuses[0].limit_remaining, 7);
    assert!(std::ptr::eq(
        r.raw_body.as_ptr(),
        bytes[bytes.len() - 4..].as_ptr()
    ));
}
