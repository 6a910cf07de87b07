//! Counting what the limiter found out: the one function that writes to the [`Tally`].
//!
//! Each step of a decision (the request's input, the local buckets, the service's
//! answer, the fallback buckets, a failure mode) returns what happened as a value; the
//! orchestrating functions hand each [`Outcome`] to [`record`]. So a metric is bumped in
//! exactly one place, and a step can be read without the counting around it.

use crate::config::FailureMode;
use crate::metrics::{Global, PerConcurrency, PerRule, Tally};
use crate::request::descriptor::Refusal;
use crate::shared::lease;
use crate::shared::local::TableEvents;
use crate::shared::over_limit::Stored;
use crate::usage::{NoUsage, Usage};
use crate::wire::rls::Failure;

/// Something that happened while deciding a request, to be counted.
#[derive(Debug, Clone, Copy)]
pub(super) enum Outcome<'a> {
    /// The request's input cannot be used: refused, counted by cause.
    Refused(&'a Refusal),
    /// Buckets (local or fallback) were used: the table's events, and each rule's
    /// decision as (rule, counter); none when the buckets could not be used.
    Buckets {
        /// New buckets, evictions and CAS conflicts.
        table: TableEvents,
        /// Each rule's decision.
        rules: &'a [(usize, PerRule)],
    },
    /// The buckets could not be used.
    BucketsFailed(BucketFailure),
    /// A failure mode let the request through or rejected it.
    FailureMode(FailureMode),
    /// The rate limit service could not decide.
    RlsFailed(Failure),
    /// The rate limit service decided.
    RlsDecided {
        /// Each global rule's decision.
        rules: &'a [(usize, PerRule)],
        /// Headers it sent that were dropped as unsafe.
        dropped_headers: u32,
        /// Whether it rejected the request.
        over_limit: bool,
    },
    /// The fallback buckets decided for the service.
    Fallback {
        /// Whether they let the request through.
        allowed: bool,
    },
    /// The over-limit cache was looked up for the request's enforced global rules.
    CacheLookedUp {
        /// Look-ups that failed in shared data (the call decides those rules).
        failed: u32,
        /// The rules whose remembered denial rejects the request (empty: none does).
        rejected_by: &'a [usize],
    },
    /// The service's denial could not be remembered: its body and headers do not fit.
    CacheTooLarge,
    /// A denial was written to the cache (`None`: shared data failed).
    CacheStored(Option<Stored>),
    /// The request's grants were spent (or not: then it calls).
    LeasesSpent {
        /// The rules decided from grants (empty: the request calls).
        decided_rules: &'a [usize],
        /// Compare-and-swap conflicts met.
        conflicts: u32,
        /// Shared-data calls that failed.
        failed: u32,
        /// A background refill call is made.
        refill: bool,
    },
    /// A grant was stored in the lease table (`None`: shared data failed).
    LeaseStored(Option<lease::Stored>),
    /// A grant held more hits, or lasted longer, than the configured bounds: cut to them.
    LeaseClamped,
    /// A call to the rate limit service is made.
    Asked,
    /// A response's cost is known: what it reported (or what is charged instead, and
    /// why).
    Charged(Usage),
    /// A charge was written to a local bucket; `debt_capped`: its debt stopped at one
    /// burst.
    Settled {
        /// The charge would have put the bucket more than one burst into debt.
        debt_capped: bool,
    },
    /// A stream-end charge was sent, failed, or was counted by the service.
    Charge(ChargeOutcome),
    /// A fleet-wide concurrency hold's release was sent, failed, or was answered.
    Release(ChargeOutcome),
    /// A concurrency rule's slots moved: `n` added to its `metric` (the `ordinal`-th
    /// concurrency rule of `rules`).
    Slots {
        /// How many rules the configuration has.
        rules: usize,
        /// Which concurrency rule.
        ordinal: usize,
        /// Which of its metrics.
        metric: PerConcurrency,
        /// By how much.
        n: i64,
    },
    /// A concurrency rule's key could not be decided: its window is full of live holds
    /// (`None`: shared data or contention, counted as for buckets).
    SlotsFailed(Option<BucketFailure>),
    /// The request is decided by its rules.
    Finished {
        /// Allowed (or rejected).
        allowed: bool,
        /// A shadow rule would have rejected it.
        shadow_denied: bool,
    },
}

