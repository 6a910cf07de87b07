use super::*;
use crate::bucket::{decide, Decision, Quota, Tat};
use crate::reply::tests::rules;
use crate::testing::h;
use proptest::prelude::*;

const SECOND: u64 = 1_000_000_000;

/// A parsed list item: its String value and its Integer parameters, in order.
type Parsed = (String, Vec<(String, i64)>);

/// Parses a field value as a Structured Field List with a real parser, and insists on
/// the draft's shape: every member an Item whose value is a String, every parameter
/// used here an Integer.
fn parse_list(value: &str) -> Vec<Parsed> {
    let list: sfv::List = sfv::Parser::new(value)
        .parse()
        .unwrap_or_else(|e| panic!("{value:?} is not a Structured Field List: {e}"));
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("{value:?}: an inner list where an Item belongs");
            };
            let name = item
                .bare_item
                .as_string()
                .unwrap_or_else(|| panic!("{value:?}: the item's value must be a String"))
                .as_str()
                .to_string();
            let params = item
                .params
                .iter()
                .map(|(k, v)| {
                    let n = v
                        .as_integer()
                        .unwrap_or_else(|| panic!("{value:?}: {} must be an Integer", k.as_str()));
                    (k.as_str().to_string(), i64::from(n))
                })
                .collect();
            (name, params)
        })
        .collect()
}

fn quota(capacity: u32, per_second: f64) -> Quota {
    Quota::new(capacity, (per_second * 1e6).round() as u64).unwrap()
}

/// A bucket after `taken` tokens at one instant, then `later_ns` of refill, then one
/// more request: the standing of rule `rule`.
fn standing(rule: usize, q: Quota, taken: u32, later_ns: u64) -> Standing {
    let mut state = Tat::default();
    for _ in 0..taken {
        if let Decision::Allow { new_state, .. } = decide(state, SECOND, q, 1) {
            state = new_state;
        }
    }
    Standing::local(rule, q, decide(state, SECOND + later_ns, q, 1), false)
}

fn header<'a>(headers: &'a Headers, name: &str) -> &'a str {
    headers.get(name).unwrap_or_default()
}

