//! What a response's cost comes to: the charge the limiter settles, and why it is not
//! what the response reported when it is not.

use crate::config::ResponseCost;
use crate::request::descriptor::Values;
use crate::shared::local::Held;

/// What one rule's request cost, once its response is done: the value
/// `Limiter::settle` charges (locally) or reports (global rules: the stream-end charge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The rule.
    pub rule: usize,
    /// Its descriptor values.
    pub values: Values,
    /// The local tokens the request holds (taken at admission: the estimate).
    pub held: Option<Held>,
    /// What the request cost.
    pub usage: Usage,
}

/// A request's cost as the response reported it, or what is charged instead and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// The response reported this cost.
    Reported(u32),
    /// It reported more than the rule's `max`: `max` is charged.
    Clamped {
        /// What it reported.
        reported: u32,
        /// The tokens charged (the rule's `max`).
        cost: u32,
    },
    /// It reported none: the rule's `fallback` is charged.
    Fallback {
        /// The tokens charged.
        cost: u32,
        /// Why.
        why: NoUsage,
    },
}

impl Usage {
    /// The tokens the request costs in total.
    pub fn cost(&self) -> u32 {
        match *self {
            Usage::Reported(cost) | Usage::Clamped { cost, .. } | Usage::Fallback { cost, .. } => {
                cost
            }
        }
    }
}

/// Why a response's cost is not known, in the order they are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoUsage {
    /// The request went away before the response reported one.
    CutOff,
    /// The body is compressed (the upstream ignored `accept-encoding: identity`).
    Encoded,
    /// The body is not JSON, or the header is not a whole number (or is repeated).
    Unreadable,
    /// A complete event stream none of whose events reports one (an OpenAI client that
    /// left out `stream_options.include_usage`).
    StreamAbsent,
    /// The response is complete and readable, and reports none.
    Absent,
}

/// What a rule charges for what its response reported.
pub(super) fn usage(cost: &ResponseCost, reported: Option<u32>, why: NoUsage) -> Usage {
    match reported {
        Some(n) if n > cost.max => Usage::Clamped {
            reported: n,
            cost: cost.max,
        },
        Some(n) => Usage::Reported(n),
        None => Usage::Fallback {
            cost: cost.fallback,
            why,
        },
    }
}
