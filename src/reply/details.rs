//! The response code details of a rejection, which Envoy logs as
//! `%RESPONSE_CODE_DETAILS%`: which rules rejected the request.

use super::{DETAILS, MAX_DETAILS_RULES};
use std::sync::Arc;

/// A reply's response code details. A rejection by one rule, the usual one, shares the
/// details its rule made once with the configuration ([`crate::config::Rule::details`])
/// instead of building them anew for each reply.
#[derive(Debug, Clone, Eq)]
pub enum Details {
    /// Fixed text: a failure, a refusal, a rejection that names no rule.
    Fixed(&'static str),
    /// One rule's rejection details, shared with the configuration.
    Rule(Arc<str>),
    /// Several rules' names, listed for this reply.
    Listed(String),
}

impl Details {
    /// The text handed to the host.
    pub fn as_str(&self) -> &str {
        match self {
            Details::Fixed(text) => text,
            Details::Rule(text) => text,
            Details::Listed(text) => text,
        }
    }
}

/// The same text is the same details, however it is held.
impl PartialEq for Details {
    fn eq(&self, other: &Details) -> bool {
        self.as_str() == other.as_str()
    }
}

/// Compared with text as text (tests, and what a log line shows).
impl PartialEq<&str> for Details {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Fixed text.
impl From<&'static str> for Details {
    fn from(text: &'static str) -> Details {
        Details::Fixed(text)
    }
}

/// Text made for one reply.
impl From<String> for Details {
    fn from(text: String) -> Details {
        Details::Listed(text)
    }
}

/// The response code details of a rejection by `rules` (in configuration order):
/// `floodgate_rate_limited{per-tenant,per-route}`, the braces as in Envoy's own details.
/// Rule names are letters, digits, `-` and `_` (checked in the configuration), so the
/// details never hold whitespace Envoy would rewrite; past [`MAX_DETAILS_RULES`] names
/// the rest are counted (`{a,b,c,d,+2}`). Without a rule (the service did not say which
/// descriptor was over) it is plain `floodgate_rate_limited`.
pub fn rejection_details(rules: &[&str]) -> Details {
    details_of(rules.iter().copied())
}

/// [`rejection_details`] of the names `rules` yields, read where they are (no list of
/// them first).
pub(super) fn details_of<'a>(mut rules: impl Iterator<Item = &'a str>) -> Details {
    let Some(first) = rules.next() else {
        return Details::Fixed(DETAILS);
    };
    let Some(second) = rules.next() else {
        // One rule (made once per rule with the configuration): one allocation of the
        // exact length, no growth.
        let mut details = String::with_capacity(DETAILS.len() + 2 + first.len());
        details.push_str(DETAILS);
        details.push('{');
        details.push_str(first);
        details.push('}');
        return Details::Listed(details);
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
    Details::Listed(details)
}
