//! [`Limiter::check`]: a request's steps in their order, each a short function that
//! either decides the request or hands the next one what it found.

use super::cached::Lookup;
use super::concurrency::{SlotSink, Slots, SlotsDecided};
use super::leased::LeaseStep;
use super::prefixes::Identities;
use super::record::{record, Outcome};
use super::{client_protocol, refuse, Ask, Clock, Limiter, Pass, Pending, Refill, Verdict};
use crate::config::Limit;
use crate::metrics::Tally;
use crate::reply::{self, Headers, Reply, Standing};
use crate::request::descriptor::{self, Applied, RequestView};
use crate::shared::local::{self, Take};
use crate::shared::SharedData;
use crate::usage::ResponseMeter;
use smallvec::SmallVec;

impl Limiter {
    /// Decides one request, or says what to ask the rate limit service. `now_ns` is
    /// called at most once, and only if a rule applies.
    pub fn check(
        &self,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        self.check_holding(request, now_ns, store, tally, &mut Slots::new())
    }

    /// [`Limiter::check`], pushing onto `holds` the concurrency slots the request takes
    /// (only a configuration with concurrency rules in this Envoy ever touches it):
    /// the host gives them back with [`Limiter::release`] when the request's stream ends,
    /// whatever the verdict (a request rejected later by the service holds them until its
    /// local reply is done).
    pub fn check_holding(
        &self,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
        holds: &mut impl SlotSink,
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
        let global = self.global_rules(&applied, &costs);
        let identities = match self.rls() {
            Some(_) => self.identities(&global),
            None => Identities::new(),
        };
        let takes = self.local_takes(&applied, &costs);
        let steps = Steps {
            applied: &applied,
            costs: &costs,
            global: &global,
            identities: &identities,
        };
        // A request that takes nothing in this Envoy is paid from its leases first: they
        // admit it whatever the over-limit cache says (the service counted their tokens
        // already), so when they do, the cache is not read. When they do not, they gave
        // back what they took, and the step's outcome (the keys to ask quota for) goes on
        // to the call. Such a request has no response meter: no local rule, and a global
        // rule with a response cost never leases.
        // (Without a lease table no lease applies: the test spares local-only
        // configurations the walk for concurrency rules.)
        let spent = self.leases.is_some() && takes.is_empty() && !self.takes_slots(&applied);
        let mut lease_keys = Identities::new();
        if spent {
            match self.spend_leases(&global, &identities, &mut clock, store, tally) {
                LeaseStep::None => {}
                LeaseStep::Decided(refill) => return self.leased(refill, None, &[], false, tally),
                LeaseStep::Ask(keys) => lease_keys = keys,
            }
        }
        // The over-limit cache, before local rules: a request it rejects takes nothing.
        // (Without a cache there is nothing to look up, and nothing to count.)
        let mut cache_key = None;
        if self.over_limit.is_some() {
            let mut lookup = self.look_up_denials(&global, &identities, &mut clock, store, request);
            if let Some(verdict) = remembered_denial(&mut lookup, tally) {
                return verdict;
            }
            lookup.record(false, tally);
            cache_key = lookup.key.take();
        }
        let mut pending = Pending {
            cache_key,
            lease_keys,
            ..Pending::default()
        };
        // Local rules: take from the shared buckets. The clock is read only when some
        // apply: a request only global rules decide, with no lease to spend, makes no
        // clock call.
        if !takes.is_empty() {
            if let Some(reply) =
                self.take_local(&takes, &mut pending, clock.now(), store, request, tally)
            {
                return Verdict::Reject(reply);
            }
        }
        // Concurrency rules: take their slots (a rejection gives back the local tokens).
        if self.concurrency {
            if let Some(reply) = self.take_concurrency(
                &steps,
                &mut pending,
                clock.now(),
                store,
                request,
                tally,
                holds,
            ) {
                return Verdict::Reject(reply);
            }
        }
        if self.response_costs {
            pending.meter = self.meter(&applied, &takes, &pending.held);
        }
        self.go_global(&steps, spent, &mut pending, &mut clock, store, tally)
    }

