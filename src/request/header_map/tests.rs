use super::*;
use proptest::prelude::*;

/// The host's encoding of `pairs`.
pub fn encode(pairs: &[(&str, &[u8])]) -> Vec<u8> {
    encode_pairs(pairs)
}

#[test]
fn one_repeated_and_absent_headers_are_told_apart() {
    let map = HeaderMap::decode(encode(&[
        (":path", b"/"),
        ("x-cost", b"1"),
        ("x-tenant-id", b"t\xff"),
        ("x-cost", b"1000"),
    ]))
    .unwrap();
    assert_eq!(map.lookup("x-cost"), Lookup::Repeated);
    assert_eq!(map.lookup("x-tenant-id"), Lookup::One(b"t\xff".to_vec()));
    assert_eq!(map.lookup("X-Tenant-Id"), Lookup::One(b"t\xff".to_vec()));
    assert_eq!(map.lookup("x-other"), Lookup::Absent);
    assert_eq!(map.lookup(":path"), Lookup::One(b"/".to_vec()));
}

#[test]
fn empty_values_and_empty_lists_decode() {
    let map = HeaderMap::decode(encode(&[("x-a", b"")])).unwrap();
    assert_eq!(map.lookup("x-a"), Lookup::One(Vec::new()));
    let none = HeaderMap::decode(encode(&[])).unwrap();
    assert_eq!(none.lookup("x-a"), Lookup::Absent);
    assert_eq!(HeaderMap::decode(Vec::new()).unwrap(), HeaderMap::default());
}

#[test]
fn malformed_encodings_are_refused_not_misread() {
    let good = encode(&[("x-a", b"v"), ("x-b", b"w")]);
    for cut in 1..good.len() {
        assert_eq!(
            HeaderMap::decode(good[..cut].to_vec()),
            None,
            "cut at {cut}"
        );
    }
    let mut huge = good.clone();
    huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(HeaderMap::decode(huge), None);
    let mut no_nul = good;
    let last = no_nul.len() - 1;
    no_nul[last] = b'x';
    assert_eq!(HeaderMap::decode(no_nul), None);
}

#[test]
fn an_empty_list_is_a_zero_count() {
    assert_eq!(encode_pairs::<&str, &str>(&[]), [0, 0, 0, 0]);
}

#[test]
fn pairs_are_lengths_then_nul_terminated_text() {
    let encoded = encode_pairs(&[("a", "bc"), ("", "d")]);
    let mut expected = vec![2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    expected.extend_from_slice(b"a\0bc\0\0d\0");
    assert_eq!(encoded, expected);
    assert_eq!(
        encoded.capacity(),
        encoded.len(),
        "sized exactly, no regrowth"
    );
}

proptest! {
    #[test]
    fn encoded_pairs_decode_back(pairs in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,20}"), 0..8)) {
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let map = HeaderMap::decode(encode_pairs(&borrowed));
        prop_assert!(map.is_some());
        let map = map.unwrap();
        for (k, v) in &pairs {
            let count = pairs.iter().filter(|(other, _)| other == k).count();
            let expected = if count == 1 { Lookup::One(v.as_bytes().to_vec()) } else { Lookup::Repeated };
            prop_assert_eq!(map.lookup(k), expected);
        }
    }
}

#[test]
fn a_list_from_the_host_is_checked_by_each_lookup() {
    let good = encode(&[("x-a", b"v"), ("x-a", b"w"), ("x-b", b"u")]);
    let map = HeaderMap::from_host(good.clone());
    assert_eq!(map.lookup("x-a"), Lookup::Repeated);
    assert_eq!(map.lookup("x-b"), Lookup::One(b"u".to_vec()));
    for cut in 1..good.len() {
        let map = HeaderMap::from_host(good[..cut].to_vec());
        // A fault after the header (even after its repeat) still hides it.
        assert_eq!(map.lookup("x-a"), Lookup::Absent, "cut at {cut}");
        assert_eq!(map.lookup("x-b"), Lookup::Absent, "cut at {cut}");
    }
    assert_eq!(
        HeaderMap::from_host(Vec::new()).lookup("x-a"),
        Lookup::Absent
    );
}

/// The walk as it was written first, field by field: the one-slice walk must accept,
/// refuse and read exactly what it did.
fn reference_lookup(bytes: &[u8], name: &str) -> Lookup {
    let Some(pairs) = reference_pairs(bytes) else {
        return Lookup::Absent;
    };
    let mut found = pairs
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()));
    match (found.next(), found.next()) {
        (None, _) => Lookup::Absent,
        (Some((_, v)), None) => Lookup::One(v.to_vec()),
        (Some(_), Some(_)) => Lookup::Repeated,
    }
}

