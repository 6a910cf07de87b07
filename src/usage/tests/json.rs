//! The JSON scanner: what is a usage, what is JSON, any depth and size, and agreement with
//! serde_json over random documents cut into random pieces.

use super::pieces;
use crate::config::JsonPath;
use crate::usage::json::{find_numbers, JsonScanner, NotJson, CHECKED_DEPTH};
use proptest::prelude::*;
use serde_json::Value;

fn path(p: &str) -> JsonPath {
    JsonPath {
        keys: p.split('.').map(str::to_string).collect(),
    }
}

fn numbers(doc: &str, paths: &[&str]) -> Result<Vec<Option<u32>>, NotJson> {
    let paths: Vec<JsonPath> = paths.iter().map(|p| path(p)).collect();
    let mut found = vec![None; paths.len()];
    find_numbers(doc.as_bytes(), &paths, &mut found).map(|()| found)
}

/// What the scanner finds in `chunks`, fed one after another.
fn scanned(chunks: &[&[u8]], paths: &[JsonPath]) -> Result<Vec<Option<u32>>, NotJson> {
    let mut scanner = JsonScanner::new(paths.len());
    for c in chunks {
        scanner.feed(paths, c);
    }
    scanner.finish(paths).map(<[_]>::to_vec)
}

#[test]
fn numbers_are_found_at_their_paths_only() {
    let doc = r#"{"id":"x","choices":[{"usage":{"total_tokens":7}}],
        "usage":{"prompt_tokens":10,"completion_tokens":32,"total_tokens":42}}"#;
    assert_eq!(
        numbers(
            doc,
            &["usage.total_tokens", "usage.prompt_tokens", "total_tokens"]
        ),
        Ok(vec![Some(42), Some(10), None])
    );
}

