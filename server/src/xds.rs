//! The xDS configuration source: floodgate-server as an ADS (state of the world) client of
//! a management server such as Envoy Gateway, asking for the reference's `RateLimitConfig`
//! resources (`type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig`).
//!
//! - [`session`]: the protocol, pure: the subscription, and each response turned into a
//!   configuration and its ACK, or a NACK with the validation error; the reconnect back-off.
//! - [`client`]: the tokio task carrying it out over a tonic stream.
//! - [`crate::metrics::XdsMetrics`]: pushes applied and rejected, whether the stream is
//!   up, reconnects.
//! - Here, the conversion: resources turned into the configuration files' own form and
//!   validated by the very same code as a file (see [`crate::config::parse_with`]), so
//!   every key means what it means in a file and every error names its field path, e.g.
//!   `xds:api: descriptors[0].rate_limit.unit: ...`.
//!
//! Each resource is one "file" named `xds:<resource name>`; the whole set is validated
//! at once, so two resources with one domain are refused as two files would be. The
//! result is a whole `Config`, put in force as a file reload's is (keeping the counters
//! of every limit whose definition did not change).

pub mod client;
pub mod session;

use crate::config::{self, source, Config, ConfigError, LoadOptions};
use crate::proto::rls_conf::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;
use serde_yaml_ng::{Mapping, Number, Value};
use std::path::PathBuf;

/// The resource type floodgate-server asks its ADS server for.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// Decodes, converts and validates one response's resources into a configuration;
/// an error names the resource and the field.
pub fn parse_resources(
    resources: &[prost_types::Any],
    options: &LoadOptions,
) -> Result<Config, ConfigError> {
    let files = resources
        .iter()
        .enumerate()
        .map(|(i, any)| {
            let at = PathBuf::from(format!("xds:resources[{i}]"));
            if any.type_url != TYPE_URL {
                return Err(ConfigError::new(
                    &at,
                    "type_url",
                    format!("expected {TYPE_URL}, got {:?}", any.type_url),
                ));
            }
            let resource = RateLimitConfig::decode(any.value.as_slice())
                .map_err(|e| ConfigError::new(&at, "", format!("cannot decode: {e}")))?;
            Ok(to_file(&resource, i))
        })
        .collect::<Result<Vec<_>, _>>()?;
    config::parse_with(
        &source::Files {
            root: PathBuf::from("xds"),
            files,
        },
        options,
    )
}

/// One resource as a configuration file: its name and YAML text.
pub fn to_file(resource: &RateLimitConfig, index: usize) -> (PathBuf, String) {
    let name = match resource.name.as_str() {
        "" => format!("xds:resources[{index}]"),
        n => format!("xds:{n}"),
    };
    let mut file = Mapping::new();
    file.insert("domain".into(), resource.domain.clone().into());
    file.insert("descriptors".into(), descriptors(&resource.descriptors));
    // A mapping of strings, numbers and booleans always serialises.
    let text = serde_yaml_ng::to_string(&Value::Mapping(file)).unwrap_or_default();
    (PathBuf::from(name), text)
}

fn descriptors(list: &[RateLimitDescriptor]) -> Value {
    Value::Sequence(list.iter().map(descriptor).collect())
}

fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut m = Mapping::new();
    m.insert("key".into(), d.key.clone().into());
    if !d.value.is_empty() {
        m.insert("value".into(), d.value.clone().into());
    }
    if let Some(policy) = &d.rate_limit {
        m.insert("rate_limit".into(), rate_limit(policy));
    }
    for (key, on) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
        ("share_threshold", d.share_threshold),
        ("value_to_metric", d.value_to_metric),
    ] {
        if on {
            m.insert(key.into(), true.into());
        }
    }
    if let Some(q) = &d.quota {
        let mut quota = Mapping::new();
        quota.insert("requests".into(), Value::Number(q.requests.into()));
        quota.insert("valid_ms".into(), Value::Number(q.valid_ms.into()));
        m.insert("quota".into(), Value::Mapping(quota));
    }
    if let Some(meta) = &d.metadata {
        m.insert("metadata".into(), structure(meta));
    }
    if !d.descriptors.is_empty() {
        m.insert("descriptors".into(), descriptors(&d.descriptors));
    }
    Value::Mapping(m)
}

fn rate_limit(p: &RateLimitPolicy) -> Value {
    let mut m = Mapping::new();
    let unit = match RateLimitUnit::try_from(p.unit) {
        Ok(RateLimitUnit::Unknown) => None,
        Ok(u) => Some(u.as_str_name().to_ascii_lowercase()),
        // Left for the validator to refuse with the field's path.
        Err(_) => Some(format!("unit number {}", p.unit)),
    };
    if let Some(unit) = unit {
        m.insert("unit".into(), unit.into());
    }
    m.insert(
        "requests_per_unit".into(),
        Value::Number(p.requests_per_unit.into()),
    );
    if p.unit_multiplier != 0 {
        m.insert(
            "unit_multiplier".into(),
            Value::Number(p.unit_multiplier.into()),
        );
    }
    if p.unlimited {
        m.insert("unlimited".into(), true.into());
    }
    if !p.name.is_empty() {
        m.insert("name".into(), p.name.clone().into());
    }
    if !p.algorithm.is_empty() {
        m.insert("algorithm".into(), p.algorithm.clone().into());
    }
    if p.burst != 0 {
        m.insert("burst".into(), Value::Number(p.burst.into()));
    }
    if !p.replaces.is_empty() {
        let list = p.replaces.iter().map(|r| {
            let mut e = Mapping::new();
            e.insert("name".into(), r.name.clone().into());
            Value::Mapping(e)
        });
        m.insert("replaces".into(), Value::Sequence(list.collect()));
    }
    Value::Mapping(m)
}

/// A protobuf Struct as a YAML mapping (the file's `metadata`).
fn structure(s: &prost_types::Struct) -> Value {
    Value::Mapping(
        s.fields
            .iter()
            .map(|(k, v)| (Value::from(k.clone()), value(v)))
            .collect(),
    )
}

fn value(v: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => Value::Number(Number::from(*n)),
        Some(Kind::StringValue(s)) => s.clone().into(),
        Some(Kind::BoolValue(b)) => (*b).into(),
        Some(Kind::StructValue(s)) => structure(s),
        Some(Kind::ListValue(l)) => Value::Sequence(l.values.iter().map(value).collect()),
    }
}

#[cfg(test)]
mod tests;
