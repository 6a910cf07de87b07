//! One request through the filter: which rules apply, what the limits say, what to do.
//!
//! This is the whole decision as plain Rust. The host layer hands [`Limiter::check`] a
//! view of the request, a clock and the shared-data store, and carries out the
//! [`Verdict`]. When global rules apply, the verdict is [`Verdict::Ask`]: the host pauses
//! the request, calls the rate limit service, and hands whatever comes back to
//! [`Limiter::answer`] for the final verdict.
//!
//! Order: the over-limit cache first (a request it rejects takes no local token and makes
//! no call; see `cached`), local rules next (cheap; a local rejection means no call to
//! the service), then the quota leases (a request whose global rules all pay from grants
//! makes no call; see `leased`), then one `ShouldRateLimit` call for all global rules. A request
//! rejected by the service gives back the local tokens it took, so a rejected request
//! consumes nothing locally. The answer's half, and what happens when the service cannot answer (degraded
//! mode), is in [`answer`](Limiter::answer).
//!
//! Each step returns what it found out as a value: the request's input (refused or not),
//! the buckets (`buckets`), the global request (`ask`), the service's answer (`answer`).
//! The functions here put them together, and hand every outcome to one function,
//! `record::record`, which is the only one that writes to the [`Tally`] the host flushes
//! later.

use crate::config::{Config, FailureMode, Limit, RlsConfig};
use crate::metrics::Tally;
use crate::reply::protocol::{self, Protocol};
use crate::reply::{self, Headers, Reply, Standing};
use crate::request::descriptor::{self, Refusal, RequestView};
use crate::shared::lease::LeaseTable;
use crate::shared::local::{Held, PerBucket, Take};
use crate::shared::over_limit::OverLimitCache;
use crate::shared::placement::PlacementKey;
use crate::shared::table::Table;
use crate::shared::SharedData;
use crate::usage::ResponseMeter;
use cached::CacheKey;
pub use charge::GlobalCharge;
use leased::LeaseStep;
pub use record::ChargeOutcome;
use record::{record, Outcome};
use std::cell::Cell;

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
    /// For rules whose cost the response reports: what to read from the response, then
    /// hand to [`Limiter::settle`] when it is done. `None` (no allocation) otherwise.
    pub meter: Option<Box<ResponseMeter>>,
    /// A lease refill to make in the background (the request does not wait for it).
    pub refill: Option<Refill>,
}

/// A check-only call that refills quota leases below their low-water mark; its answer
/// goes to [`Limiter::refilled`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refill {
    /// The encoded `ShouldRateLimit` request (every descriptor with `hits_addend` 0).
    pub message: Vec<u8>,
    /// The value of the quota header ([`crate::wire::rls::QUOTA_HEADER`]).
    pub quota: String,
    /// The lease keys of its descriptors, in order, for [`Limiter::refilled`].
    pub keys: Vec<u128>,
}

/// A call to make to the rate limit service, and what to remember until it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The encoded `ShouldRateLimit` request.
    pub message: Vec<u8>,
    /// The value of the quota header ([`crate::wire::rls::QUOTA_HEADER`]); empty: no header,
    /// no quota asked for.
    pub quota: String,
    /// Carried to [`Limiter::answer`].
    pub pending: Pending,
}

/// A request waiting for the rate limit service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// The request's global rules as the over-limit cache knows them (`None` when the
    /// cache is off, or no enforced global rule applies).
    cache_key: Option<CacheKey>,
    /// The lease keys of the global rules asked about, one per rule, when quota is asked
    /// for (empty: none asked).
    lease_keys: Vec<u128>,
    /// The response meter of the request's response-cost rules, for when it goes on.
    meter: Option<Box<ResponseMeter>>,
}

/// The host clock, read at most once and only when a step needs it.
pub(crate) struct Clock<F> {
    read: Option<F>,
    now: Option<u64>,
}

