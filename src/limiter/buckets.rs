//! The bucket step: taking tokens from local rules' buckets (and, when the service cannot
//! answer, from global rules' fallback buckets), and what that says about each rule.

use super::record::{record, rule_counter, BucketFailure, Outcome};
use super::Limiter;
use crate::config::Limit;
use crate::metrics::{PerRule, Tally};
use crate::reply::Standing;
use crate::request::descriptor::Applied;
use crate::shared::local::{self, Held, LocalError, PerBucket, TableEvents, Take};
use crate::shared::SharedData;

/// What the buckets said about a request.
pub(super) struct BucketsDecided {
    /// No enforced rule rejects the request.
    pub allowed: bool,
    /// The tokens it holds.
    pub held: PerBucket<Held>,
    /// Where each rule stands: filled only when headers need it (a rejection,
    /// `headers_on_allowed`, or a global call still to come).
    pub standings: PerBucket<Standing>,
    /// A shadow rule would have rejected it.
    pub shadow_denied: bool,
    /// Each rule's decision, for its counter.
    pub rules: PerBucket<(usize, PerRule)>,
}

/// The bucket step's outcome: what happened in the table, and the decision (or why
/// there is none).
pub(super) struct BucketsOutcome {
    /// New buckets, evictions, CAS conflicts (also when the step failed midway).
    pub table: TableEvents,
    /// The decision.
    pub result: Result<BucketsDecided, BucketFailure>,
}

impl Limiter {
    /// The local rules among `applied`, as takes from their buckets (`costs` in the same
    /// order).
    pub(super) fn local_takes(
        &self,
        applied: &[Applied],
        costs: &[u32],
    ) -> PerBucket<(usize, Take)> {
        let prefixes = self.prefixes();
        // Pushed in a loop: a collect through `SmallVec::extend` counted more.
        let mut takes = PerBucket::new();
        for (a, &cost) in applied.iter().zip(costs) {
            let rule = &self.config.rules[a.rule];
            match rule.limit {
                Limit::Local(quota) => takes.push((
                    a.rule,
                    Take {
                        fingerprint: prefixes.bucket(a.rule).map_or_else(
                            || prefixes.key.bucket(&rule.name, quota, &a.values),
                            |prefix| prefix.values(&a.values),
                        ),
                        quota,
                        shadow: rule.shadow,
                        cost,
                    },
                )),
                Limit::Global { .. } | Limit::Concurrency(_) | Limit::GlobalConcurrency => {}
            }
        }
        takes
    }

    /// Takes `takes` from their buckets at `now` (`None`: the clock failed), and counts
    /// the outcome.
    pub(super) fn use_buckets(
        &self,
        takes: &[(usize, Take)],
        now: Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Result<BucketsDecided, BucketFailure> {
        let outcome = self.take_buckets(takes, now, store);
        let rules = outcome.result.as_ref().map_or(&[][..], |d| &d.rules[..]);
        record(
            Outcome::Buckets {
                table: outcome.table,
                rules,
            },
            tally,
        );
        if let Err(failure) = outcome.result {
            record(Outcome::BucketsFailed(failure), tally);
        }
        outcome.result
    }

    /// Takes `takes` from their buckets: all decided first, nothing written if an enforced
    /// one denies (see [`local::take_all`]).
    fn take_buckets(
        &self,
        takes: &[(usize, Take)],
        now: Option<u64>,
        store: &impl SharedData,
    ) -> BucketsOutcome {
        let mut table = TableEvents::default();
        let Some(now) = now else {
            return BucketsOutcome {
                table,
                result: Err(BucketFailure::Clock),
            };
        };
        let checked = match local::take_all(&self.table, store, takes, now, &mut table) {
            Ok(checked) => checked,
            Err(e) => {
                let failure = match e {
                    LocalError::Store(_) => BucketFailure::SharedData,
                    LocalError::Contention => BucketFailure::Contention,
                };
                return BucketsOutcome {
                    table,
                    result: Err(failure),
                };
            }
        };
        // One pass for the counters and the shadow denial (pushed: a collect through
        // `SmallVec::extend` counted more).
        let mut rules: PerBucket<(usize, PerRule)> = PerBucket::new();
        let mut shadow_denied = false;
        for ((rule, take), decision) in takes.iter().zip(&checked.decisions) {
            let counter = rule_counter(decision.is_allow(), take.shadow);
            shadow_denied |= counter == PerRule::ShadowDenied;
            rules.push((*rule, counter));
        }
        let mut standings = PerBucket::new();
        if !checked.allowed || self.config.response.headers_on_allowed {
            for ((rule, take), decision) in takes.iter().zip(&checked.decisions) {
                standings.push(Standing::local(*rule, take.quota, *decision, take.shadow));
            }
        }
        BucketsOutcome {
            table,
            result: Ok(BucketsDecided {
                allowed: checked.allowed,
                held: checked.held,
                standings,
                shadow_denied,
                rules,
            }),
        }
    }
}