/// What became of a charge call (or a hold's release, counted the same way), to be
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeOutcome {
    /// The call was sent.
    Sent,
    /// It could not be sent, or the service answered with an error.
    Failed,
    /// The service counted it (whatever it says of the budget now).
    Counted,
}

/// Why buckets could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BucketFailure {
    /// The host clock could not be read.
    Clock,
    /// A shared-data host call failed.
    SharedData,
    /// Too many compare-and-swap conflicts on one bucket.
    Contention,
}

/// A rule's counter for one decision: allowed, denied, or denied by a shadow rule.
pub(super) fn rule_counter(allowed: bool, shadow: bool) -> PerRule {
    match (allowed, shadow) {
        (true, _) => PerRule::Allowed,
        (false, true) => PerRule::ShadowDenied,
        (false, false) => PerRule::Denied,
    }
}

/// Counts one outcome.
pub(super) fn record(outcome: Outcome<'_>, tally: &mut Tally) {
    match outcome {
        Outcome::Refused(refusal) => tally.add(refused(refusal), 1),
        Outcome::Buckets { table, rules } => {
            tally.add(Global::Buckets, table.new_buckets);
            tally.add(Global::BucketEvictions, table.evictions);
            tally.add(Global::CasConflicts, table.conflicts);
            rules_decided(rules, tally);
        }
        Outcome::BucketsFailed(failure) => tally.add(bucket_failure(failure), 1),
        Outcome::FailureMode(mode) => tally.add(failure_mode(mode), 1),
        Outcome::RlsFailed(failure) => tally.add(rls_failure(failure), 1),
        Outcome::RlsDecided {
            rules,
            dropped_headers,
            over_limit,
        } => {
            rules_decided(rules, tally);
            tally.add(Global::RlsDroppedHeaders, dropped_headers);
            tally.add(pick(over_limit, Global::RlsOverLimit, Global::RlsOk), 1);
        }
        Outcome::Fallback { allowed } => tally.add(
            pick(allowed, Global::FallbackAllowed, Global::FallbackDenied),
            1,
        ),
        Outcome::CacheLookedUp {
            failed,
            rejected_by,
        } => cache_looked_up(failed, rejected_by, tally),
        Outcome::CacheTooLarge => tally.add(Global::OverLimitCacheTooLarge, 1),
        Outcome::CacheStored(None) | Outcome::LeaseStored(None) => {
            tally.add(Global::ErrorSharedData, 1);
        }
        Outcome::CacheStored(Some(stored)) => {
            tally.add(Global::OverLimitCacheEvictions, u32::from(stored.evicted));
            tally.add(Global::CasConflicts, stored.conflicts);
        }
        Outcome::LeasesSpent {
            decided_rules,
            conflicts,
            failed,
            refill,
        } => leases_spent(decided_rules, conflicts, failed, refill, tally),
        Outcome::LeaseStored(Some(stored)) => {
            tally.add(Global::LeaseGrants, 1);
            tally.add(Global::LeaseEvictions, u32::from(stored.evicted));
            tally.add(Global::CasConflicts, stored.conflicts);
        }
        Outcome::LeaseClamped => tally.add(Global::LeaseGrantsClamped, 1),
        Outcome::Asked => tally.add(Global::RlsCalls, 1),
        Outcome::Charged(usage) => {
            tally.add(charged(usage), 1);
            tally.add(Global::UsageTokens, usage.cost());
        }
        Outcome::Settled { debt_capped } => {
            tally.add(Global::UsageDebtCapped, u32::from(debt_capped));
        }
        Outcome::Charge(outcome) => match outcome {
            ChargeOutcome::Sent => tally.add(Global::RlsCharges, 1),
            ChargeOutcome::Failed => tally.add(Global::RlsChargeFailed, 1),
            // Counted by the service: nothing more to count here.
            ChargeOutcome::Counted => {}
        },
        Outcome::Release(outcome) => match outcome {
            ChargeOutcome::Sent => tally.add(Global::RlsReleases, 1),
            ChargeOutcome::Failed => tally.add(Global::RlsReleaseFailed, 1),
            ChargeOutcome::Counted => {}
        },
        Outcome::Slots {
            rules,
            ordinal,
            metric,
            n,
        } => tally.concurrency(rules, ordinal, metric, n),
        Outcome::SlotsFailed(None) => tally.add(Global::ConcurrencyTableFull, 1),
        Outcome::SlotsFailed(Some(failure)) => tally.add(bucket_failure(failure), 1),
        Outcome::Finished {
            allowed,
            shadow_denied,
        } => {
            tally.add(pick(allowed, Global::Allowed, Global::Denied), 1);
            if shadow_denied {
                tally.add(Global::ShadowDenied, 1);
            }
        }
    }
}

