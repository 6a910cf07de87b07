use super::*;
use crate::request::header_map::{encode_pairs, HeaderMap};
use proptest::prelude::*;

/// The list a [`Headers`] holds, as owned text.
fn listed(headers: &Headers) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn no_field_is_a_zero_count_and_no_buffer() {
    let headers = Headers::new();
    assert_eq!(headers.encoded(), encode_pairs::<&str, &str>(&[]));
    assert_eq!(headers.clone().into_encoded(), [0; 4]);
    assert_eq!((headers.len(), headers.is_empty()), (0, true));
    assert_eq!(headers.bytes.capacity(), 0);
    assert_eq!(headers.pairs().count(), 0);
}

#[test]
fn fields_come_back_in_the_order_pushed() {
    let mut headers = Headers::new();
    headers.push("retry-after", "1");
    headers.push_decimal("x-ratelimit-limit", 100);
    headers.push("empty", "");
    assert_eq!(headers.len(), 3);
    assert_eq!(
        listed(&headers),
        [
            ("retry-after".to_string(), "1".to_string()),
            ("x-ratelimit-limit".into(), "100".into()),
            ("empty".into(), String::new()),
        ]
    );
    assert_eq!(headers.get("x-ratelimit-limit"), Some("100"));
    assert_eq!(headers.get("x-ratelimit-reset"), None);
    assert_eq!(
        format!("{headers:?}"),
        r#"[("retry-after", "1"), ("x-ratelimit-limit", "100"), ("empty", "")]"#
    );
}

#[test]
fn names_and_values_written_in_place_are_as_if_pushed() {
    let mut written = Headers::new();
    written.push_parts(
        |out| out.extend(b"X-From-RLS".iter().map(u8::to_ascii_lowercase)),
        |out| out.extend_from_slice(b"yes"),
    );
    assert_eq!(written, [("x-from-rls", "yes")].into_iter().collect());
}

fn pair() -> impl Strategy<Value = (String, String)> {
    // Any text, NULs and all: the encoding goes by lengths.
    ("[a-z:-]{0,24}", any::<String>())
}

proptest! {
    /// The encoding is the one `encode_pairs` wrote for the list of strings it replaces,
    /// byte for byte, and reads back as that list.
    #[test]
    fn pushing_encodes_as_encode_pairs_did(list in prop::collection::vec(pair(), 0..12)) {
        let headers: Headers = list.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let expected = encode_pairs(&list);
        prop_assert_eq!(headers.encoded(), expected.as_slice());
        prop_assert_eq!(headers.len(), list.len());
        prop_assert_eq!(&listed(&headers), &list);
        prop_assert!(HeaderMap::decode(headers.clone().into_encoded()).is_some());
    }

    /// Appending a list is pushing its fields one by one.
    #[test]
    fn appending_is_pushing_each(
        first in prop::collection::vec(pair(), 0..6),
        second in prop::collection::vec(pair(), 0..6),
    ) {
        let of = |list: &[(String, String)]| -> Headers {
            list.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
        };
        let mut appended = of(&first);
        appended.append(of(&second));
        let both: Vec<_> = first.iter().chain(&second).cloned().collect();
        let expected = encode_pairs(&both);
        prop_assert_eq!(appended.encoded(), expected.as_slice());
    }

    /// A number is written as its `to_string`.
    #[test]
    fn a_number_is_its_decimal_text(n in any::<u64>(), small in 0..20_000u64) {
        for n in [n, small] {
            let mut headers = Headers::new();
            headers.push_decimal("n", n);
            let expected = encode_pairs(&[("n", n.to_string())]);
            prop_assert_eq!(headers.encoded(), expected.as_slice());
        }
    }
}
