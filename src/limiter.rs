//! One request through the filter: which rules apply, what the limits say, what to do.
//!
//! This is the whole decision as plain Rust. The host layer hands [`Limiter::check`] a
//! view of the request, a clock and the shared-data store, and carries out the
//! [`Verdict`]. When global rules apply, the verdict is [`Verdict::Ask`]: the host pauses
//! the request, calls the rate limit service, and hands whatever comes back to
//! [`Limiter::answer`] for the final verdict.
//!
//! Order: local rules first (cheap; a local rejection means no call to the service),
//! then one `ShouldRateLimit` call for all global rules. A request rejected by the
//! service gives back the local tokens it took, so a rejected request consumes nothing
//! locally. Metrics go to a [`Tally`] the host flushes later. The answer's half, and what
//! happens when the service cannot answer (degraded mode), is in [`answer`](Limiter::answer).

use crate::config::{Config, FailureMode, Limit, RlsConfig};
use crate::descriptor::{self, Applied, Refusal, RequestView};
use crate::local::{self, Held, LocalError, PerBucket, TableEvents, Take};
use crate::metrics::{Global, PerRule, Tally};
use crate::protocol::{self, Protocol};
use crate::response::{self, Headers, Reply, Standing};
use crate::rls;
use crate::shared::SharedData;
use crate::table::Table;

/// What the host must do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through.
    Continue(Pass),
    /// Answer it from the proxy; the upstream never sees it.
    Reject(Reply),
    /// Pause it and ask the rate limit service; then call [`Limiter::answer`].
    Ask(Box<Ask>),
}

/// Headers to add to a request that goes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Headers for the upstream request (from the rate limit service).
    pub request_headers: Vec<(String, String)>,
    /// Headers for the downstream response (`x-ratelimit-*` when configured, and the
    /// rate limit service's).
    pub response_headers: Headers,
}

/// A call to make to the rate limit service, and what to remember until it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The encoded `ShouldRateLimit` request.
    pub message: Vec<u8>,
    /// Carried to [`Limiter::answer`].
    pub pending: Pending,
}

/// A request waiting for the rate limit service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The global rules asked about, in descriptor order.
    rules: Vec<usize>,
    /// The fallback buckets of those that have one (rule, bucket), for when the service
    /// cannot answer. A `Vec`, empty and unallocated without fallbacks, so that they cost
    /// nothing to configurations without any.
    fallbacks: Vec<(usize, Take)>,
    /// Local tokens to give back if the request is rejected.
    held: PerBucket<Held>,
    /// Where the local rules stand, for headers.
    local: PerBucket<Standing>,
    /// A local shadow rule would have rejected the request.
    shadow_denied: bool,
}

/// What the local rules said about a request.
struct LocalResult {
    /// No enforced local rule rejects the request.
    allowed: bool,
    /// The tokens it holds.
    held: PerBucket<Held>,
    /// Where each local rule stands: filled only when headers need it (a rejection,
    /// `headers_on_allowed`, or a global call still to come).
    standings: PerBucket<Standing>,
    /// A local shadow rule would have rejected it.
    shadow_denied: bool,
}

