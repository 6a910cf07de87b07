//! The stream-end charge of global rules whose cost only the response reports (an LLM
//! answer's tokens).
//!
//! At request time such a rule was sent check-only (or with its estimate, see
//! [`super::ask::admission_hits`]). When the response is done, [`Limiter::settle`] gets
//! each rule's real cost and [`Limiter::charge_call`] makes one `ShouldRateLimit` of the
//! global ones ([`GlobalCharge`]), which the host sends with [`crate::wire::rls::CHARGE_HEADER`]
//! and does not wait for: the response has gone on already. The service counts every
//! descriptor even past its limit (the budget goes into debt), so the next request's
//! check sees what this one really cost. The answer is only counted
//! ([`Limiter::stream_end_answered`]); a charge that fails is counted once and never sent
//! again: retrying would need to keep it, unbounded, while the service is away.

use super::record::{record, ChargeOutcome, Outcome};
use super::Limiter;
use crate::metrics::Tally;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use crate::wire::rls;

/// A call sent when a stream ends, that no request waits for: both are counted the same
/// way (sent, failed), each in its own metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEndCall {
    /// The charge of a response's real cost ([`Limiter::charge_call`]).
    Charge,
    /// A fleet-wide concurrency hold's release.
    Release,
}

impl StreamEndCall {
    /// What a call that cannot be started was for, as its log line says it.
    pub fn sending(self) -> &'static str {
        match self {
            StreamEndCall::Charge => "send a charge to",
            StreamEndCall::Release => "send a release to",
        }
    }

    /// The call, named in the log line of a failed answer.
    pub fn noun(self) -> &'static str {
        match self {
            StreamEndCall::Charge => "a charge",
            StreamEndCall::Release => "a release",
        }
    }

    fn outcome(self, outcome: ChargeOutcome) -> Outcome<'static> {
        match self {
            StreamEndCall::Charge => Outcome::Charge(outcome),
            StreamEndCall::Release => Outcome::Release(outcome),
        }
    }
}

/// One global rule's real cost, once its response is done: what the hook hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalCharge<'a> {
    /// The rule (index in the configuration).
    pub rule: usize,
    /// Its descriptor values, as at request time.
    pub values: &'a [Vec<u8>],
    /// What the request cost in all (reported, or the rule's fallback).
    pub cost: u32,
}

impl Limiter {
    /// The charge call for `charges` (with the charge header): one descriptor per global rule with something
    /// left to charge. A rule admitted on an estimate of more than 1 had that counted at
    /// request time, so only what the cost exceeds it by is charged (a cost below the
    /// estimate cannot be given back: the service has no refund). `None` when nothing is
    /// left to charge, or no rule is global.
    pub fn charge_call(&self, charges: &[GlobalCharge<'_>]) -> Option<Call> {
        let rls = self.rls()?;
        let calls = self.calls.as_ref()?;
        let descriptors: Vec<rls::Descriptor<'_>> = charges
            .iter()
            .filter_map(|c| {
                let rule = self.config.rules.get(c.rule)?;
                let held = rule
                    .response_cost
                    .as_ref()
                    .map_or(0, |r| super::ask::admission_hits(rule, r.estimate));
                let cost = c.cost.saturating_sub(held);
                // A cost of 0 would be sent as check-only: leave it out.
                // UTF-8 checked at request time for global rules.
                (cost > 0).then(|| rls::Descriptor {
                    keys: &rule.entries,
                    values: c.values,
                    cost,
                })
            })
            .collect();
        (!descriptors.is_empty())
            .then(|| calls.charge(rls::encode_request(&rls.domain, &descriptors)))
    }

    /// Counts a stream-end call (`kind`) sent, or one that could not be sent.
    pub fn stream_end_dispatched(&self, kind: StreamEndCall, sent: bool, tally: &mut Tally) {
        let outcome = if sent {
            ChargeOutcome::Sent
        } else {
            ChargeOutcome::Failed
        };
        record(kind.outcome(outcome), tally);
    }

    /// Counts what the service answered a stream-end call (`kind`): a charge whether it
    /// was counted, a release only whether it failed. Their statuses say where the
    /// budgets and slots stand, which the next request's check will see.
    pub fn stream_end_answered(&self, kind: StreamEndCall, answer: &Answer, tally: &mut Tally) {
        let outcome = match (rls::interpret(answer, &[]), kind) {
            (Err(_), _) => ChargeOutcome::Failed,
            (Ok(_), StreamEndCall::Charge) => ChargeOutcome::Counted,
            (Ok(_), StreamEndCall::Release) => return,
        };
        record(kind.outcome(outcome), tally);
    }
}
