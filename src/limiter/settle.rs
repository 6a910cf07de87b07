//! The response side of a cost the response reports: building the request's meter at
//! admission, and settling what it read once the response is done.
//!
//! This is the one place where, at the end of a response, the limiter gets "rule R,
//! these descriptor values, this cost (or the fallback, and why)" as a [`Charge`]:
//! local rules settle their bucket here; global rules' costs become one stream-end
//! charge for the rate limit service (see [`super::charge`]), which the host sends
//! without waiting.

use super::charge::GlobalCharge;
use super::record::{record, BucketFailure, Outcome};
use super::Limiter;
use crate::config::Limit;
use crate::metrics::Tally;
use crate::request::descriptor::Applied;
use crate::shared::local::{self, Held, LocalError, TableEvents, Take};
use crate::shared::SharedData;
use crate::usage::{Charge, ResponseMeter, RuleMeter};
use crate::wire::call::Call;

impl Limiter {
    /// The meter for the response-cost rules among `takes`, holding what each took, and
    /// for the global response-cost rules among `applied` (which hold nothing locally:
    /// the service counted their admission).
    pub(super) fn meter(
        &self,
        applied: &[Applied],
        takes: &[(usize, Take)],
        held: &[Held],
    ) -> Option<Box<ResponseMeter>> {
        let local = takes
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
            });
        let global = applied
            .iter()
            .filter(|a| {
                let rule = &self.config.rules[a.rule];
                rule.response_cost.is_some() && matches!(rule.limit, Limit::Global { .. })
            })
            .map(|a| RuleMeter::new(a.rule, a.values.clone(), None));
        ResponseMeter::new(&self.config, local.chain(global).collect()).map(Box::new)
    }

    /// Charges what each rule's request cost, once its response is done (or the request
    /// went away): the local bucket takes the difference to what it held since
    /// admission, into debt if need be. Counted once per charge; a bucket that cannot be
    /// written (clock, shared data, contention) is counted as a local failure, and the
    /// tokens held at admission stay taken. `now_ns` is called at most once.
    ///
    /// Global rules' costs are returned as the stream-end charge call, ready for the host
    /// to send and not wait for (`None`: nothing to charge).
    pub fn settle(
        &self,
        charges: &[Charge],
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Option<Call> {
        let mut clock = super::Clock::new(now_ns);
        let mut global: Vec<GlobalCharge<'_>> = Vec::new();
        for charge in charges {
            record(Outcome::Charged(charge.usage), tally);
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
                    match result {
                        Ok(debt_capped) => record(Outcome::Settled { debt_capped }, tally),
                        Err(failure) => record(Outcome::BucketsFailed(failure), tally),
                    }
                }
                // Nothing was taken (a shadow rule that would have rejected): nothing to
                // settle.
                (Limit::Local(_), None) => {}
                // Refused in the configuration: a concurrency rule's cost is known at
                // admission.
                (Limit::Concurrency(_) | Limit::GlobalConcurrency, _) => {}
                // The service counts it: one charge call for all of them, below.
                (Limit::Global { .. }, _) => global.push(GlobalCharge {
                    rule: charge.rule,
                    values: &charge.values,
                    cost: charge.usage.cost(),
                }),
            }
        }
        if global.is_empty() {
            return None;
        }
        self.charge_call(&global)
    }
}
