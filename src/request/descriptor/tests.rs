use super::*;
use crate::config::Config;
use crate::testing::FakeRequest;

const MAX: usize = 1024;

fn rules(json: &str) -> Vec<Rule> {
    Config::parse(json.as_bytes()).unwrap().rules
}

const TWO_RULES: &str = r#"{"rules":[
    {"name":"api","match":{"path_prefix":"/api/","methods":["GET"]},
     "descriptors":[{"key":"tenant","header":"x-tenant"},{"key":"ip","source":"remote_address"},
                    {"key":"route","value":"api"},{"key":"path","source":"path"},
                    {"key":"host","source":"authority"},{"key":"m","source":"method"}],
     "local":{"capacity":1,"refill_per_second":1}},
    {"name":"all","descriptors":[{"key":"tenant","header":"x-tenant"}],
     "local":{"capacity":1,"refill_per_second":1}}]}"#;

#[test]
fn every_source_produces_its_value() {
    let rules = rules(TWO_RULES);
    let mut req = FakeRequest::new(&[
        (":path", "/api/items?page=2"),
        (":method", "GET"),
        (":authority", "example.com"),
        ("x-tenant", "acme"),
    ]);
    let applied = applicable(&rules, MAX, &mut req).unwrap();
    assert_eq!(
        applied.to_vec(),
        vec![
            Applied {
                rule: 0,
                values: smallvec::smallvec![
                    b"acme".to_vec(),
                    b"10.1.2.3".to_vec(),
                    b"api".to_vec(),
                    b"/api/items".to_vec(),
                    b"example.com".to_vec(),
                    b"GET".to_vec()
                ]
            },
            Applied {
                rule: 1,
                values: smallvec::smallvec![b"acme".to_vec()]
            }
        ]
    );
}

#[test]
fn match_on_path_and_method_filters_rules() {
    let rules = rules(TWO_RULES);
    for (path, method) in [("/other", "GET"), ("/api/x", "POST"), ("/ap", "GET")] {
        let mut req = FakeRequest::new(&[(":path", path), (":method", method), ("x-tenant", "t")]);
        let applied: Vec<usize> = applicable(&rules, MAX, &mut req)
            .unwrap()
            .iter()
            .map(|a| a.rule)
            .collect();
        assert_eq!(applied, vec![1], "{method} {path}");
    }
}

#[test]
fn a_missing_or_empty_header_means_the_rule_does_not_apply() {
    let rules = rules(TWO_RULES);
    let mut absent = FakeRequest::new(&[(":path", "/api/x"), (":method", "GET")]);
    assert!(applicable(&rules, MAX, &mut absent).unwrap().is_empty());
    let mut empty = FakeRequest::new(&[(":path", "/api/x"), (":method", "GET"), ("x-tenant", "")]);
    assert!(applicable(&rules, MAX, &mut empty).unwrap().is_empty());
}

#[test]
fn path_and_method_are_fetched_once() {
    let rules = rules(TWO_RULES);
    let mut req = FakeRequest::new(&[
        (":path", "/api/x"),
        (":method", "GET"),
        (":authority", "h"),
        ("x-tenant", "t"),
    ]);
    applicable(&rules, MAX, &mut req).unwrap();
    // path, method, x-tenant (twice: once per rule), peer, authority.
    assert_eq!(req.lookups, 6);
}

#[test]
fn ports_are_stripped_from_ipv4_and_ipv6() {
    assert_eq!(strip_port("10.0.0.1:8080"), "10.0.0.1");
    assert_eq!(strip_port("[::1]:443"), "::1");
    assert_eq!(strip_port("[2001:db8::7]:1"), "2001:db8::7");
    assert_eq!(strip_port("2001:db8::7"), "2001:db8::7");
    assert_eq!(strip_port("10.0.0.1"), "10.0.0.1");
    assert_eq!(strip_port("/var/run/sock"), "/var/run/sock");
}

