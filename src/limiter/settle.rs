//! The response side of a cost the response reports: building the request's meter at
//! admission, and settling what it read once the response is done.
//!
//! This is the one place where, at the end of a response, the limiter gets "rule R,
//! these descriptor values, this cost (or the fallback, and why)" as a [`Charge`]:
//! local rules settle their bucket here; global rules will report it to the rate limit
//! service (TODO(llmg)).

use super::record::{record, BucketFailure, Outcome};
use super::Limiter;
use crate::config::Limit;
use crate::descriptor::Applied;
use crate::local::{self, Held, LocalError, TableEvents, Take};
use crate::metrics::Tally;
use crate::shared::SharedData;
use crate::usage::{Charge, ResponseMeter, RuleMeter};

impl Limiter {
    /// The meter for the response-cost rules among `takes`, holding what each took.
    pub(super) fn meter(
        &self,
        applied: &[Applied],
        takes: &[(usize, Take)],
        held: &[Held],
    ) -> Option<Box<ResponseMeter>> {
        let rules = takes
            .iter()
            .filter(|(rule, _)| self.config.rules[*rule].response_cost.is_some())
            .map(|(rule, take)| {
                let values = applied
                    .iter()
                    .find(|a| a.rule == *rule)
                    .map(|a| a.values.clone())
                    .unwrap_or_default();
                let held = held.iter().find(|h| h.take == *take).copied();
                RuleMeter::new(*rule, values, held)
            })
            .collect();
        ResponseMeter::new(rules).map(Box::new)
    }

    /// Charges what each rule's request cost, once its response is done (or the request
    /// went away): the local bucket takes the difference to what it held since
    /// admission, into debt if need be. Counted once per charge; a bucket that cannot be
    /// written (clock, shared data, contention) is counted as a local failure, and the
    /// tokens held at admission stay taken. `now_ns` is called at most once.
    pub fn settle(
        &self,
        charges: &[Charge],
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let mut clock = super::Clock::new(now_ns);
        for charge in charges {
            record(
                Outcome::Charged {
                    usage: charge.usage,
                    skipped: charge.skipped,
                },
                tally,
            );
            let Some(rule) = self.config.rules.get(charge.rule) else {
                continue;
            };
            match (&rule.limit, &charge.held) {
                (Limit::Local(_), Some(held)) => {
                    let mut table = TableEvents::default();
                    let result = match clock.now() {
                        None => Err(BucketFailure::Clock),
                        Some(now) => local::settle(
                            &self.table,
                            store,
                            held,
                            charge.usage.cost(),
                            now,
                            &mut table,
                        )
                        .map_err(|e| match e {
                            LocalError::Store(_) => BucketFailure::SharedData,
                            LocalError::Contention => BucketFailure::Contention,
                        }),
                    };
                    record(Outcome::Buckets { table, rules: &[] }, tally);
                    if let Err(failure) = result {
                        record(Outcome::BucketsFailed(failure), tally);
                    }
                }
                // Nothing was taken (a shadow rule that would have rejected): nothing to
                // settle.
                (Limit::Local(_), None) => {}
                // TODO(llmg): report `charge.usage.cost()` for `charge.values` to the rate
                // limit service (a `hits_addend` call that never delays the response).
                (Limit::Global { .. }, _) => {}
            }
        }
    }
}
