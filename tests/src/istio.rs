//! The Istio manifests under `examples/istio/`, with floodgate-server's under `deploy/` (the
//! global mode's limiter), read the way Istio reads them.

use crate::manifests;
use serde_json::{Number, Value};

pub use crate::manifests::{
    labels, named, of_kind, render, server_deployments, Document, TEMPLATE_VARIABLES,
};

/// Every document of `examples/istio/` and then of `deploy/`, rendered, in file order.
pub fn documents() -> Vec<Document> {
    let mut documents = manifests::read("examples/istio");
    documents.extend(manifests::deploy());
    documents
}

/// Every WasmPlugin (there is at least one).
pub fn wasm_plugins(documents: &[Document]) -> Vec<&Document> {
    let plugins = of_kind(documents, "WasmPlugin");
    assert!(!plugins.is_empty(), "no WasmPlugin in examples/istio/");
    plugins
}

/// Whether a WasmPlugin runs the filter in global mode (it names a rate limit service).
pub fn is_global(plugin: &Document) -> bool {
    plugin.value["spec"]["pluginConfig"].get("rls").is_some()
}

/// The filter configuration Istio gives Envoy for a WasmPlugin: `pluginConfig` is a
/// `google.protobuf.Struct`, whose numbers are doubles, written back as JSON into the
/// filter's `StringValue`. A whole number comes out without a fraction (`20`, not `20.0`).
pub fn plugin_configuration(plugin: &Value) -> String {
    as_struct(plugin["spec"]["pluginConfig"].clone()).to_string()
}

fn as_struct(value: Value) -> Value {
    match value {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // Doubles that are whole and exactly representable print as integers.
            if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
                Value::Number(Number::from(f as i64))
            } else {
                Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(as_struct).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, as_struct(v))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn struct_numbers_are_doubles_printed_like_protojson() {
        let plugin = json!({"spec": {"pluginConfig": {"a": 20.0, "b": 0.5, "c": [1, 2.0]}}});
        assert_eq!(
            plugin_configuration(&plugin),
            r#"{"a":20,"b":0.5,"c":[1,2]}"#
        );
    }
}