/// The pairs as the field-by-field walk read them (`None`: refused).
fn reference_pairs(bytes: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    fn nul_terminated(text: &[u8], len: usize) -> Option<(&[u8], &[u8])> {
        match (text.get(..len), text.get(len..)) {
            (Some(field), Some([0, rest @ ..])) => Some((field, rest)),
            _ => None,
        }
    }
    let Some((count, rest)) = bytes.split_first_chunk::<4>() else {
        return bytes.is_empty().then(Vec::new);
    };
    let lengths = (u32::from_le_bytes(*count) as usize).checked_mul(8)?;
    if lengths > rest.len() {
        return None;
    }
    let (lengths, mut text) = rest.split_at(lengths);
    let mut out = Vec::new();
    for pair in lengths.chunks_exact(8) {
        let name_len = u32::from_le_bytes(pair[..4].try_into().ok()?) as usize;
        let value_len = u32::from_le_bytes(pair[4..].try_into().ok()?) as usize;
        let (n, rest) = nul_terminated(text, name_len)?;
        let (v, rest) = nul_terminated(rest, value_len)?;
        out.push((n, v));
        text = rest;
    }
    Some(out)
}

proptest! {
    #[test]
    fn any_bytes_are_read_as_the_field_by_field_walk_read_them(
        pairs in prop::collection::vec(("[ab]{0,2}", "[ab]{0,3}"), 0..5),
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![0u8..6, any::<u8>()]), 0..3),
        cut in any::<prop::sample::Index>(),
        trailing in prop::collection::vec(any::<u8>(), 0..3),
    ) {
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut bytes = encode_pairs(&borrowed);
        for (at, byte) in edits {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        bytes.extend_from_slice(&trailing);
        let map = HeaderMap::from_host(bytes.clone());
        for name in ["", "a", "b", "ab", "A"] {
            prop_assert_eq!(map.lookup(name), reference_lookup(&bytes, name), "{}", name);
        }
        prop_assert_eq!(HeaderMap::decode(bytes.clone()).is_some(), reference_pairs(&bytes).is_some());
    }
}

proptest! {
    #[test]
    fn a_pair_appended_encodes_as_the_longer_list(
        pairs in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,20}"), 0..8),
        name in "[a-z-]{1,12}",
        value in "[ -~]{0,20}",
    ) {
        let mut longer = pairs.clone();
        longer.push((name.clone(), value.clone()));
        let appended = append_pair(&encode_pairs(&pairs), name.as_bytes(), value.as_bytes());
        prop_assert_eq!(appended, Some(encode_pairs(&longer)));
    }
}

#[test]
fn content_type_is_compared_as_eq_ignore_ascii_case_does() {
    // Every byte value at every place, and the name's own cases.
    for at in 0..12 {
        for byte in 0..=255u8 {
            let mut name = *b"content-type";
            name[at] = byte;
            assert_eq!(
                is_content_type(&name),
                name.eq_ignore_ascii_case(b"content-type"),
                "{name:?}"
            );
        }
    }
    assert!(is_content_type(b"Content-Type"));
    assert!(is_content_type(b"CONTENT-TYPE"));
    assert!(!is_content_type(b"content-typ"));
    assert!(!is_content_type(b"content-types"));
}

proptest! {
    #[test]
    fn content_type_is_what_its_own_lookup_would_find(
        names in prop::collection::vec(prop::sample::select(vec!["content-type", "Content-Type", "x-request-id", "content-typf", "ab"]), 0..5),
        values in prop::collection::vec("[ab]{0,3}", 5),
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![0u8..6, any::<u8>()]), 0..2),
        cut in any::<prop::sample::Index>(),
        first in prop::sample::select(vec!["", "ab", "x-request-id", "content-type", "CONTENT-TYPE"]),
    ) {
        // Before any look-up (a checked walk of its own), and after one (a walk without
        // the checks when that one found the list well formed): the reference's answer,
        // for well formed and broken lists alike.
        let borrowed: Vec<(&str, &str)> = names.iter().zip(&values).map(|(k, v)| (*k, v.as_str())).collect();
        let mut bytes = encode_pairs(&borrowed);
        for (at, byte) in edits {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        let expected = reference_lookup(&bytes, "content-type");
        prop_assert_eq!(HeaderMap::from_host(bytes.clone()).content_type(), expected.clone());
        let map = HeaderMap::from_host(bytes.clone());
        prop_assert_eq!(map.lookup(first), reference_lookup(&bytes, first));
        prop_assert_eq!(map.content_type(), expected.clone());
        prop_assert_eq!(map.lookup("content-type"), expected);
    }
}

#[test]
fn content_type_after_a_lookup_is_one_repeated_or_absent() {
    let one = HeaderMap::from_host(encode(&[
        ("x-tenant-id", b"t"),
        ("Content-Type", b"application/grpc"),
    ]));
    assert_eq!(one.lookup("x-tenant-id"), Lookup::One(b"t".to_vec()));
    assert_eq!(
        one.content_type(),
        Lookup::One(b"application/grpc".to_vec())
    );
    let twice = HeaderMap::from_host(encode(&[
        ("content-type", b"a"),
        ("x-tenant-id", b"t"),
        ("content-type", b"b"),
    ]));
    assert_eq!(twice.lookup("x-tenant-id"), Lookup::One(b"t".to_vec()));
    assert_eq!(twice.content_type(), Lookup::Repeated);
    let none = HeaderMap::from_host(encode(&[("x-request-id", b"r"), ("x-tenant-id", b"t")]));
    assert_eq!(none.lookup("x-tenant-id"), Lookup::One(b"t".to_vec()));
    assert_eq!(none.content_type(), Lookup::Absent);
}
