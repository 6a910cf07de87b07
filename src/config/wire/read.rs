//! Reads the wire types out of a parsed [`Value`], refusing unknown and duplicate fields
//! and wrong types with the field's path and serde's wording (`missing field `name``,
//! `invalid type: string "10", expected f64`), which the configuration's error fixtures
//! and users' scripts know.
//!
//! A reader of more than two fields fills its value in one field at a time: an error then
//! drops one whole value, where a struct literal drops the fields read so far, a sequence
//! of its own after each field (3.9 KB of the module, 2.6 KB of it the rule reader's).
#![allow(
    clippy::field_reassign_with_default,
    reason = "the readers fill a value field by field, for the size (see above)"
)]

use super::{
    Concurrency, Config, Cost, Entry, FailureMode, Global, JsonPaths, Local, Match, Response,
    ResponseCost, Rls, Rule, Source,
};
use crate::config::json::{Integer, Number, Value};
use crate::config::ConfigError;

type Read<T> = fn(&str, Value) -> Result<T, ConfigError>;

/// The wire configuration in a parsed document.
pub(in crate::config) fn config(v: Value) -> Result<Config, ConfigError> {
    const FIELDS: &[&str] = &[
        "rules",
        "response",
        "max_buckets",
        "max_descriptor_value_bytes",
        "failure_mode",
        "failure_status",
        "rls",
    ];
    let mut f = Fields::new(String::new(), v, "struct Config", FIELDS)?;
    let mut r = Config::default();
    r.rules = f.required("rules", |at, v| list(at, v, rule))?;
    r.response = f.optional("response", response)?;
    r.max_buckets = f.optional("max_buckets", unsigned)?;
    r.max_descriptor_value_bytes = f.optional("max_descriptor_value_bytes", unsigned)?;
    r.failure_mode = f.optional("failure_mode", failure_mode)?;
    r.failure_status = f.optional("failure_status", unsigned)?;
    r.rls = f.optional("rls", rls)?;
    Ok(r)
}

fn rls(at: &str, v: Value) -> Result<Rls, ConfigError> {
    const FIELDS: &[&str] = &[
        "cluster",
        "domain",
        "timeout_ms",
        "failure_mode",
        "cache_over_limit",
        "over_limit_cache_slots",
        "over_limit_cache_max_seconds",
        "lease_slots",
        "max_grant_requests",
        "max_grant_valid_ms",
    ];
    let mut f = Fields::new(at.to_string(), v, "struct Rls", FIELDS)?;
    let mut r = Rls::default();
    r.cluster = f.required("cluster", string)?;
    r.domain = f.required("domain", string)?;
    r.timeout_ms = f.optional("timeout_ms", unsigned)?;
    r.failure_mode = f.optional("failure_mode", failure_mode)?;
    r.cache_over_limit = f.optional("cache_over_limit", boolean)?;
    r.over_limit_cache_slots = f.optional("over_limit_cache_slots", unsigned)?;
    r.over_limit_cache_max_seconds = f.optional("over_limit_cache_max_seconds", unsigned)?;
    r.lease_slots = f.optional("lease_slots", unsigned)?;
    r.max_grant_requests = f.optional("max_grant_requests", unsigned)?;
    r.max_grant_valid_ms = f.optional("max_grant_valid_ms", unsigned)?;
    Ok(r)
}

fn rule(at: &str, v: Value) -> Result<Rule, ConfigError> {
    const FIELDS: &[&str] = &[
        "name",
        "match",
        "descriptors",
        "local",
        "global",
        "concurrency",
        "cost",
        "shadow",
    ];
    let mut f = Fields::new(at.to_string(), v, "struct Rule", FIELDS)?;
    let mut r = Rule::default();
    r.name = f.required("name", string)?;
    r.matcher = f.optional("match", matcher)?;
    r.descriptors = f.required("descriptors", |at, v| list(at, v, entry))?;
    r.local = f.optional("local", local)?;
    r.global = f.optional("global", global)?;
    r.concurrency = f.optional("concurrency", concurrency)?;
    r.cost = f.optional("cost", cost)?;
    r.shadow = f.optional("shadow", boolean)?;
    Ok(r)
}

fn matcher(at: &str, v: Value) -> Result<Match, ConfigError> {
    let mut f = Fields::new(
        at.to_string(),
        v,
        "struct Match",
        &["path_prefix", "methods"],
    )?;
    Ok(Match {
        path_prefix: f.optional("path_prefix", string)?,
        methods: f.optional("methods", |at, v| list(at, v, string))?,
    })
}