/// Why a request could not be decided locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocalFailure {
    Clock,
    SharedData,
    Contention,
}

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

    /// The rate limit service, if any rule is global.
    pub fn rls(&self) -> Option<&RlsConfig> {
        self.config.rls.as_ref()
    }

    /// The bucket table this configuration uses.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Whether any rule keeps buckets in shared data: a local rule, or a global rule with
    /// a fallback. A global-only configuration without fallbacks needs no bucket table.
    pub fn needs_table(&self) -> bool {
        self.config.rules.iter().any(|r| {
            matches!(
                r.limit,
                Limit::Local(_) | Limit::Global { fallback: Some(_) }
            )
        })
    }

    /// Decides one request, or says what to ask the rate limit service. `now_ns` is
    /// called at most once, and only if a rule applies.
    pub fn check(
        &self,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        let max_value = self.config.max_descriptor_value_bytes;
        let applied = match descriptor::applicable(&self.config.rules, max_value, request) {
            Ok(applied) if applied.is_empty() => return Verdict::Continue(Pass::default()),
            Ok(applied) => applied,
            Err(refusal) => return refuse(&refusal, request, tally),
        };
        let costs = match descriptor::costs(&self.config.rules, &applied, request) {
            Ok(costs) => costs,
            Err(refusal) => return refuse(&refusal, request, tally),
        };
        // Local rules: take from the shared buckets.
        let takes: PerBucket<(usize, Take)> = applied
            .iter()
            .zip(&costs)
            .filter_map(|(a, &cost)| {
                let rule = &self.config.rules[a.rule];
                match rule.limit {
                    Limit::Local(quota) => Some((
                        a.rule,
                        Take {
                            fingerprint: descriptor::fingerprint(&rule.name, quota, &a.values),
                            quota,
                            shadow: rule.shadow,
                            cost,
                        },
                    )),
                    Limit::Global { .. } => None,
                }
            })
            .collect();
        let mut pending = Pending {
            rules: Vec::new(),
            fallbacks: Vec::new(),
            held: PerBucket::new(),
            local: PerBucket::new(),
            shadow_denied: false,
        };
        if !takes.is_empty() {
            match self.take_local(&takes, now_ns(), store, tally) {
                Ok(local) if local.allowed => {
                    pending.held = local.held;
                    pending.local = local.standings;
                    pending.shadow_denied = local.shadow_denied;
                }
                Ok(local) => {
                    count_request(Global::Denied, local.shadow_denied, tally);
                    let reply = response::rejection(
                        &self.config.response,
                        &local.standings,
                        None,
                        Vec::new(),
                        client_protocol(request),
                    );
                    return Verdict::Reject(reply);
                }
                Err(failure) => {
                    tally.add(failure.metric(), 1);
                    let mode = self.config.failure_mode;
                    if let Some(reply) = self.failure_mode(mode, request, tally) {
                        return Verdict::Reject(reply);
                    }
                }
            }
        }

        // Global rules: one call for all of them.
        let global: Vec<(&Applied, u32)> = applied
            .iter()
            .zip(costs)
            .filter(|(a, _)| matches!(self.config.rules[a.rule].limit, Limit::Global { .. }))
            .collect();
        let Some(rls) = self.rls().filter(|_| !global.is_empty()) else {
            return Verdict::Continue(self.pass(&pending.local, pending.shadow_denied, tally));
        };
        let descriptors: Vec<rls::Descriptor<'_>> = global
            .iter()
            .map(|(a, cost)| rls::Descriptor {
                entries: self.config.rules[a.rule]
                    .entries
                    .iter()
                    .map(|e| e.key.as_str())
                    // UTF-8 already checked for global rules by `descriptor::applicable`.
                    .zip(
                        a.values
                            .iter()
                            .map(|v| std::str::from_utf8(v).unwrap_or("")),
                    )
                    .collect(),
                cost: *cost,
            })
            .collect();
        pending.rules = global.iter().map(|(a, _)| a.rule).collect();
        pending.fallbacks = global
            .iter()
            .filter_map(|&(a, cost)| {
                let rule = &self.config.rules[a.rule];
                let Limit::Global {
                    fallback: Some(quota),
                } = rule.limit
                else {
                    return None;
                };
                let fingerprint = descriptor::fallback_fingerprint(&rule.name, quota, &a.values);
                Some((
                    a.rule,
                    Take {
                        fingerprint,
                        quota,
                        shadow: rule.shadow,
                        cost,
                    },
                ))
            })
            .collect();
        Verdict::Ask(Box::new(Ask {
            message: rls::encode_request(&rls.domain, &descriptors),
            pending,
        }))
    }

    /// Takes the local rules' tokens and counts each rule's decision.
    fn take_local(
        &self,
        takes: &[(usize, Take)],
        now: Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Result<LocalResult, LocalFailure> {
        let now = now.ok_or(LocalFailure::Clock)?;
        let only: PerBucket<Take> = takes.iter().map(|(_, t)| *t).collect();
        let mut events = TableEvents::default();
        let checked = local::take_all(&self.table, store, &only, now, &mut events);
        tally.add(Global::Buckets, events.new_buckets);
        tally.add(Global::BucketEvictions, events.evictions);
        tally.add(Global::CasConflicts, events.conflicts);
        let checked = checked.map_err(|e| match e {
            LocalError::Store(_) => LocalFailure::SharedData,
            LocalError::Contention => LocalFailure::Contention,
        })?;
        let mut shadow_denied = false;
        for ((rule, take), decision) in takes.iter().zip(&checked.decisions) {
            let counter = match (decision.is_allow(), take.shadow) {
                (true, _) => PerRule::Allowed,
                (false, true) => {
                    shadow_denied = true;
                    PerRule::ShadowDenied
                }
                (false, false) => PerRule::Denied,
            };
            tally.rule(*rule, counter);
        }
        let standings = if !checked.allowed || self.config.response.headers_on_allowed {
            takes
                .iter()
                .zip(&checked.decisions)
                .map(|((_, take), decision)| Standing::local(take.quota, *decision, take.shadow))
                .collect()
        } else {
            PerBucket::new()
        };
        Ok(LocalResult {
            allowed: checked.allowed,
            held: checked.held,
            standings,
            shadow_denied,
        })
    }

    /// Counts an allowed request and builds its headers.
    fn pass(&self, standings: &[Standing], shadow_denied: bool, tally: &mut Tally) -> Pass {
        count_request(Global::Allowed, shadow_denied, tally);
        Pass {
            request_headers: Vec::new(),
            response_headers: if self.config.response.headers_on_allowed {
                response::ratelimit_headers(standings)
            } else {
                Vec::new()
            },
        }
    }

    /// A failure mode, applied and counted: the one place it is decided. `None` lets
    /// the request through.
    fn failure_mode(
        &self,
        mode: FailureMode,
        request: &mut impl RequestView,
        tally: &mut Tally,
    ) -> Option<Reply> {
        match mode {
            FailureMode::Allow => {
                tally.add(Global::FailureModeAllowed, 1);
                None
            }
            FailureMode::Deny => {
                tally.add(Global::FailureModeDenied, 1);
                Some(response::failure(
                    self.config.failure_status,
                    client_protocol(request),
                ))
            }
        }
    }
}

