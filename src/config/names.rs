//! The names users write in the configuration, checked in one place for every section
//! that takes one: header names (a rule's descriptor and cost headers, a response
//! cost's header) and rule names.

use super::ConfigError;
use std::sync::Arc;

/// Shown in Envoy's access logs as the response code details of a rejection, followed
/// by the rules that rejected it in braces (see [`crate::reply::rejection_details`]).
/// Here, with the rule names, so that each rule makes its own once ([`rule_details`]).
pub const DETAILS: &str = "floodgate_rate_limited";

/// The response code details of a rejection by rule `name` alone,
/// `floodgate_rate_limited{name}` (what [`crate::reply::rejection_details`] makes of
/// that one name, tested): shared by each such reply, which then builds no string.
pub(super) fn rule_details(name: &str) -> Arc<str> {
    format!("{DETAILS}{{{name}}}").into()
}

/// The longest rule name: it becomes part of metric names.
const MAX_NAME_LEN: usize = 64;

/// A valid header name, lower-cased (Envoy's header maps are lower-case).
pub(super) fn header_name(at: &str, header: String) -> Result<String, ConfigError> {
    if header.is_empty() || header.bytes().any(|b| b <= b' ' || b == b':' || b >= 0x7f) {
        return Err(ConfigError::new(
            at,
            format!("{header:?} is not a header name"),
        ));
    }
    Ok(header.to_ascii_lowercase())
}

/// A valid rule name: it becomes part of metric names and of the reply's details.
pub(super) fn rule_name(at: &str, name: String) -> Result<String, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::new(at, "must not be empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(ConfigError::new(
            at,
            format!("must be at most {MAX_NAME_LEN} characters"),
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ConfigError::new(
            at,
            "may contain only letters, digits, `-` and `_` (it becomes part of metric names)",
        ));
    }
    Ok(name)
}