fn entry(at: &str, v: Value) -> Result<Entry, ConfigError> {
    const FIELDS: &[&str] = &["key", "header", "value", "source"];
    let mut f = Fields::new(at.to_string(), v, "struct Entry", FIELDS)?;
    let mut r = Entry::default();
    r.key = f.required("key", string)?;
    r.header = f.optional("header", string)?;
    r.value = f.optional("value", string)?;
    r.source = f.optional("source", source)?;
    Ok(r)
}

fn local(at: &str, v: Value) -> Result<Local, ConfigError> {
    const FIELDS: &[&str] = &["capacity", "refill_per_second"];
    let mut f = Fields::new(at.to_string(), v, "struct Local", FIELDS)?;
    Ok(Local {
        capacity: f.required("capacity", unsigned)?,
        refill_per_second: f.required("refill_per_second", number)?,
    })
}

fn global(at: &str, v: Value) -> Result<Global, ConfigError> {
    let mut f = Fields::new(at.to_string(), v, "struct Global", &["fallback", "quota"])?;
    Ok(Global {
        fallback: f.optional("fallback", local)?,
        quota: f.optional("quota", boolean)?,
    })
}

fn concurrency(at: &str, v: Value) -> Result<Concurrency, ConfigError> {
    const FIELDS: &[&str] = &["max", "max_duration_seconds", "global"];
    let mut f = Fields::new(at.to_string(), v, "struct Concurrency", FIELDS)?;
    Ok(Concurrency {
        max: f.optional("max", unsigned)?,
        max_duration_seconds: f.optional("max_duration_seconds", unsigned)?,
        global: f.optional("global", no_fields)?.is_some(),
    })
}

/// An object that must have no member: `"global": {}`, whose presence is all it says.
fn no_fields(at: &str, v: Value) -> Result<(), ConfigError> {
    Fields::new(at.to_string(), v, "struct Global", &[]).map(|_| ())
}

fn cost(at: &str, v: Value) -> Result<Cost, ConfigError> {
    let mut f = Fields::new(at.to_string(), v, "struct Cost", &["header", "response"])?;
    Ok(Cost {
        header: f.optional("header", string)?,
        response: f.optional("response", response_cost)?,
    })
}

fn response_cost(at: &str, v: Value) -> Result<ResponseCost, ConfigError> {
    const FIELDS: &[&str] = &[
        "header",
        "json",
        "estimate",
        "fallback",
        "max",
        "max_scan_bytes",
    ];
    let mut f = Fields::new(at.to_string(), v, "struct ResponseCost", FIELDS)?;
    let mut r = ResponseCost::default();
    r.header = f.optional("header", string)?;
    r.json = f.optional("json", json_paths)?;
    r.estimate = f.optional("estimate", unsigned)?;
    r.fallback = f.optional("fallback", unsigned)?;
    r.max = f.optional("max", unsigned)?;
    r.max_scan_bytes = f.optional("max_scan_bytes", unsigned)?;
    Ok(r)
}

/// One path or a list of them; any other type is told what is expected.
fn json_paths(at: &str, v: Value) -> Result<JsonPaths, ConfigError> {
    match v {
        Value::String(s) => Ok(JsonPaths(vec![s])),
        Value::Array(_) => list(at, v, string).map(JsonPaths),
        other => Err(invalid_type(
            at,
            &other,
            "a dotted path (\"usage.total_tokens\") or a list of paths to sum",
        )),
    }
}

fn response(at: &str, v: Value) -> Result<Response, ConfigError> {
    const FIELDS: &[&str] = &[
        "status",
        "body",
        "headers_on_allowed",
        "headers",
        "body_format",
        "retry_after_jitter",
    ];
    let mut f = Fields::new(at.to_string(), v, "struct Response", FIELDS)?;
    let mut r = Response::default();
    r.status = f.optional("status", unsigned)?;
    r.body = f.optional("body", string)?;
    r.headers_on_allowed = f.optional("headers_on_allowed", boolean)?;
    r.headers = f.optional("headers", string)?;
    r.body_format = f.optional("body_format", string)?;
    r.retry_after_jitter = f.optional("retry_after_jitter", number)?;
    Ok(r)
}

fn failure_mode(at: &str, v: Value) -> Result<FailureMode, ConfigError> {
    match variant(at, v, &["allow", "deny"])? {
        0 => Ok(FailureMode::Allow),
        _ => Ok(FailureMode::Deny),
    }
}

