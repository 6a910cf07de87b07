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
//! makes no call; see `leased`), then one `ShouldRateLimit` call for all global rules. A
//! request with only global rules spends its leases before the cache instead: they admit
//! it whatever the cache says, and then it reads no cache entry. A request
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
use crate::request;
use crate::request::descriptor::{Refusal, RequestView};
use crate::shared::concurrency::ConcurrencyTable;
use crate::shared::lease::LeaseTable;
use crate::shared::local::{Held, PerBucket, Take};
use crate::shared::over_limit::OverLimitCache;
use crate::shared::placement::PlacementKey;
use crate::shared::table::Table;
use crate::usage::ResponseMeter;
use crate::wire::call::{Call, CallHeaders};
use cached::CacheKey;
pub use charge::{GlobalCharge, StreamEndCall};
pub use concurrency::{SlotHold, SlotSink, Slots};
pub use hold::HoldIds;
use prefixes::Prefixes;
pub use record::ChargeOutcome;
use record::{record, Outcome};
use std::cell::RefCell;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refill {
    /// The call: every descriptor with `hits_addend` 0, asking for quota for each.
    pub call: Call,
    /// The lease keys of its descriptors, in order, for [`Limiter::refilled`].
    pub keys: Vec<u128>,
}

/// A call to make to the rate limit service, and what to remember until it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The call, ready to send (with the quota header when leases are asked for, the
    /// hold header when a fleet-wide concurrency rule applies).
    pub call: Call,
    /// Carried to [`Limiter::answer`].
    pub pending: Pending,
    /// When the call takes a hold: its release, for the host to send without waiting
    /// when the request's stream ends ([`Limiter::took_no_hold`] says when not to).
    /// Boxed: most calls take no hold, and `Ask` moves a few times on every global path.
    pub release: Option<Box<Call>>,
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
    /// for (empty: none asked). Inline for two: no heap for a call's keys.
    lease_keys: prefixes::Identities,
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
    /// The concurrency keys' table (used only when some rule is a concurrency rule).
    slots: ConcurrencyTable,
    /// Some rule is a concurrency rule: only then is the concurrency step run.
    concurrency: bool,
    over_limit: Option<OverLimitCache>,
    leases: Option<LeaseTable>,
    /// Some rule's cost is reported by the response: only then is a meter built.
    response_costs: bool,
    /// The header sets of calls to the rate limit service, when some rule is global.
    calls: Option<CallHeaders>,
    /// This VM's hold ids, when some rule is a fleet-wide concurrency rule and the host
    /// gave a nonce ([`Limiter::with_hold_nonce`]).
    hold_ids: Option<HoldIds>,
    /// Some rule is a fleet-wide concurrency rule (only then are requests' rules looked
    /// through for one).
    hold_rules: bool,
    /// The secret every fingerprint is keyed with (see [`crate::shared::placement`]), and
    /// each rule's fingerprint prefixes hashed under it; a cell because a root context may
    /// have to adopt another VM's key after a startup race.
    prefixes: RefCell<Prefixes>,
}

impl Limiter {
    /// A limiter for a validated configuration, placing its entries in shared data with
    /// `placement`, the key every VM of this Envoy agreed on
    /// ([`PlacementKey::load_or_create`]).
    pub fn new(config: Config, placement: PlacementKey) -> Limiter {
        let table = Table::new(config.max_buckets);
        let slots = ConcurrencyTable::new(config.max_buckets);
        let concurrency = config
            .rules
            .iter()
            .any(|r| matches!(r.limit, Limit::Concurrency(_)));
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
        let calls = config.rls.as_ref().map(CallHeaders::new);
        let hold_rules = config
            .rules
            .iter()
            .any(|r| r.limit == Limit::GlobalConcurrency);
        let prefixes = RefCell::new(Prefixes::new(&config, placement));
        Limiter {
            calls,
            hold_ids: None,
            hold_rules,
            config,
            table,
            slots,
            concurrency,
            over_limit,
            leases,
            response_costs,
            prefixes,
        }
    }

    /// Whether some rule is a fleet-wide concurrency rule: then the host draws a nonce
    /// for this VM's hold ids and hands it to [`Limiter::with_hold_nonce`].
    pub fn mints_holds(&self) -> bool {
        self.hold_rules
    }

    /// This limiter, minting its hold ids under `nonce` (16 random bytes drawn for this
    /// VM alone: see [`HoldIds`]). Without one (tests that do not care), a fleet-wide
    /// concurrency rule is asked without a hold, and the service holds under an id of its
    /// own that only its deadline ends.
    pub fn with_hold_nonce(mut self, nonce: [u8; 16]) -> Limiter {
        if self.mints_holds() {
            self.hold_ids = Some(HoldIds::new(nonce));
        }
        self
    }

    /// Whether a fleet-wide concurrency rule is among `global`: the request's call then
    /// takes a hold, and neither leases nor the over-limit cache decide it.
    fn holds_fleet_wide(&self, global: &[(&request::descriptor::Applied, u32)]) -> bool {
        self.hold_rules
            && global
                .iter()
                .any(|(a, _)| self.config.rules[a.rule].limit == Limit::GlobalConcurrency)
    }

    /// The key this limiter's fingerprints are made with.
    pub fn placement(&self) -> PlacementKey {
        self.prefixes.borrow().key
    }

    /// The key and the rules' fingerprint prefixes hashed under it.
    fn prefixes(&self) -> std::cell::Ref<'_, Prefixes> {
        self.prefixes.borrow()
    }

    /// Uses `key` from now on: the one stored in shared data, when it turns out not to be
    /// ours ([`PlacementKey::reconcile`]).
    pub fn adopt_placement(&self, key: PlacementKey) {
        *self.prefixes.borrow_mut() = Prefixes::new(&self.config, key);
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

    /// The concurrency keys' table, when some rule is a concurrency rule.
    pub fn slot_table(&self) -> Option<&ConcurrencyTable> {
        self.concurrency.then_some(&self.slots)
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

    /// The reply to send when the host cannot carry out a decision and the filter's own
    /// `failure_mode` denies: `failure_status`, or gRPC UNAVAILABLE, in the request's
    /// protocol (read only now, one header look-up).
    pub fn failure_reply(&self, request: &mut impl RequestView) -> Reply {
        reply::failure(self.config.failure_status, client_protocol(request))
    }

    /// A failure mode, applied and counted: the one place it is decided. `None` lets
    /// the request through.
    pub(super) fn failure_mode(
        &self,
        mode: FailureMode,
        request: &mut impl RequestView,
        tally: &mut Tally,
    ) -> Option<Reply> {
        record(Outcome::FailureMode(mode), tally);
        match mode {
            FailureMode::Allow => None,
            FailureMode::Deny => Some(self.failure_reply(request)),
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
mod check;
mod concurrency;
mod hold;
mod leased;
mod prefixes;
mod record;
mod settle;

#[cfg(test)]
mod tests;
