//! How one request descriptor was decided, as the `result` label of the decision
//! metrics counts it (per domain in [`super::domains`], per limit in [`super::limits`]).

/// How one request descriptor was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Within its limit.
    Ok,
    /// Over its limit, answered OVER_LIMIT.
    OverLimit,
    /// Over a shadow-mode limit, answered OK.
    ShadowOverLimit,
    /// No limit applies (no match, or `unlimited`).
    NoLimit,
}

pub(super) const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Ok, "ok"),
    (Outcome::OverLimit, "over_limit"),
    (Outcome::ShadowOverLimit, "shadow_over_limit"),
    (Outcome::NoLimit, "no_limit"),
];