fn source(at: &str, v: Value) -> Result<Source, ConfigError> {
    const VARIANTS: &[&str] = &["path", "method", "authority", "remote_address"];
    Ok(match variant(at, v, VARIANTS)? {
        0 => Source::Path,
        1 => Source::Method,
        2 => Source::Authority,
        _ => Source::RemoteAddress,
    })
}

/// The index in `variants` of the string `v`.
fn variant(at: &str, v: Value, variants: &[&str]) -> Result<usize, ConfigError> {
    let Value::String(s) = v else {
        return Err(invalid_type(at, &v, &one_of(variants)));
    };
    variants.iter().position(|&name| name == s).ok_or_else(|| {
        ConfigError::new(
            at,
            format!("unknown variant `{s}`, expected {}", one_of(variants)),
        )
    })
}

fn list<T>(at: &str, v: Value, read: Read<T>) -> Result<Vec<T>, ConfigError> {
    let Value::Array(items) = v else {
        return Err(invalid_type(at, &v, "a sequence"));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(read(&format!("{at}[{i}]"), item)?);
    }
    Ok(out)
}

fn string(at: &str, v: Value) -> Result<String, ConfigError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(invalid_type(at, &other, "a string")),
    }
}

fn boolean(at: &str, v: Value) -> Result<bool, ConfigError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(invalid_type(at, &other, "a boolean")),
    }
}

fn unsigned(at: &str, v: Value) -> Result<u64, ConfigError> {
    if let Value::Number(n) = &v {
        match n.integer() {
            Integer::Unsigned(n) => return Ok(n),
            Integer::Negative(n) => {
                return Err(ConfigError::new(
                    at,
                    format!("invalid value: integer `{n}`, expected u64"),
                ))
            }
            Integer::Other => {}
        }
    }
    Err(invalid_type(at, &v, "u64"))
}

/// A number that may have a fraction (serde's `f64`; kept exact, see [`Number`]).
fn number(at: &str, v: Value) -> Result<Number, ConfigError> {
    match v {
        Value::Number(n) => Ok(n),
        other => Err(invalid_type(at, &other, "f64")),
    }
}

fn invalid_type(at: &str, v: &Value, expected: &str) -> ConfigError {
    let found = match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => match n.integer() {
            Integer::Unsigned(_) | Integer::Negative(_) => format!("integer `{}`", n.text()),
            Integer::Other => format!("floating point `{}`", n.text()),
        },
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".to_string(),
        Value::Object(_) => "map".to_string(),
    };
    ConfigError::new(at, format!("invalid type: {found}, expected {expected}"))
}

/// serde's list of what was expected: "`a`", "`a` or `b`", "one of `a`, `b`, `c`".
fn one_of(names: &[&str]) -> String {
    match names {
        [one] => format!("`{one}`"),
        [a, b] => format!("`{a}` or `{b}`"),
        _ => {
            let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("one of {}", quoted.join(", "))
        }
    }
}

/// An object's members, taken one field at a time.
struct Fields {
    at: String,
    members: Vec<(String, Value)>,
}

impl Fields {
    /// Checks that `v` is an object whose keys are all in `known`, each once.
    fn new(at: String, v: Value, what: &str, known: &[&str]) -> Result<Fields, ConfigError> {
        let Value::Object(members) = v else {
            return Err(invalid_type(&at, &v, what));
        };
        for (i, (key, _)) in members.iter().enumerate() {
            if !known.contains(&key.as_str()) {
                return Err(ConfigError::new(
                    child(&at, key),
                    match known {
                        [] => format!("unknown field `{key}`, there are no fields"),
                        _ => format!("unknown field `{key}`, expected {}", one_of(known)),
                    },
                ));
            }
            if members[..i].iter().any(|(k, _)| k == key) {
                return Err(ConfigError::new(
                    at.as_str(),
                    format!("duplicate field `{key}`"),
                ));
            }
        }
        Ok(Fields { at, members })
    }

    fn take(&mut self, name: &str) -> Option<Value> {
        let i = self.members.iter().position(|(k, _)| k == name)?;
        Some(self.members.swap_remove(i).1)
    }

    /// A field that may be left out; `null` counts as left out.
    fn optional<T>(&mut self, name: &str, read: Read<T>) -> Result<Option<T>, ConfigError> {
        match self.take(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => read(&child(&self.at, name), v).map(Some),
        }
    }

    fn required<T>(&mut self, name: &str, read: Read<T>) -> Result<T, ConfigError> {
        match self.take(name) {
            None => Err(ConfigError::new(
                self.at.as_str(),
                format!("missing field `{name}`"),
            )),
            Some(v) => read(&child(&self.at, name), v),
        }
    }
}

fn child(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        crate::config::field(at, name)
    }
}