impl<F: FnOnce() -> Option<u64>> Clock<F> {
    fn new(read: F) -> Clock<F> {
        Clock {
            read: Some(read),
            now: None,
        }
    }

    /// The time, read on first use (`None`: the clock failed).
    fn now(&mut self) -> Option<u64> {
        if let Some(read) = self.read.take() {
            self.now = read();
        }
        self.now
    }
}

/// The configured filter, ready to decide requests.
#[derive(Debug, Clone)]
pub struct Limiter {
    config: Config,
    table: Table,
    over_limit: Option<OverLimitCache>,
    leases: Option<LeaseTable>,
    /// Some rule's cost is reported by the response: only then is a meter built.
    response_costs: bool,
    /// The secret every fingerprint is keyed with (see [`crate::shared::placement`]); a cell
    /// because a root context may have to adopt another VM's key after a startup race.
    placement: Cell<PlacementKey>,
}

impl Limiter {
    /// A limiter for a validated configuration, placing its entries in shared data with
    /// `placement`, the key every VM of this Envoy agreed on
    /// ([`PlacementKey::load_or_create`]).
    pub fn new(config: Config, placement: PlacementKey) -> Limiter {
        let table = Table::new(config.max_buckets);
        let over_limit = config
            .rls
            .as_ref()
            .and_then(|rls| rls.over_limit_cache_slots)
            .map(OverLimitCache::new);
        // A lease table only when some rule leases: other configurations never look one
        // up.
        let leases = config
            .rls
            .as_ref()
            .filter(|_| config.rules.iter().any(|r| r.asks_for_lease()))
            .map(|rls| LeaseTable::new(rls.lease_slots));
        let response_costs = config.rules.iter().any(|r| r.response_cost.is_some());
        Limiter {
            config,
            table,
            over_limit,
            leases,
            response_costs,
            placement: Cell::new(placement),
        }
    }

    /// The key this limiter's fingerprints are made with.
    pub fn placement(&self) -> PlacementKey {
        self.placement.get()
    }

    /// Uses `key` from now on: the one stored in shared data, when it turns out not to be
    /// ours ([`PlacementKey::reconcile`]).
    pub fn adopt_placement(&self, key: PlacementKey) {
        self.placement.set(key);
    }

    /// The lease table, when some rule asks for quota leases.
    pub fn lease_table(&self) -> Option<&LeaseTable> {
        self.leases.as_ref()
    }

