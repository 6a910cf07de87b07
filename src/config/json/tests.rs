use super::*;

fn number(text: &str) -> Number {
    match parse(text.as_bytes()) {
        Ok(Value::Number(n)) => n,
        other => panic!("{text}: {other:?}"),
    }
}

fn error(text: &str) -> (String, &'static str) {
    let e = parse(text.as_bytes()).unwrap_err();
    (e.path, e.message)
}

#[test]
fn values_of_every_kind_are_read() {
    let v = parse(br#" {"a": [true, false, null, "x\u00e9\n", -1.5e3, {}], "b": []} "#).unwrap();
    let Value::Object(members) = v else {
        panic!("not an object")
    };
    assert_eq!(members[0].0, "a");
    assert_eq!(
        members[0].1,
        Value::Array(vec![
            Value::Bool(true),
            Value::Bool(false),
            Value::Null,
            Value::String("xé\n".into()),
            Value::Number(number("-1.5e3")),
            Value::Object(vec![]),
        ])
    );
    assert_eq!(members[1], ("b".into(), Value::Array(vec![])));
}

#[test]
fn escapes_and_surrogate_pairs_are_decoded() {
    let v = parse(br#""\"\\\/\b\f\n\r\t\ud83d\ude00""#).unwrap();
    assert_eq!(v, Value::String("\"\\/\u{8}\u{c}\n\r\t😀".into()));
    assert_eq!(
        error(r#""\ud83d""#).1,
        "lone leading surrogate in hex escape"
    );
    assert_eq!(error(r#""\x""#).1, "invalid escape");
    assert_eq!(
        error("\"a\u{1}\"").1,
        "control character (\\u0000-\\u001F) found while parsing a string"
    );
    assert_eq!(
        parse(b"\"\xff\"").unwrap_err().message,
        "invalid unicode code point"
    );
}

#[test]
fn syntax_errors_name_the_path_they_were_found_in() {
    assert_eq!(
        error(r#"{"rules": ["#),
        ("rules".into(), "EOF while parsing a list")
    );
    assert_eq!(
        error(r#"{"rules": [{"a": 1,"#),
        ("rules[0]".into(), "EOF while parsing an object")
    );
    assert_eq!(
        error(r#"{"a": {"b": tru}}"#),
        ("a.b".into(), "expected ident")
    );
    assert_eq!(
        error(r#"{"a": [1, 2 3]}"#),
        ("a".into(), "expected `,` or `]`")
    );
    assert_eq!(error(r#"{"a": 1 "b"}"#), ("".into(), "expected `,` or `}`"));
    assert_eq!(error(r#"{"a" 1}"#), ("".into(), "expected `:`"));
    assert_eq!(error(r#"{1: 1}"#), ("".into(), "key must be a string"));
    assert_eq!(error(r#"{"a": [1,]}"#), ("a".into(), "trailing comma"));
    assert_eq!(error(r#"{"a": 1,}"#), ("".into(), "trailing comma"));
    assert_eq!(error(r#"{"a": x}"#), ("a".into(), "expected value"));
    assert_eq!(error(r#"{} x"#), ("".into(), "trailing characters"));
    assert_eq!(
        error(r#"{"a": "#),
        ("a".into(), "EOF while parsing a value")
    );
    assert_eq!(
        error(r#"{"a": "b"#),
        ("a".into(), "EOF while parsing a string")
    );
}

#[test]
fn numbers_follow_json_grammar() {
    for bad in ["01", "-", "1.", "1.e3", "1e", "1e+", "-x", ".5", "+1"] {
        assert!(parse(bad.as_bytes()).is_err(), "{bad} must be refused");
    }
    for good in ["0", "-0", "10", "1.25", "1e3", "1E-3", "-0.5e+2"] {
        assert_eq!(number(good).text(), good);
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = "[".repeat(MAX_DEPTH as usize + 1);
    assert_eq!(
        parse(deep.as_bytes()).unwrap_err().message,
        "recursion limit exceeded"
    );
    let ok = format!(
        "{}{}",
        "[".repeat(MAX_DEPTH as usize),
        "]".repeat(MAX_DEPTH as usize)
    );
    assert!(parse(ok.as_bytes()).is_ok());
}

#[test]
fn integers_are_told_from_other_numbers_as_serde_json_does() {
    assert_eq!(
        number("18446744073709551615").integer(),
        Integer::Unsigned(u64::MAX)
    );
    assert_eq!(number("18446744073709551616").integer(), Integer::Other);
    assert_eq!(number("-3").integer(), Integer::Negative(-3));
    assert_eq!(number("-0").integer(), Integer::Other);
    assert_eq!(number("1.0").integer(), Integer::Other);
    assert_eq!(number("1e2").integer(), Integer::Other);
}

fn micro(text: &str) -> (bool, Option<u64>, Rest) {
    let m = number(text).millionths();
    (m.negative, m.whole, m.rest)
}

#[test]
fn millionths_are_exact() {
    assert_eq!(micro("0"), (false, Some(0), Rest::Zero));
    assert_eq!(micro("-0.0"), (false, Some(0), Rest::Zero));
    assert_eq!(micro("1"), (false, Some(1_000_000), Rest::Zero));
    assert_eq!(micro("0.25"), (false, Some(250_000), Rest::Zero));
    assert_eq!(micro("-0.1"), (true, Some(100_000), Rest::Zero));
    assert_eq!(micro("1.5e-6"), (false, Some(1), Rest::HalfOrMore));
    assert_eq!(micro("0.0000014"), (false, Some(1), Rest::BelowHalf));
    assert_eq!(micro("0.00000001"), (false, Some(0), Rest::BelowHalf));
    assert_eq!(micro("0.0000009"), (false, Some(0), Rest::HalfOrMore));
    assert_eq!(micro("0.1000000"), (false, Some(100_000), Rest::Zero));
    assert_eq!(micro("12.5e2"), (false, Some(1_250_000_000), Rest::Zero));
    assert_eq!(micro("100e-8"), (false, Some(1), Rest::Zero));
    assert_eq!(micro("1e30"), (false, None, Rest::Zero));
    assert_eq!(micro("1e99999999999999999999"), (false, None, Rest::Zero));
    assert_eq!(
        micro("1e-99999999999999999999"),
        (false, Some(0), Rest::BelowHalf)
    );
    assert_eq!(
        micro("18446744073709.551615"),
        (false, Some(u64::MAX), Rest::Zero)
    );
    assert_eq!(micro("18446744073709.551616"), (false, None, Rest::Zero));
}
