//! The response's `dynamic_metadata` (field 6), in the reference service's shape, for
//! `--response-dynamic-metadata` (its `RESPONSE_DYNAMIC_METADATA`). Envoy's `ratelimit`
//! filter stores it on the stream under `envoy.filters.http.ratelimit`, where access logs
//! and later filters read it:
//!
//! ```text
//! domain: "web"
//! descriptors: [{entries: ["tenant=acme", "path=/a"], hitsAddend: 3}, ...]  # as sent
//! hitsAddend: 2                                   # the request's, when not 0
//! metadata: {...}  # the configured `metadata` of every limit that applied and was not
//!                  # over, merged in request order: the first value of a key wins, and
//!                  # two mappings under one key merge the same way
//! ```

use super::Code;
use crate::config::{Rule, RuleKind};
use crate::proto::rls::rate_limit_response::DescriptorStatus;
use crate::proto::rls::RateLimitRequest;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};
use std::collections::BTreeMap;

/// The metadata for `req`, whose descriptors matched `rules` and were answered `statuses`.
pub(super) fn dynamic_metadata(
    req: &RateLimitRequest,
    rules: &[Option<&Rule>],
    statuses: &[DescriptorStatus],
) -> Struct {
    let mut fields = BTreeMap::new();
    fields.insert("domain".to_owned(), string(&req.domain));
    let descriptors = req
        .descriptors
        .iter()
        .map(|d| {
            let mut f = BTreeMap::new();
            let entries = d
                .entries
                .iter()
                .map(|e| string(&format!("{}={}", e.key, e.value)))
                .collect();
            f.insert("entries".to_owned(), list(entries));
            if let Some(h) = d.hits_addend {
                f.insert("hitsAddend".to_owned(), number(h as f64));
            }
            value(Kind::StructValue(Struct { fields: f }))
        })
        .collect();
    fields.insert("descriptors".to_owned(), list(descriptors));
    if req.hits_addend != 0 {
        fields.insert("hitsAddend".to_owned(), number(f64::from(req.hits_addend)));
    }
    let mut merged = Struct::default();
    for (rule, status) in rules.iter().zip(statuses) {
        let Some(rule) = rule else { continue };
        // Applied and not over: shadow-mode limits answer OK, so they count; unlimited
        // ones are not limits that applied, as in the reference.
        if rule.kind() == RuleKind::Unlimited || status.code == Code::OverLimit as i32 {
            continue;
        }
        if let Some(m) = &rule.metadata {
            merge(&mut merged, m);
        }
    }
    if !merged.fields.is_empty() {
        fields.insert("metadata".to_owned(), value(Kind::StructValue(merged)));
    }
    Struct { fields }
}

/// Adds `src` to `dest`: keys `dest` has keep their value, except that two mappings merge.
fn merge(dest: &mut Struct, src: &Struct) {
    for (k, v) in &src.fields {
        match dest.fields.get_mut(k) {
            None => {
                dest.fields.insert(k.clone(), v.clone());
            }
            Some(Value {
                kind: Some(Kind::StructValue(d)),
            }) => {
                if let Some(Kind::StructValue(s)) = &v.kind {
                    merge(d, s);
                }
            }
            Some(_) => {}
        }
    }
}

fn value(kind: Kind) -> Value {
    Value { kind: Some(kind) }
}

fn string(s: &str) -> Value {
    value(Kind::StringValue(s.to_owned()))
}

fn number(n: f64) -> Value {
    value(Kind::NumberValue(n))
}

fn list(values: Vec<Value>) -> Value {
    value(Kind::ListValue(ListValue { values }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(pairs: &[(&str, Value)]) -> Struct {
        Struct {
            fields: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn the_first_value_wins_and_mappings_merge() {
        let mut dest = s(&[
            ("name", string("a")),
            ("nested", value(Kind::StructValue(s(&[("x", number(1.0))])))),
        ]);
        let src = s(&[
            ("name", string("b")),
            ("other", string("c")),
            (
                "nested",
                value(Kind::StructValue(s(&[
                    ("x", number(2.0)),
                    ("y", number(3.0)),
                ]))),
            ),
        ]);
        merge(&mut dest, &src);
        let want = s(&[
            ("name", string("a")),
            ("other", string("c")),
            (
                "nested",
                value(Kind::StructValue(s(&[
                    ("x", number(1.0)),
                    ("y", number(3.0)),
                ]))),
            ),
        ]);
        assert_eq!(dest, want);
    }
}
