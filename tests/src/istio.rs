//! The Istio manifests under `envoy/istio/`, read the way Istio reads them.
//!
//! The manifests are templates: `${NAME}` stands for what only the user knows (their
//! image reference, the digest `make oci` printed), rendered with `envsubst` as the README
//! shows. [`render`] does the same substitution for the tests.

use crate::paths;
use serde::Deserialize;
use serde_json::{Number, Value};
use std::collections::BTreeMap;

/// The variables the manifests may use, each with a value of the right shape for tests.
pub const TEMPLATE_VARIABLES: [(&str, &str); 3] = [
    ("FLOODGATE_IMAGE", "registry.example.com/floodgate:0.1.0"),
    (
        "FLOODGATE_DIGEST",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    (
        "FLOODGATE_SERVER_IMAGE",
        "registry.example.com/floodgate-server:0.1.0",
    ),
];

/// One YAML document of a manifest file, as JSON.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it came from, relative to the repository root.
    pub file: String,
    /// The document.
    pub value: Value,
}

impl Document {
    /// `kind/namespace/name`, for messages.
    pub fn id(&self) -> String {
        format!(
            "{} {}/{}/{}",
            self.file,
            self.value["kind"].as_str().unwrap_or("?"),
            self.value["metadata"]["namespace"].as_str().unwrap_or(""),
            self.value["metadata"]["name"].as_str().unwrap_or("?")
        )
    }
}

/// Replaces every `${NAME}` of [`TEMPLATE_VARIABLES`] in `text`, as `envsubst` does;
/// panics on any other `${…}`, so a new placeholder cannot appear undocumented.
pub fn render(file: &str, text: &str) -> String {
    let mut out = text.to_string();
    for (name, value) in TEMPLATE_VARIABLES {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    if let Some(at) = out.find("${") {
        let rest: String = out[at..].chars().take(40).collect();
        panic!("{file}: unknown template variable at {rest:?}");
    }
    out
}

/// Every document of every `envoy/istio/*.yaml`, rendered, in file order.
pub fn documents() -> Vec<Document> {
    let dir = paths::repo_root().join("envoy/istio");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for path in files {
        let file = format!(
            "envoy/istio/{}",
            path.file_name().expect("file name").to_string_lossy()
        );
        let text = render(
            &file,
            &std::fs::read_to_string(&path).expect("read manifest"),
        );
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{file}: {e}"));
            if !value.is_null() {
                documents.push(Document {
                    file: file.clone(),
                    value,
                });
            }
        }
    }
    documents
}

/// The documents of one `kind`.
pub fn of_kind<'a>(documents: &'a [Document], kind: &str) -> Vec<&'a Document> {
    documents
        .iter()
        .filter(|d| d.value["kind"] == kind)
        .collect()
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

/// The labels a selector (`matchLabels` or `labels`) requires.
pub fn labels(selector: &Value) -> BTreeMap<String, String> {
    selector
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
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

    #[test]
    #[should_panic(expected = "unknown template variable")]
    fn an_undocumented_placeholder_is_refused() {
        render("x.yaml", "url: ${SOMETHING_ELSE}");
    }
}