/// `yes` if `which`, else `no`.
fn pick(which: bool, yes: Global, no: Global) -> Global {
    if which {
        yes
    } else {
        no
    }
}

/// The counter of a refused request, by cause.
fn refused(refusal: &Refusal) -> Global {
    match refusal {
        Refusal::InvalidCost { .. } => Global::InvalidCost,
        Refusal::RepeatedHeader { .. } => Global::DuplicateHeader,
        Refusal::ValueTooLong { .. } | Refusal::NotUtf8 { .. } => Global::InvalidDescriptor,
    }
}

/// The counter of buckets that could not be used, by cause.
fn bucket_failure(failure: BucketFailure) -> Global {
    match failure {
        BucketFailure::Clock => Global::ErrorClock,
        BucketFailure::SharedData => Global::ErrorSharedData,
        BucketFailure::Contention => Global::ErrorContention,
    }
}

/// The counter of a failure mode taken.
fn failure_mode(mode: FailureMode) -> Global {
    match mode {
        FailureMode::Allow => Global::FailureModeAllowed,
        FailureMode::Deny => Global::FailureModeDenied,
    }
}

/// The counter of a rate limit call that could not decide, by cause.
fn rls_failure(failure: Failure) -> Global {
    match failure {
        Failure::NotSent => Global::RlsErrorNotSent,
        Failure::Timeout => Global::RlsErrorTimeout,
        Failure::Unavailable => Global::RlsErrorUnavailable,
        Failure::Status => Global::RlsErrorStatus,
        Failure::UnknownCode => Global::RlsErrorUnknownCode,
        Failure::BadResponse => Global::RlsErrorBadResponse,
    }
}

/// The counter of a response's cost: reported, clamped, or a fallback by cause.
fn charged(usage: Usage) -> Global {
    match usage {
        Usage::Reported(_) => Global::UsageReported,
        Usage::Clamped { .. } => Global::UsageClamped,
        Usage::Fallback { why, .. } => match why {
            NoUsage::Absent => Global::UsageFallbackAbsent,
            NoUsage::StreamAbsent => Global::UsageFallbackStreamAbsent,
            NoUsage::Unreadable => Global::UsageFallbackUnreadable,
            NoUsage::Encoded => Global::UsageFallbackEncoded,
            NoUsage::CutOff => Global::UsageFallbackCutOff,
        },
    }
}

/// Counts an over-limit cache look-up (see [`Outcome::CacheLookedUp`]).
fn cache_looked_up(failed: u32, rejected_by: &[usize], tally: &mut Tally) {
    tally.add(Global::ErrorSharedData, failed);
    if !rejected_by.is_empty() {
        tally.add(Global::OverLimitCached, 1);
    }
    for &rule in rejected_by {
        tally.rule(rule, PerRule::Denied);
    }
}

/// Counts a request's spend from its grants (see [`Outcome::LeasesSpent`]).
fn leases_spent(
    decided_rules: &[usize],
    conflicts: u32,
    failed: u32,
    refill: bool,
    tally: &mut Tally,
) {
    tally.add(Global::CasConflicts, conflicts);
    tally.add(Global::ErrorSharedData, failed);
    if !decided_rules.is_empty() {
        tally.add(Global::LeaseAllowed, 1);
    }
    for &rule in decided_rules {
        tally.rule(rule, PerRule::Allowed);
    }
    if refill {
        tally.add(Global::LeaseRefills, 1);
        tally.add(Global::RlsCalls, 1);
    }
}

/// Counts each rule's decision.
fn rules_decided(rules: &[(usize, PerRule)], tally: &mut Tally) {
    for &(rule, counter) in rules {
        tally.rule(rule, counter);
    }
}
