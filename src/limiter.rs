//! One request through the filter: which rules apply, what the buckets say, what to do.
//!
//! This is the whole decision as plain Rust: the host layer hands it a view of the
//! request, a clock and the shared-data store, and gets back a [`Verdict`] to carry out.
//! Metrics are added to a [`Tally`] that the host flushes later.

use crate::config::{Config, FailureMode};
use crate::descriptor::{self, RequestView};
use crate::local::{self, LocalError, TableEvents, Take};
use crate::metrics::{Global, PerRule, Tally};
use crate::response::{self, Outcome, Reply};
use crate::shared::SharedData;
use crate::table::Table;

/// What the host must do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through; add these headers to the response (empty unless
    /// `response.headers_on_allowed`).
    Continue {
        /// Headers for the downstream response.
        response_headers: Vec<(&'static str, String)>,
    },
    /// Answer it from the proxy; the upstream never sees it.
    Reject(Reply),
}

impl Verdict {
    fn pass() -> Verdict {
        Verdict::Continue {
            response_headers: Vec::new(),
        }
    }
}

/// Why a request could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The host clock could not be read.
    Clock,
    /// A shared-data call failed.
    SharedData,
    /// Too many compare-and-swap conflicts on one bucket.
    Contention,
}

/// The status of a reply that rejects a request because the limiter failed
/// (`failure_mode: deny`), as Envoy's own rate limit filter answers.
pub const FAILURE_STATUS: u16 = 500;

/// The configured filter, ready to decide requests.
#[derive(Debug, Clone)]
pub struct Limiter {
    config: Config,
    table: Table,
}

impl Limiter {
    /// A limiter for a validated configuration.
    pub fn new(config: Config) -> Limiter {
        let table = Table::new(config.max_buckets);
        Limiter { config, table }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The bucket table this configuration uses.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Decides one request. `now_ns` is called only if a rule applies.
    pub fn check(
        &self,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        let applied = descriptor::applicable(&self.config.rules, request);
        if applied.is_empty() {
            return Verdict::pass();
        }
        let takes: Vec<Take> = applied
            .iter()
            .map(|a| {
                let rule = &self.config.rules[a.rule];
                Take {
                    fingerprint: descriptor::fingerprint(rule, &a.values),
                    quota: rule.quota,
                    shadow: rule.shadow,
                }
            })
            .collect();
        let Some(now) = now_ns() else {
            return self.fail(Failure::Clock, request, tally);
        };
        let mut events = TableEvents::default();
        let checked = local::take_all(&self.table, store, &takes, now, 1, &mut events);
        tally.add(Global::Buckets, events.new_buckets);
        tally.add(Global::BucketEvictions, events.evictions);
        tally.add(Global::CasConflicts, events.conflicts);
        let checked = match checked {
            Ok(checked) => checked,
            Err(LocalError::Store(_)) => return self.fail(Failure::SharedData, request, tally),
            Err(LocalError::Contention) => return self.fail(Failure::Contention, request, tally),
        };
        let outcomes: Vec<Outcome> = takes
            .iter()
            .zip(&checked.decisions)
            .map(|(take, decision)| Outcome {
                quota: take.quota,
                decision: *decision,
                shadow: take.shadow,
            })
            .collect();
        let mut shadow_denied = false;
        for (a, o) in applied.iter().zip(&outcomes) {
            let counter = match (o.decision.is_allow(), o.shadow) {
                (true, _) => PerRule::Allowed,
                (false, true) => {
                    shadow_denied = true;
                    PerRule::ShadowDenied
                }
                (false, false) => PerRule::Denied,
            };
            tally.rule(a.rule, counter);
        }
        if shadow_denied {
            tally.add(Global::ShadowDenied, 1);
        }
        if !checked.allowed {
            tally.add(Global::Denied, 1);
            let grpc = response::is_grpc(request.header("content-type").as_deref());
            return Verdict::Reject(response::rejection(&self.config.response, &outcomes, grpc));
        }
        tally.add(Global::Allowed, 1);
        Verdict::Continue {
            response_headers: if self.config.response.headers_on_allowed {
                response::ratelimit_headers(&outcomes)
            } else {
                Vec::new()
            },
        }
    }

    /// The configured failure mode, applied and counted: the one place it is decided.
    fn fail(&self, failure: Failure, request: &mut impl RequestView, tally: &mut Tally) -> Verdict {
        tally.add(
            match failure {
                Failure::Clock => Global::ErrorClock,
                Failure::SharedData => Global::ErrorSharedData,
                Failure::Contention => Global::ErrorContention,
            },
            1,
        );
        match self.config.failure_mode {
            FailureMode::Allow => {
                tally.add(Global::FailureModeAllowed, 1);
                Verdict::pass()
            }
            FailureMode::Deny => {
                tally.add(Global::FailureModeDenied, 1);
                let grpc = response::is_grpc(request.header("content-type").as_deref());
                Verdict::Reject(response::failure(FAILURE_STATUS, grpc))
            }
        }
    }
}

#[cfg(test)]
mod tests;