#[test]
fn queries_and_fragments_are_stripped_from_paths() {
    assert_eq!(strip_query(b"/a/b?c=d"), b"/a/b");
    assert_eq!(strip_query(b"/a#frag"), b"/a");
    assert_eq!(strip_query(b"/"), b"/");
    assert_eq!(strip_query(b""), b"");
}

#[test]
fn distinct_bytes_are_distinct_values_and_buckets() {
    let rules = rules(TWO_RULES);
    let q = crate::bucket::Quota::new(1, 1_000_000).unwrap();
    let mut seen = std::collections::HashSet::new();
    for raw in [&b"t\xff"[..], b"t\xfe", "t\u{fffd}".as_bytes()] {
        let mut req = FakeRequest::new(&[(":path", "/")]).with("x-tenant", raw);
        let applied = applicable(&rules, MAX, &mut req).unwrap();
        assert_eq!(applied[0].values[0], raw);
        let key = crate::shared::placement::PlacementKey::from_bytes([7; 16]);
        assert!(seen.insert(key.bucket("all", q, &applied[0].values)));
    }
}

#[test]
fn a_repeated_descriptor_header_refuses_the_request() {
    let rules = rules(TWO_RULES);
    let mut req =
        FakeRequest::new(&[(":path", "/"), ("x-tenant", "other")]).with("x-tenant", b"victim");
    assert_eq!(
        applicable(&rules, MAX, &mut req),
        Err(Refusal::RepeatedHeader {
            header: "x-tenant".into()
        })
    );
}

#[test]
fn an_over_long_value_refuses_the_request_and_the_limit_fits_exactly() {
    let rules = rules(TWO_RULES);
    let mut fits = FakeRequest::new(&[(":path", "/"), ("x-tenant", &"a".repeat(8))]);
    assert_eq!(applicable(&rules, 8, &mut fits).unwrap().len(), 1);
    let mut long = FakeRequest::new(&[(":path", "/"), ("x-tenant", &"a".repeat(9))]);
    assert_eq!(
        applicable(&rules, 8, &mut long),
        Err(Refusal::ValueTooLong {
            key: "tenant".into(),
            max: 8
        })
    );
    // The path counts without its query string.
    let path_rule = rules_of(
        r#"{"rules":[{"name":"p","descriptors":[{"key":"path","source":"path"}],
        "local":{"capacity":1,"refill_per_second":1}}]}"#,
    );
    let mut query = FakeRequest::new(&[(":path", "/abc?a-very-long-query")]);
    assert_eq!(applicable(&path_rule, 4, &mut query).unwrap().len(), 1);
}

#[test]
fn global_rules_refuse_non_utf8_values_local_ones_keep_them() {
    let global = rules_of(
        r#"{"rls":{"cluster":"c","domain":"d"},"rules":[{"name":"g",
        "descriptors":[{"key":"tenant","header":"x-tenant"}],"global":{}}]}"#,
    );
    let mut req = FakeRequest::new(&[(":path", "/")]).with("x-tenant", b"t\xff");
    assert_eq!(
        applicable(&global, MAX, &mut req),
        Err(Refusal::NotUtf8 {
            key: "tenant".into()
        })
    );
    let mut utf8 = FakeRequest::new(&[(":path", "/"), ("x-tenant", "t\u{fffd}")]);
    assert_eq!(applicable(&global, MAX, &mut utf8).unwrap().len(), 1);
}

fn rules_of(json: &str) -> Vec<Rule> {
    rules(json)
}

proptest::proptest! {
    #[test]
    fn is_utf8_is_what_from_utf8_says(value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)) {
        proptest::prop_assert_eq!(is_utf8(&value), std::str::from_utf8(&value).is_ok());
    }
}

#[test]
fn is_utf8_takes_ascii_and_multibyte_text_and_refuses_the_rest() {
    assert!(is_utf8(b"bench"));
    assert!(is_utf8("t\u{e9}nant".as_bytes()));
    assert!(!is_utf8(b"t\xffnant"));
    assert!(!is_utf8(b"\xc3"));
}