/// Counts a finished request: allowed or denied, and whether a shadow rule would have
/// rejected it.
fn count_request(outcome: Global, shadow_denied: bool, tally: &mut Tally) {
    tally.add(outcome, 1);
    if shadow_denied {
        tally.add(Global::ShadowDenied, 1);
    }
}

/// The protocol a reply must speak (one header look-up, only when replying).
fn client_protocol(request: &mut impl RequestView) -> Protocol {
    protocol::classify(request.content_type().as_deref())
}

/// Refuses a request the limits cannot be applied to, counted once by cause.
fn refuse(refusal: &Refusal, request: &mut impl RequestView, tally: &mut Tally) -> Verdict {
    tally.add(
        match refusal {
            Refusal::InvalidCost { .. } => Global::InvalidCost,
            Refusal::RepeatedHeader { .. } => Global::DuplicateHeader,
            Refusal::ValueTooLong { .. } | Refusal::NotUtf8 { .. } => Global::InvalidDescriptor,
        },
        1,
    );
    Verdict::Reject(response::refusal(refusal, client_protocol(request)))
}

impl LocalFailure {
    /// The metric counting it.
    fn metric(self) -> Global {
        match self {
            LocalFailure::Clock => Global::ErrorClock,
            LocalFailure::SharedData => Global::ErrorSharedData,
            LocalFailure::Contention => Global::ErrorContention,
        }
    }
}

mod answer;

#[cfg(test)]
mod fallback_tests;
#[cfg(test)]
mod refusal_tests;
#[cfg(test)]
mod tests;
