use super::*;
use crate::request::descriptor::Lookup;
use crate::request::header_map::HeaderMap;
use proptest::prelude::*;

#[test]
fn an_empty_list_is_a_zero_count() {
    assert_eq!(encode_pairs::<&str>(&[]), [0, 0, 0, 0]);
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

#[test]
fn a_null_buffer_is_empty() {
    // SAFETY: null is always allowed.
    assert!(unsafe { take_buffer(std::ptr::null_mut(), 0) }.is_empty());
}

#[test]
fn a_filled_in_buffer_comes_back_whole() {
    for size in [0usize, 1, 7, 4096] {
        let data = allocate(size);
        let bytes: Vec<u8> = (0..size).map(|i| i as u8).collect();
        // SAFETY: `data` has room for `size` bytes, as the host would write them.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, size) };
        // SAFETY: from `allocate(size)`, fully written, owned by nobody else.
        let taken = unsafe { take_buffer(data, size) };
        assert_eq!(taken, bytes);
        assert_eq!(taken.capacity(), size);
    }
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
