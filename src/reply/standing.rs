//! Where one limit stands for a request: local buckets and the rate limit service's
//! statuses alike, so that one set of rules makes a reply's fields whatever decided it.

use super::fields;
use crate::bucket::{Decision, Quota};

/// Where one limit stands for a request, whoever decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The rule (its index in the configuration).
    pub rule: usize,
    /// The limit: a bucket's capacity, or the service's requests per unit.
    pub limit: u32,
    /// Seconds over which `limit` holds, the draft-10 `w` (`None`: not known, or never
    /// refills). See [`fields`] for a bucket's.
    pub window_s: Option<u64>,
    /// Whole requests left (after this one when allowed).
    pub remaining: u32,
    /// Nanoseconds until the limit is fully available again (`None`: never).
    pub reset_ns: Option<u64>,
    /// Nanoseconds until more of the limit is available, the draft-10 `t` (`None`:
    /// never, or nothing is used up).
    pub next_ns: Option<u64>,
    /// Whether this limit admits the request.
    pub allowed: bool,
    /// When denied: nanoseconds until the same request would pass (`None`: never).
    pub retry_ns: Option<u64>,
    /// A shadow rule's limit: counted, never enforced nor shown to clients.
    pub shadow: bool,
}

impl Standing {
    /// A local bucket's decision for `rule`.
    pub fn local(rule: usize, quota: Quota, decision: Decision, shadow: bool) -> Standing {
        Standing {
            rule,
            limit: quota.capacity(),
            window_s: fields::bucket_window_s(quota.capacity(), quota.rate_micro()),
            remaining: decision.remaining(),
            reset_ns: decision.full_in_ns(),
            next_ns: decision.next_token_in_ns(quota),
            allowed: decision.is_allow(),
            retry_ns: match decision {
                Decision::Deny { retry_in_ns, .. } => retry_in_ns,
                Decision::Allow { .. } => Some(0),
            },
            shadow,
        }
    }

    /// Whether this limit rejects the request (an enforced denial).
    pub fn rejects(&self) -> bool {
        !self.allowed && !self.shadow
    }
}