#[test]
fn a_rejected_bucket_shows_its_policy_and_when_the_next_token_comes() {
    // 10 tokens, 2 per second: empty, then 0.2 s of refill (0.4 of a token).
    let denied = standing(0, quota(10, 2.0), 10, SECOND / 5);
    assert!(denied.rejects());
    let headers = structured_headers(&rules(), &[denied]);
    assert_eq!(
        headers,
        h(&[
            ("ratelimit-policy", r#""per-tenant";q=10;w=5"#),
            ("ratelimit", r#""per-tenant";r=0;t=1"#),
        ])
    );
    assert_eq!(
        parse_list(header(&headers, "ratelimit-policy")),
        vec![(
            "per-tenant".to_string(),
            vec![("q".to_string(), 10), ("w".to_string(), 5)]
        )]
    );
    assert_eq!(
        parse_list(header(&headers, "ratelimit")),
        vec![(
            "per-tenant".to_string(),
            vec![("r".to_string(), 0), ("t".to_string(), 1)]
        )]
    );
}

#[test]
fn several_rules_are_one_item_each_in_configuration_order_and_shadows_are_hidden() {
    let tenant = standing(0, quota(100, 10.0), 1, 0);
    let route = standing(1, Quota::new(5, 0).unwrap(), 2, 0);
    let shadow = Standing {
        shadow: true,
        ..standing(0, quota(1, 1.0), 1, 0)
    };
    // Arriving global rules first must not change the order.
    let headers = structured_headers(&rules(), &[route, shadow, tenant]);
    assert_eq!(
        header(&headers, "ratelimit-policy"),
        r#""per-tenant";q=100;w=10, "per-route";q=5"#
    );
    assert_eq!(
        header(&headers, "ratelimit"),
        r#""per-tenant";r=98;t=1, "per-route";r=2"#
    );
    assert_eq!(parse_list(header(&headers, "ratelimit")).len(), 2);
    assert!(structured_headers(&rules(), &[shadow]).is_empty());
}

#[test]
fn a_service_status_without_a_limit_shows_nothing() {
    let unlimited = Standing {
        rule: 0,
        limit: 0,
        window_s: None,
        remaining: 0,
        reset_ns: None,
        next_ns: None,
        allowed: true,
        retry_ns: Some(0),
        shadow: false,
    };
    assert!(structured_headers(&rules(), &[unlimited]).is_empty());
}

#[test]
fn a_window_is_the_time_to_refill_from_empty_rounded_up() {
    assert_eq!(bucket_window_s(100, 10_000_000), Some(10));
    assert_eq!(bucket_window_s(10, 3_000_000), Some(4)); // 3.33 s
    assert_eq!(bucket_window_s(1, 1_000_000_000), Some(1)); // 1 per ms: no sub-second
    assert_eq!(bucket_window_s(5, 83_333), Some(61)); // 5 per minute, as written
    assert_eq!(bucket_window_s(7, 0), None);
    assert_eq!(bucket_window_s(u32::MAX, 1), None); // past 15 digits
}

#[test]
fn names_are_always_well_formed_strings() {
    let mut out = Vec::new();
    push_sf_string(&mut out, "a\"b\\c\u{e9}\n");
    assert_eq!(out, br#""a\"b\\c""#);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(parse_list(&out)[0].0, "a\"b\\c");
}

proptest! {
    /// The window in u64 is the exact ceiling the u128 arithmetic gave.
    #[test]
    fn the_window_is_the_exact_ceiling(capacity in any::<u32>(), rate_micro in any::<u64>()) {
        let exact = (rate_micro > 0)
            .then(|| (u128::from(capacity) * 1_000_000).div_ceil(u128::from(rate_micro)))
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s <= SF_INTEGER_MAX);
        prop_assert_eq!(bucket_window_s(capacity, rate_micro), exact);
    }

    /// The mapping's promise: a client that sends at most `q` requests in any `w`
    /// seconds, as greedily as that allows, is never rejected by the bucket.
    #[test]
    fn a_client_keeping_to_q_per_w_is_never_rejected(
        capacity in 1u32..50,
        rate_micro in 1_000u64..100_000_000,
        gaps in prop::collection::vec(0u64..3_000_000_000, 1..300),
    ) {
        let q = Quota::new(capacity, rate_micro).unwrap();
        let w = bucket_window_s(capacity, rate_micro).unwrap();
        let window_ns = w * SECOND;
        let mut state = Tat::default();
        let mut sent: Vec<u64> = Vec::new();
        let mut now = 10 * SECOND;
        for gap in gaps {
            now += gap;
            // Send as many as the q-per-w rule allows at this instant.
            loop {
                // The q-th send back must have left the window.
                let full = sent.len() >= capacity as usize
                    && sent[sent.len() - capacity as usize] + window_ns > now;
                if full {
                    break;
                }
                match decide(state, now, q, 1) {
                    Decision::Allow { new_state, .. } => state = new_state,
                    Decision::Deny { .. } => {
                        prop_assert!(false, "rejected at {now} after {} sends (q={capacity}, w={w})", sent.len());
                    }
                }
                sent.push(now);
            }
        }
    }

    /// `t` is exact: one more whole token is there after `next_token_in_ns`, not a
    /// nanosecond before.
    #[test]
    fn the_next_token_comes_exactly_when_t_says(
        capacity in 1u32..20,
        rate_micro in 1_000u64..5_000_000_000,
        taken in 0u32..20,
        later in 0u64..5_000_000_000,
    ) {
        let q = Quota::new(capacity, rate_micro).unwrap();
        let mut state = Tat::default();
        for _ in 0..taken.min(capacity) {
            if let Decision::Allow { new_state, .. } = decide(state, SECOND, q, 1) {
                state = new_state;
            }
        }
        let now = SECOND + later;
        let d = decide(state, now, q, capacity + 1); // never admitted: only looks
        match d.next_token_in_ns(q) {
            None => prop_assert_eq!(d.remaining(), capacity),
            Some(next) => {
                prop_assert!(next > 0);
                let before = decide(state, now + next - 1, q, capacity + 1);
                let after = decide(state, now + next, q, capacity + 1);
                prop_assert_eq!(before.remaining(), d.remaining());
                prop_assert_eq!(after.remaining(), d.remaining() + 1);
            }
        }
    }
}

proptest! {
    /// draft-11's reading of `r` and `t`: a client that uses no more than the available
    /// quota `r` within the effective window `t`, at any instants it likes, is never
    /// rejected (that it can use no more before the next whole token is
    /// `the_next_token_comes_exactly_when_t_says`).
    #[test]
    fn a_client_keeping_to_r_within_t_is_never_rejected(
        capacity in 1u32..20,
        rate_micro in 1_000u64..5_000_000_000,
        taken in 0u32..20,
        later in 0u64..5_000_000_000,
        offsets in prop::collection::vec(0u64..1_000_000, 0..20),
    ) {
        let q = Quota::new(capacity, rate_micro).unwrap();
        let s = standing(0, q, taken.min(capacity), later);
        let Some(t_ns) = s.next_ns.map(|n| seconds_ceil(n) * SECOND) else {
            return Ok(()); // A full bucket: no effective window is sent.
        };
        let mut state = Tat::default();
        for _ in 0..taken.min(capacity) {
            if let Decision::Allow { new_state, .. } = decide(state, SECOND, q, 1) {
                state = new_state;
            }
        }
        let start = SECOND + later;
        // The standing took one more request at `start`, when it was admitted.
        if let Decision::Allow { new_state, .. } = decide(state, start, q, 1) {
            state = new_state;
        }
        let mut at: Vec<u64> = offsets
            .iter()
            .take(s.remaining as usize)
            .map(|o| start + o * t_ns / 1_000_000)
            .collect();
        at.sort_unstable();
        for now in at {
            match decide(state, now, q, 1) {
                Decision::Allow { new_state, .. } => state = new_state,
                Decision::Deny { .. } => prop_assert!(false, "rejected within r={} t={}", s.remaining, t_ns),
            }
        }
    }
}

/// The structured fields as they were written before they went straight into the encoded
/// headers: two strings, then the list of (name, value) pairs. The reference the encoder
/// that replaced them is held to.
fn reference_structured(rules: &[Rule], standings: &[Standing]) -> Vec<(&'static str, String)> {
    fn sf_string(out: &mut String, s: &str) {
        out.push('"');
        for c in s.chars().filter(|c| (' '..='~').contains(c)) {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    let param = |out: &mut String, key: &str, value: u64| {
        out.push_str(&format!(";{key}={}", value.min(SF_INTEGER_MAX)));
    };
    let shown = crate::reply::order::in_rule_order(standings.iter().filter(|s| shows(s)));
    if shown.is_empty() {
        return Vec::new();
    }
    let (mut policy, mut limit) = (String::new(), String::new());
    for s in shown {
        let name = rules.get(s.rule).map_or("", |r| r.name.as_str());
        if !policy.is_empty() {
            policy.push_str(", ");
            limit.push_str(", ");
        }
        sf_string(&mut policy, name);
        param(&mut policy, "q", u64::from(s.limit));
        if rules.get(s.rule).is_some_and(|r| r.limit.is_concurrency()) {
            policy.push_str(";qu=\"concurrent-requests\"");
        }
        if let Some(w) = s.window_s {
            param(&mut policy, "w", w);
        }
        sf_string(&mut limit, name);
        param(&mut limit, "r", u64::from(s.remaining));
        if let Some(next) = s.next_ns {
            param(&mut limit, "t", seconds_ceil(next).min(SF_INTEGER_MAX));
        }
    }
    vec![("ratelimit-policy", policy), ("ratelimit", limit)]
}

/// Two local rules and a concurrency rule, named `names`.
fn named_rules(names: &[String; 3]) -> Vec<Rule> {
    let mut rules = crate::config::Config::parse(
        br#"{"rules":[
            {"name":"a","descriptors":[{"key":"k","value":"v"}],
             "local":{"capacity":1,"refill_per_second":1}},
            {"name":"b","descriptors":[{"key":"k","value":"v"}],
             "local":{"capacity":1,"refill_per_second":1}},
            {"name":"c","descriptors":[{"key":"k","value":"v"}],
             "concurrency":{"max":3}}]}"#,
    )
    .unwrap()
    .rules;
    for (rule, name) in rules.iter_mut().zip(names) {
        rule.name = name.clone();
    }
    rules
}

fn any_standing() -> impl Strategy<Value = Standing> {
    let optional = || {
        prop_oneof![
            Just(None),
            (0..5_000_000_000_000u64).prop_map(Some),
            any::<u64>().prop_map(Some)
        ]
    };
    (
        0..4usize,
        any::<u32>(),
        optional(),
        any::<u32>(),
        optional(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(rule, limit, window_s, remaining, next_ns, allowed, shadow)| Standing {
                rule,
                limit: if limit % 4 == 0 { 0 } else { limit },
                window_s,
                remaining,
                reset_ns: next_ns,
                next_ns,
                allowed,
                retry_ns: next_ns,
                shadow,
            },
        )
}

proptest! {
    /// The fields written in place are, byte for byte, what the two strings held, for
    /// any names (quotes, backslashes, characters beyond ASCII) and any standings.
    #[test]
    fn the_fields_written_in_place_are_the_strings_they_replace(
        names in prop::array::uniform3("[a-z\"\\\\ é\n-]{0,12}"),
        standings in prop::collection::vec(any_standing(), 0..5),
    ) {
        let rules = named_rules(&names);
        let reference = reference_structured(&rules, &standings);
        let written = structured_headers(&rules, &standings);
        let listed: Vec<(&str, &str)> = written.iter().collect();
        let expected: Vec<(&str, &str)> = reference.iter().map(|(n, v)| (*n, v.as_str())).collect();
        prop_assert_eq!(listed, expected);
        // Appended after other fields, they are the same fields.
        let mut after = h(&[("retry-after", "1")]);
        push_structured_headers(&mut after, &rules, &standings);
        prop_assert_eq!(after.len(), 1 + reference.len());
    }
}
