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
//! ([`Limiter::charge_answered`]); a charge that fails is counted once and never sent
//! again: retrying would need to keep it, unbounded, while the service is away.

use super::record::{record, ChargeOutcome, Outcome};
use super::Limiter;
use crate::metrics::Tally;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use crate::wire::rls;

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
                (cost > 0).then(|| rls::Descriptor {
                    entries: rule
                        .entries
                        .iter()
                        .map(|e| e.key.as_str())
                        // UTF-8 checked at request time for global rules.
                        .zip(
                            c.values
                                .iter()
                                .map(|v| std::str::from_utf8(v).unwrap_or("")),
                        )
                        .collect(),
                    cost,
                })
            })
            .collect();
        (!descriptors.is_empty())
            .then(|| calls.charge(rls::encode_request(&rls.domain, &descriptors)))
    }

    /// Counts what the service answered a charge: only whether it was counted (its
    /// statuses say where the budgets stand, which the next request's check will see).
    pub fn charge_answered(&self, answer: &Answer, tally: &mut Tally) {
        let outcome = match rls::interpret(answer, &[]) {
            Ok(_) => ChargeOutcome::Counted,
            Err(_) => ChargeOutcome::Failed,
        };
        record(Outcome::Charge(outcome), tally);
    }

    /// Counts what the service answered a hold's release: only whether it failed (its
    /// statuses are the slots left, which the next request's call will see).
    pub fn release_answered(&self, answer: &Answer, tally: &mut Tally) {
        if rls::interpret(answer, &[]).is_err() {
            record(Outcome::Release(ChargeOutcome::Failed), tally);
        }
    }

    /// Counts a hold's release sent, or one that could not be sent.
    pub fn release_dispatched(&self, sent: bool, tally: &mut Tally) {
        let outcome = if sent {
            ChargeOutcome::Sent
        } else {
            ChargeOutcome::Failed
        };
        record(Outcome::Release(outcome), tally);
    }

    /// Counts a charge call sent, or one that could not be sent.
    pub fn charge_dispatched(&self, sent: bool, tally: &mut Tally) {
        let outcome = if sent {
            ChargeOutcome::Sent
        } else {
            ChargeOutcome::Failed
        };
        record(Outcome::Charge(outcome), tally);
    }
}