#[test]
fn the_last_occurrence_of_a_key_counts() {
    assert_eq!(numbers(r#"{"a":1,"a":2}"#, &["a"]), Ok(vec![Some(2)]));
    assert_eq!(numbers(r#"{"a":1,"a":null}"#, &["a"]), Ok(vec![None]));
    // A later `usage` object replaces the earlier one, as in a JSON reader's map.
    assert_eq!(
        numbers(r#"{"u":{"t":5,"x":1},"u":{"x":2}}"#, &["u.t"]),
        Ok(vec![None])
    );
    assert_eq!(
        numbers(r#"{"u":{"t":5},"v":{"t":6}}"#, &["u.t"]),
        Ok(vec![Some(5)])
    );
}

#[test]
fn only_whole_numbers_in_u32_are_a_usage() {
    for (value, expected) in [
        ("0", Some(0)),
        ("4294967295", Some(u32::MAX)),
        ("4294967296", None),
        ("99999999999999999999999", None),
        ("-1", None),
        ("-0", None),
        ("1.5", None),
        ("1e3", None),
        ("10.0", None),
        ("null", None),
        (r#""12""#, None),
        ("{}", None),
        ("[12]", None),
    ] {
        let doc = format!(r#"{{"usage":{value}}}"#);
        assert_eq!(numbers(&doc, &["usage"]), Ok(vec![expected]), "{doc}");
    }
}

#[test]
fn what_is_not_json_is_told() {
    for doc in [
        "[DONE]",
        "",
        "{",
        r#"{"a":1}x"#,
        r#"{"a":01}"#,
        r#"{"a" 1}"#,
        r#"{"a":1,}"#,
        r#"[1,]"#,
        r#"{"a":1]"#,
        r#"[1}"#,
        r#"{"a":tru}"#,
        r#"{"a":-}"#,
        r#"{"a":1.}"#,
        r#"{"a":1e}"#,
        r#"{"a":"\x"}"#,
        r#"{"a":"\u12g4"}"#,
        "{\"a\":\"\u{1}\"}",
        "<html><body>Bad gateway</body></html>",
    ] {
        assert_eq!(numbers(doc, &["a"]), Err(NotJson), "{doc:?}");
    }
}

/// Depth is no discount: a usage after a value nested far deeper than the scanner
/// checks is still found, and the scanner's size is the same whatever it read.
#[test]
fn any_depth_is_read_in_the_same_memory() {
    for depth in [40, CHECKED_DEPTH as usize - 1, 100_000] {
        let nested = format!("{}1{}", "[{\"a\":".repeat(depth), "}]".repeat(depth));
        let doc = format!(
            r#"{{"content":[{{"input":{nested}}}],"s":"]}}\"[{{","usage":{{"total_tokens":1500}}}}"#
        );
        assert_eq!(
            numbers(&doc, &["usage.total_tokens"]),
            Ok(vec![Some(1500)]),
            "depth {depth}"
        );
        // Byte by byte too.
        let paths = [path("usage.total_tokens")];
        let bytes: Vec<&[u8]> = doc.as_bytes().chunks(1).collect();
        assert_eq!(scanned(&bytes, &paths), Ok(vec![Some(1500)]));
    }
    // A deep part left open is not a document.
    let open = format!(r#"{{"a":{}}}"#, "[".repeat(1000));
    assert_eq!(numbers(&open, &["a"]), Err(NotJson));
    // Nothing but the scanner's own few hundred bytes, whatever the document.
    assert!(std::mem::size_of::<JsonScanner>() <= 320);
}

/// Size is no discount either: a usage after megabytes of content is found.
#[test]
fn any_size_is_read() {
    let doc = format!(
        r#"{{"choices":[{{"message":{{"content":"{}"}}}}],"usage":{{"total_tokens":7}}}}"#,
        "x".repeat(3 << 20)
    );
    let paths = [path("usage.total_tokens")];
    let chunks: Vec<&[u8]> = doc.as_bytes().chunks(16 * 1024).collect();
    assert_eq!(scanned(&chunks, &paths), Ok(vec![Some(7)]));
}

/// Keys that could be on a path, so that random documents often hold one.
const KEYS: [&str; 5] = ["usage", "total_tokens", "a", "b", "us\"age"];

/// The paths looked for in random documents.
fn paths() -> Vec<JsonPath> {
    [
        "usage.total_tokens",
        "usage",
        "a.b",
        "a.usage.total_tokens",
        "b",
    ]
    .into_iter()
    .map(path)
    .collect()
}

/// Any JSON value a few levels deep, with numbers of every kind.
fn value() -> impl Strategy<Value = Value> {
    let number = prop_oneof![
        (0u64..6_000_000_000).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        Just(Value::from(5.0f64)),
    ];
    let leaf = prop_oneof![
        number,
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        "[ -~\u{e9}\u{1}\\n\\\\\"]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 48, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS.to_vec()), inner), 0..5)
                .prop_map(|fields| Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                )),
        ]
    })
}

/// What serde_json reads at each path: the number if it is a whole one in `u32`.
fn expected(v: &Value, paths: &[JsonPath]) -> Vec<Option<u32>> {
    paths
        .iter()
        .map(|p| {
            p.keys
                .iter()
                .try_fold(v, |v, k| v.as_object()?.get(k))
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        })
        .collect()
}

proptest! {
    /// On random documents, compact or pretty, cut into random pieces, the scanner finds
    /// what serde_json reads at every path.
    #[test]
    fn the_scanner_agrees_with_serde_json_on_random_documents(
        v in value(),
        pretty in any::<bool>(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
    ) {
        let doc = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) };
        let doc = doc.unwrap();
        let paths = paths();
        prop_assert_eq!(
            scanned(&pieces(doc.as_bytes(), &cuts), &paths),
            Ok(expected(&v, &paths)),
            "{}", doc
        );
    }

    /// On random text, the scanner and serde_json agree on what is JSON, wherever it is
    /// cut.
    #[test]
    fn the_scanner_agrees_with_serde_json_on_what_is_json(
        text in "[ \\[\\]{}\":,a-z0-9.eE+\\\\-]{0,24}",
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..4),
    ) {
        let parsed: Result<Value, _> = serde_json::from_str(&text);
        // serde_json refuses numbers past f64 (`1e999`); JSON does not.
        prop_assume!(!matches!(&parsed, Err(e) if e.to_string().starts_with("number out of range")));
        let paths = paths();
        let ours = scanned(&pieces(text.as_bytes(), &cuts), &paths);
        prop_assert_eq!(ours.is_ok(), parsed.is_ok(), "{}", text);
        if let Ok(v) = parsed {
            prop_assert_eq!(ours, Ok(expected(&v, &paths)));
        }
    }
}