    /// The over-limit cache, unless it is switched off or no rule is global.
    pub fn over_limit_cache(&self) -> Option<&OverLimitCache> {
        self.over_limit.as_ref()
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
    /// a fallback. A global-only configuration without fallbacks needs no bucket table
    /// (only the over-limit cache's keys, see [`Limiter::over_limit_cache`]).
    pub fn needs_table(&self) -> bool {
        self.config.rules.iter().any(|r| {
            matches!(
                r.limit,
                Limit::Local(_)
                    | Limit::Global {
                        fallback: Some(_),
                        ..
                    }
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
        let mut clock = Clock::new(now_ns);
        // The over-limit cache first: a request it rejects takes no local tokens.
        let mut lookup = self.look_up_denials(&applied, &costs, &mut clock, store, request);
        let takes = self.local_takes(&applied, &costs);
        if let Some(reply) = lookup.reply.take() {
            // Tokens this Envoy holds as leases were counted by the service already, so a
            // request that can pay from them is admitted whatever the cache says (a
            // denial can be remembered while grants are held: a call that raced a
            // grant). Only for requests without local rules (see the README).
            if takes.is_empty() {
                if let LeaseStep::Decided(refill) =
                    self.spend_leases(&applied, &costs, &mut clock, store, tally)
                {
                    lookup.record(false, tally);
                    let mut pass = self.pass(&[], false, tally);
                    pass.refill = refill;
                    return Verdict::Continue(pass);
                }
            }
            lookup.record(true, tally);
            let finished = Outcome::Finished {
                allowed: false,
                shadow_denied: false,
            };
            record(finished, tally);
            return Verdict::Reject(reply);
        }
        lookup.record(false, tally);
        // Local rules: take from the shared buckets.
        let mut pending = Pending {
            cache_key: lookup.key.take(),
            ..Pending::default()
        };
        if !takes.is_empty() {
            match self.use_buckets(&takes, clock.now(), store, tally) {
                Ok(local) if local.allowed => {
                    pending.held = local.held;
                    pending.local = local.standings;
                    pending.shadow_denied = local.shadow_denied;
                }
                Ok(local) => {
                    let finished = Outcome::Finished {
                        allowed: false,
                        shadow_denied: local.shadow_denied,
                    };
                    record(finished, tally);
                    let reply = reply::rejection(
                        &self.config.response,
                        &self.config.rules,
                        &local.standings,
                        None,
                        Vec::new(),
                        client_protocol(request),
                    );
                    return Verdict::Reject(reply);
                }
                Err(_) => {
                    let mode = self.config.failure_mode;
                    if let Some(reply) = self.failure_mode(mode, request, tally) {
                        return Verdict::Reject(reply);
                    }
                }
            }
        }
        if self.response_costs {
            pending.meter = self.meter(&applied, &takes, &pending.held);
        }
        // Leases: a request paid from grants makes no call.
        let mut quota = String::new();
        match self.spend_leases(&applied, &costs, &mut clock, store, tally) {
            LeaseStep::None => {}
            LeaseStep::Decided(refill) => {
                let mut pass = self.pass(&pending.local, pending.shadow_denied, tally);
                pass.refill = refill;
                pass.meter = pending.meter;
                return Verdict::Continue(pass);
            }
            LeaseStep::Ask(keys) => {
                quota = crate::wire::rls::quota_header_value(&(0..keys.len()).collect::<Vec<_>>());
                pending.lease_keys = keys;
            }
        }
        // Global rules: one call for all of them.
        match self.global_request(&applied, &costs, &mut pending) {
            Some(message) => {
                record(Outcome::Asked, tally);
                Verdict::Ask(Box::new(Ask {
                    message,
                    quota,
                    pending,
                }))
            }
            None => {
                let mut pass = self.pass(&pending.local, pending.shadow_denied, tally);
                pass.meter = pending.meter;
                Verdict::Continue(pass)
            }
        }
    }

    /// Counts an allowed request and builds its headers.
    fn pass(&self, standings: &[Standing], shadow_denied: bool, tally: &mut Tally) -> Pass {
        let finished = Outcome::Finished {
            allowed: true,
            shadow_denied,
        };
        record(finished, tally);
        Pass {
            request_headers: Vec::new(),
            meter: None,
            response_headers: if self.config.response.headers_on_allowed {
                reply::header_fields(&self.config.response, &self.config.rules, standings)
            } else {
                Vec::new()
            },
            refill: None,
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
        record(Outcome::FailureMode(mode), tally);
        match mode {
            FailureMode::Allow => None,
            FailureMode::Deny => Some(reply::failure(
                self.config.failure_status,
                client_protocol(request),
            )),
        }
    }
}

/// The protocol a reply must speak (one header look-up, only when replying).
fn client_protocol(request: &mut impl RequestView) -> Protocol {
    protocol::classify(request.content_type().as_deref())
}

/// Refuses a request the limits cannot be applied to, counted once by cause.
fn refuse(refusal: &Refusal, request: &mut impl RequestView, tally: &mut Tally) -> Verdict {
    record(Outcome::Refused(refusal), tally);
    Verdict::Reject(reply::refusal(refusal, client_protocol(request)))
}

mod answer;
mod ask;
mod buckets;
mod cached;
mod charge;
mod leased;
mod record;
mod settle;

#[cfg(test)]
mod tests;
