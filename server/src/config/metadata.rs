//! A descriptor's `metadata` (any YAML mapping) as the `google.protobuf.Struct` the response
//! carries, converted once at load time.
//!
//! As the reference: keys that are numbers or booleans are taken as their text; numbers
//! become protobuf numbers (doubles), `~` becomes null. What a Struct cannot hold (a
//! mapping used as a key, YAML tags) is refused with its path.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};
use serde_yaml_ng::{Mapping, Value as Yaml};
use std::collections::BTreeMap;

/// `mapping` as a Struct; `Err((path below the metadata, message))`.
pub(super) fn to_struct(mapping: &Mapping) -> Result<Struct, (String, String)> {
    let mut fields = BTreeMap::new();
    for (k, v) in mapping {
        let key = key_text(k).ok_or_else(|| {
            (
                String::new(),
                format!(
                    "keys must be strings, numbers or booleans, found {}",
                    kind(k)
                ),
            )
        })?;
        let value = to_value(v).map_err(|(path, msg)| (join(&key, &path), msg))?;
        fields.insert(key, value);
    }
    Ok(Struct { fields })
}

fn to_value(v: &Yaml) -> Result<Value, (String, String)> {
    let kind = match v {
        Yaml::Null => Kind::NullValue(0),
        Yaml::Bool(b) => Kind::BoolValue(*b),
        Yaml::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Yaml::String(s) => Kind::StringValue(s.clone()),
        Yaml::Sequence(items) => {
            let mut values = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                values.push(to_value(item).map_err(|(path, msg)| (format!("[{i}]{path}"), msg))?);
            }
            Kind::ListValue(ListValue { values })
        }
        Yaml::Mapping(m) => Kind::StructValue(to_struct(m)?),
        Yaml::Tagged(_) => {
            return Err((String::new(), "YAML tags are not supported here".to_owned()))
        }
    };
    Ok(Value { kind: Some(kind) })
}

fn key_text(k: &Yaml) -> Option<String> {
    match k {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn kind(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "null",
        Yaml::Sequence(_) => "a sequence",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
        _ => "a scalar",
    }
}

/// `key` then the rest of a path (`[0]…` or `.x…`), as a field path.
fn join(key: &str, rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') {
        format!(".{key}{rest}")
    } else {
        format!(".{key}.{}", rest.trim_start_matches('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Mapping {
        serde_yaml_ng::from_str(text).unwrap()
    }

    #[test]
    fn nested_values_convert() {
        let s = to_struct(&yaml(
            "name: svc\nquota: {n: 2, on: true, tags: [a, 1]}\n5: x\nz: ~\n",
        ))
        .unwrap();
        let quota = match &s.fields["quota"].kind {
            Some(Kind::StructValue(q)) => q,
            other => panic!("{other:?}"),
        };
        assert_eq!(quota.fields["n"].kind, Some(Kind::NumberValue(2.0)));
        assert_eq!(quota.fields["on"].kind, Some(Kind::BoolValue(true)));
        assert_eq!(s.fields["5"].kind, Some(Kind::StringValue("x".into())));
        assert_eq!(s.fields["z"].kind, Some(Kind::NullValue(0)));
    }

    #[test]
    fn a_mapping_as_a_key_is_refused_with_its_path() {
        let err = to_struct(&yaml("a:\n  b: [1, {? [x] : y}]\n")).unwrap_err();
        assert_eq!(err.0, ".a.b[1]");
        assert_eq!(
            err.1,
            "keys must be strings, numbers or booleans, found a sequence"
        );
    }
}