    /// Takes the request's local tokens (`takes`, at least one) at `now`, noting in
    /// `pending` what it holds and where the rules stand. `Some`: the reply that rejects
    /// the request (a local limit, or the buckets failing under `failure_mode: deny`).
    fn take_local(
        &self,
        takes: &[(usize, Take)],
        pending: &mut Pending,
        now: Option<u64>,
        store: &impl SharedData,
        request: &mut impl RequestView,
        tally: &mut Tally,
    ) -> Option<Reply> {
        match self.use_buckets(takes, now, store, tally) {
            Ok(local) if local.allowed => {
                pending.held = local.held;
                pending.local = local.standings;
                pending.shadow_denied = local.shadow_denied;
                None
            }
            Ok(local) => {
                let finished = Outcome::Finished {
                    allowed: false,
                    shadow_denied: local.shadow_denied,
                };
                record(finished, tally);
                Some(reply::rejection(
                    &self.config.response,
                    &self.config.rules,
                    &local.standings,
                    None,
                    Headers::new(),
                    client_protocol(request),
                    now.unwrap_or(0),
                ))
            }
            Err(_) => self.failure_mode(self.config.failure_mode, request, tally),
        }
    }

    /// Takes the request's concurrency slots at `now`. `Some`: the reply that rejects the
    /// request (no room, or a key that cannot be decided under `failure_mode: deny`),
    /// after giving back its local tokens.
    #[allow(
        clippy::too_many_arguments,
        reason = "the check's own state, passed as the other steps take it"
    )]
    fn take_concurrency(
        &self,
        steps: &Steps<'_>,
        pending: &mut Pending,
        now: Option<u64>,
        store: &impl SharedData,
        request: &mut impl RequestView,
        tally: &mut Tally,
        holds: &mut impl SlotSink,
    ) -> Option<Reply> {
        let give_back = |pending: &Pending| {
            if let Some(now) = now {
                local::give_back(&self.table, store, &pending.held, now);
            }
        };
        match self.take_slots(steps.applied, steps.costs, now, store, holds.slots(), tally) {
            SlotsDecided::Admitted { shadow_denied } => {
                pending.shadow_denied |= shadow_denied;
                None
            }
            SlotsDecided::Rejected(standings) => {
                give_back(pending);
                let finished = Outcome::Finished {
                    allowed: false,
                    shadow_denied: pending.shadow_denied,
                };
                record(finished, tally);
                Some(reply::rejection(
                    &self.config.response,
                    &self.config.rules,
                    &standings,
                    None,
                    Headers::new(),
                    client_protocol(request),
                    now.unwrap_or(0),
                ))
            }
            SlotsDecided::Failed => {
                let reply = self.failure_mode(self.config.failure_mode, request, tally);
                if reply.is_some() {
                    give_back(pending);
                }
                reply
            }
        }
    }

    /// The global rules, once the local ones admitted the request (`pending` by reference:
    /// it is large, and copied only into the call's box): paid from quota
    /// leases with no call, or one call for all of them, or nothing global applies.
    fn go_global(
        &self,
        steps: &Steps<'_>,
        spent: bool,
        pending: &mut Pending,
        clock: &mut Clock<impl FnOnce() -> Option<u64>>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        // No rate limit service (a configuration without global rules): no lease to
        // spend and no call to build, as both steps would find. Skipping them saves a
        // local-only request ~120 instructions; a global configuration pays one test.
        if self.rls().is_none() {
            let mut pass = self.pass(&pending.local, pending.shadow_denied, tally);
            pass.meter = pending.meter.take();
            return Verdict::Continue(pass);
        }
        // Spent already when the request takes nothing in this Envoy (and not decided:
        // the keys to ask quota for are in `pending`).
        if !spent {
            match self.spend_leases(steps.global, steps.identities, clock, store, tally) {
                LeaseStep::None => {}
                LeaseStep::Decided(refill) => {
                    let meter = pending.meter.take();
                    return self.leased(
                        refill,
                        meter,
                        &pending.local,
                        pending.shadow_denied,
                        tally,
                    );
                }
                LeaseStep::Ask(keys) => pending.lease_keys = keys,
            }
        }
        match self.global_request(steps.global, pending) {
            Some((call, release)) => {
                record(Outcome::Asked, tally);
                let pending = std::mem::take(pending);
                Verdict::Ask(Box::new(Ask {
                    call,
                    pending,
                    release,
                }))
            }
            None => {
                let mut pass = self.pass(&pending.local, pending.shadow_denied, tally);
                pass.meter = pending.meter.take();
                Verdict::Continue(pass)
            }
        }
    }

    /// The rules among `applied` the service decides (global and fleet-wide concurrency
    /// rules), with their costs, in descriptor order: listed once per request for the
    /// cache, the leases and the call (each had made its own list). Empty, with no walk over the rules, without a rate limit service.
    fn global_rules<'a>(&self, applied: &'a [Applied], costs: &[u32]) -> GlobalRules<'a> {
        if self.rls().is_none() {
            return GlobalRules::new();
        }
        let mut global = GlobalRules::new();
        // Pushed in a loop: a collect through `SmallVec::extend` counted more.
        for (a, &cost) in applied.iter().zip(costs) {
            if self.config.rules[a.rule].limit.is_asked() {
                global.push((a, cost));
            }
        }
        global
    }

    /// The identities of the descriptors of `global` (the request's global rules), hashed
    /// once for the over-limit cache and the lease table; empty when neither will look
    /// them up (no cache and no leases, or a fleet-wide concurrency rule applies, which
    /// both steps skip).
    fn identities(&self, global: &[(&Applied, u32)]) -> Identities {
        let Some(rls) = self.rls() else {
            return Identities::new();
        };
        let looked_up = self.over_limit.is_some() || self.leases.is_some();
        if global.is_empty() || !looked_up || self.holds_fleet_wide(global) {
            return Identities::new();
        }
        self.prefixes()
            .identities(&self.config.rules, &rls.domain, global)
    }

    /// Whether a concurrency rule of this Envoy is among `applied` (one test without
    /// concurrency rules): the request then takes slots before its leases are spent.
    fn takes_slots(&self, applied: &[Applied]) -> bool {
        self.concurrency
            && applied
                .iter()
                .any(|a| matches!(self.config.rules[a.rule].limit, Limit::Concurrency(_)))
    }

    /// A request its leases decided: allowed, with the local rules' `standings` in its
    /// headers, the lease `refill` to make and the response `meter`.
    fn leased(
        &self,
        refill: Option<Refill>,
        meter: Option<Box<ResponseMeter>>,
        standings: &[Standing],
        shadow_denied: bool,
        tally: &mut Tally,
    ) -> Verdict {
        let mut pass = self.pass(standings, shadow_denied, tally);
        pass.refill = refill;
        pass.meter = meter;
        Verdict::Continue(pass)
    }

    /// Counts an allowed request and builds its headers.
    pub(super) fn pass(
        &self,
        standings: &[Standing],
        shadow_denied: bool,
        tally: &mut Tally,
    ) -> Pass {
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
                Headers::new()
            },
            refill: None,
        }
    }
}

/// The verdict when the over-limit cache remembers a denial for the request (`None`:
/// it does not, and the look-up is left to count). A request that takes nothing in this
/// Envoy meets it only when its leases did not decide it (see
/// docs/leases-and-over-limit-cache.md); one with local or concurrency rules meets it
/// before it takes anything.
fn remembered_denial(lookup: &mut Lookup, tally: &mut Tally) -> Option<Verdict> {
    let reply = lookup.reply.take()?;
    lookup.record(true, tally);
    let finished = Outcome::Finished {
        allowed: false,
        shadow_denied: false,
    };
    record(finished, tally);
    Some(Verdict::Reject(reply))
}

/// What a request's first steps found, read by the later ones.
struct Steps<'a> {
    /// The rules that apply, with their descriptor values.
    applied: &'a [Applied],
    /// Each applied rule's cost, in the same order.
    costs: &'a [u32],
    /// The global rules among them, with their costs ([`Limiter::global_rules`]).
    global: &'a [(&'a Applied, u32)],
    /// Their descriptors' identities ([`Limiter::identities`]).
    identities: &'a [u128],
}

/// A request's global rules with their costs, in descriptor order (inline for two).
pub(super) type GlobalRules<'a> = SmallVec<[(&'a Applied, u32); 2]>;
