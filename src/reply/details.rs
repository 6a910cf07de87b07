//! The response code details of a rejection, which Envoy logs as
//! `%RESPONSE_CODE_DETAILS%`: which rules rejected the request.

use super::{DETAILS, MAX_DETAILS_RULES};
use std::borrow::Cow;

/// The response code details of a rejection by `rules` (in configuration order):
/// `floodgate_rate_limited{per-tenant,per-route}`, the braces as in Envoy's own details.
/// Rule names are letters, digits, `-` and `_` (checked in the configuration), so the
/// details never hold whitespace Envoy would rewrite; past [`MAX_DETAILS_RULES`] names
/// the rest are counted (`{a,b,c,d,+2}`). Without a rule (the service did not say which
/// descriptor was over) it is plain `floodgate_rate_limited`.
pub fn rejection_details(rules: &[&str]) -> Cow<'static, str> {
    details_of(rules.iter().copied())
}

/// [`rejection_details`] of the names `rules` yields, read where they are (no list of
/// them first).
pub(super) fn details_of<'a>(mut rules: impl Iterator<Item = &'a str>) -> Cow<'static, str> {
    let Some(first) = rules.next() else {
        return Cow::Borrowed(DETAILS);
    };
    let Some(second) = rules.next() else {
        // One rule, the usual rejection: one allocation of the exact length, no growth.
        let mut details = String::with_capacity(DETAILS.len() + 2 + first.len());
        details.push_str(DETAILS);
        details.push('{');
        details.push_str(first);
        details.push('}');
        return Cow::Owned(details);
    };
    let mut details = String::with_capacity(DETAILS.len() + 3 + first.len() + second.len() + 16);
    details.push_str(DETAILS);
    details.push('{');
    details.push_str(first);
    details.push(',');
    details.push_str(second);
    let mut listed = 2;
    let mut more = 0usize;
    for name in rules {
        if listed < MAX_DETAILS_RULES {
            details.push(',');
            details.push_str(name);
            listed += 1;
        } else {
            more += 1;
        }
    }
    if more > 0 {
        details.push_str(",+");
        floodgate_common::decimal::push_decimal(&mut details, more as u64);
    }
    details.push('}');
    Cow::Owned(details)
}
