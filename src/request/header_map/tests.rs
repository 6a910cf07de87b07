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

proptest! {
    #[test]
    fn a_reused_buffer_encodes_the_same_bytes(
        before in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,20}"), 0..8),
        pairs in prop::collection::vec(("[a-z-]{1,12}", "[ -~]{0,20}"), 0..8),
    ) {
        // The buffer holds a previous encoding (longer or shorter): none of it shows.
        let mut buffer = encode_pairs(&before);
        buffer.iter_mut().for_each(|b| *b = 0xff);
        let expected = encode_pairs(&pairs);
        prop_assert_eq!(encode_pairs_reusing(&pairs, &mut buffer), expected.as_slice());
    }
}
