//! The second half of a global request: what the rate limit service answered, or that it
//! could not answer, turned into the final verdict.
//!
//! # Degraded mode
//!
//! When the call fails (not sent, timeout, UNAVAILABLE, another gRPC status, an `UNKNOWN`
//! overall code, an undecodable body) the failure is counted once, by cause, and then:
//!
//! 1. The global rules **without** a fallback take `rls.failure_mode` together, exactly as
//!    before fallbacks existed. `deny` rejects the request with `failure_status` before any
//!    fallback bucket is touched, so the rejected request consumes nothing.
//! 2. The global rules **with** a fallback are decided by their fallback buckets, in the
//!    same shared-data table and with the same guarantees as local rules: all read and
//!    decided first, nothing written if an enforced one denies.
//! 3. A fallback denial answers 429 with `retry-after` and `x-ratelimit-*` from the
//!    fallback bucket, and gives back the local tokens the request took.
//! 4. If the fallback buckets themselves cannot be used (clock, shared data, contention),
//!    that is a local limiter failure: counted as such, and `failure_mode` decides.
//!
//! Nothing about the failure is remembered: the next request calls the service again,
//! and a rule goes back to the service's answer as soon as there is one.

use super::record::{record, rule_counter, Outcome};
use super::{client_protocol, Clock, Limiter, Pending, Verdict};
use crate::config::{FailureMode, Limit, MAX_RULES};
use crate::metrics::{PerRule, Tally};
use crate::reply::{self, Headers};
use crate::request::descriptor::RequestView;
use crate::shared::local::{self, Held, PerBucket};
use crate::shared::SharedData;
use crate::wire::rls::{self, Answer, Decided};

/// The shadow flags of as many rules as a configuration may have, none of them shadow.
const NOT_SHADOW: [bool; MAX_RULES] = [false; MAX_RULES];

impl Limiter {
    /// The final verdict for a request that waited for the rate limit service. The
    /// request is read (its `content-type`) only to reject it, and `now_ns` is called
    /// (at most once) only to give local tokens back, to remember a denial in the
    /// over-limit cache or, when the service failed, to use fallback buckets.
    pub fn answer(
        &self,
        mut pending: Pending,
        answer: Answer,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        // The meter goes with the request if it goes on; a rejection gave its tokens back.
        let meter = pending.meter.take();
        match self.decide_answer(pending, answer, request, now_ns, store, tally) {
            Verdict::Continue(mut pass) => {
                pass.meter = meter;
                Verdict::Continue(pass)
            }
            other => other,
        }
    }

    /// Whether the service's `answer` took no hold for the request's call: it said the
    /// call is over its limit, so its release need not be sent. Any other answer, a
    /// failure included (a call that timed out may have been decided), may have taken
    /// one; its release is sent, and frees nothing if nothing was taken.
    pub fn took_no_hold(&self, answer: &Answer) -> bool {
        rls::said_over_limit(answer)
    }

    fn decide_answer(
        &self,
        pending: Pending,
        answer: Answer,
        request: &mut impl RequestView,
        now_ns: impl FnOnce() -> Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        let Some(rls) = self.rls() else {
            return Verdict::Continue(Default::default());
        };
        let mut clock = Clock::new(now_ns);
        // Without a shadow rule among them (the common case), the flags are a slice of
        // `NOT_SHADOW`, not a vector per answer.
        let owned: Vec<bool>;
        let any_shadow = pending.rules.iter().any(|&r| self.config.rules[r].shadow);
        let shadows: &[bool] = match NOT_SHADOW.get(..pending.rules.len()) {
            Some(none) if !any_shadow => none,
            _ => {
                owned = pending
                    .rules
                    .iter()
                    .map(|&r| self.config.rules[r].shadow)
                    .collect();
                &owned
            }
        };
        let headers_on_allowed = self.config.response.headers_on_allowed;
        let mut decided = match rls::interpret_with(&answer, shadows, headers_on_allowed) {
            Ok(decided) => decided,
            Err(failure) => {
                record(Outcome::RlsFailed(failure), tally);
                let clock_needed = !pending.held.is_empty() || !pending.fallbacks.is_empty();
                let now = if clock_needed { clock.now() } else { None };
                return self.degraded(pending, rls.failure_mode, request, now, store, tally);
            }
        };
        // The service's statuses come by descriptor position; the rules are ours.
        for (standing, &rule) in decided.standings.iter_mut().zip(&pending.rules) {
            standing.rule = rule;
            if self.hold_rules && self.config.rules[rule].limit == Limit::GlobalConcurrency {
                // A slot frees when some stream ends: no window, and no time to promise
                // (the service's reset is only its earliest hold's deadline), as for a
                // concurrency rule in this Envoy.
                standing.window_s = None;
                standing.reset_ns = None;
                standing.next_ns = None;
                standing.retry_ns = None;
            }
        }
        // Pushed one by one: `collect` went through `SmallVec::extend`'s reserve.
        let mut rules: PerBucket<(usize, PerRule)> = PerBucket::new();
        let mut shadow_denied = pending.shadow_denied;
        for (i, (&rule, &shadow)) in pending.rules.iter().zip(shadows).enumerate() {
            let counter = rule_counter(!decided.is_over(i), shadow);
            shadow_denied |= counter == PerRule::ShadowDenied;
            rules.push((rule, counter));
        }
        let decision = Outcome::RlsDecided {
            rules: &rules,
            dropped_headers: decided.dropped_headers,
            over_limit: decided.over_limit,
        };
        record(decision, tally);
        if decided.over_limit {
            let finished = Outcome::Finished {
                allowed: false,
                shadow_denied,
            };
            record(finished, tally);
            // Only read the clock when there is a denial to remember or tokens to give back.
            let needs_clock = pending.cache_key.is_some() || !pending.held.is_empty();
            let now = if needs_clock { clock.now() } else { None };
            return self.rejected(&pending, decided, shadows, now, store, request, tally);
        }
        if decided.grants.iter().any(Option::is_some) {
            let now = clock.now();
            self.store_grants(&pending.lease_keys, &decided.grants, now, store, tally);
        }
        // Every standing only for the headers of an allowed request, when it carries them.
        let standings = if headers_on_allowed {
            let mut all = pending.local;
            all.extend(decided.standings);
            all
        } else {
            PerBucket::new()
        };
        let mut pass = self.pass(&standings, shadow_denied, tally);
        pass.request_headers = decided.request_headers;
        pass.response_headers.append(decided.response_headers);
        Verdict::Continue(pass)
    }

    /// Rejects a request the service said is over its limit (`decided`): remembers the
    /// denial in the over-limit cache, gives back the local tokens it took, and replies
    /// with the service's statuses, body and headers. `now` is `None` when the clock
    /// failed or was not needed.
    #[allow(
        clippy::too_many_arguments,
        reason = "the answer's step hands on what the request's steps found"
    )]
    fn rejected(
        &self,
        pending: &Pending,
        decided: Decided,
        shadows: &[bool],
        now: Option<u64>,
        store: &impl SharedData,
        request: &mut impl RequestView,
        tally: &mut Tally,
    ) -> Verdict {
        if let (Some(key), Some(now)) = (&pending.cache_key, now) {
            self.remember_denial(key, shadows, &decided, now, store, tally);
        }
        if let (false, Some(now)) = (pending.held.is_empty(), now) {
            local::give_back(&self.table, store, &pending.held, now);
        }
        let body = (!decided.raw_body.is_empty()).then_some(decided.raw_body.as_slice());
        let reply = reply::rejection(
            &self.config.response,
            &self.config.rules,
            &decided.standings,
            body,
            decided.response_headers,
            client_protocol(request),
            now.unwrap_or(0),
        );
        Verdict::Reject(reply)
    }

    /// Decides a request the service could not: see the module documentation. `mode` is
    /// `rls.failure_mode`; `now` is `None` when the clock failed or was not needed.
    fn degraded(
        &self,
        pending: Pending,
        mode: FailureMode,
        request: &mut impl RequestView,
        now: Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) -> Verdict {
        let give_back = |held: &[Held]| {
            if let (false, Some(now)) = (held.is_empty(), now) {
                local::give_back(&self.table, store, held, now);
            }
        };
        // Some rule applied that has no fallback: it takes `rls.failure_mode`.
        let unguarded = pending.rules.len() > pending.fallbacks.len();
        if pending.fallbacks.is_empty() || (unguarded && mode == FailureMode::Deny) {
            return match self.failure_mode(mode, request, tally) {
                Some(reply) => {
                    give_back(&pending.held);
                    Verdict::Reject(reply)
                }
                None => Verdict::Continue(self.pass(&pending.local, pending.shadow_denied, tally)),
            };
        }
        let fallback = match self.use_buckets(&pending.fallbacks, now, store, tally) {
            Ok(fallback) => fallback,
            Err(_) => {
                return match self.failure_mode(self.config.failure_mode, request, tally) {
                    Some(reply) => {
                        give_back(&pending.held);
                        Verdict::Reject(reply)
                    }
                    None => {
                        Verdict::Continue(self.pass(&pending.local, pending.shadow_denied, tally))
                    }
                };
            }
        };
        let shadow_denied = pending.shadow_denied || fallback.shadow_denied;
        record(
            Outcome::Fallback {
                allowed: fallback.allowed,
            },
            tally,
        );
        if !fallback.allowed {
            let finished = Outcome::Finished {
                allowed: false,
                shadow_denied,
            };
            record(finished, tally);
            give_back(&pending.held);
            let reply = reply::rejection(
                &self.config.response,
                &self.config.rules,
                &fallback.standings,
                None,
                Headers::new(),
                client_protocol(request),
                now.unwrap_or(0),
            );
            return Verdict::Reject(reply);
        }
        if unguarded {
            // The rules without a fallback let it through by `rls.failure_mode: allow`.
            record(Outcome::FailureMode(FailureMode::Allow), tally);
        }
        let mut standings = pending.local;
        standings.extend(fallback.standings);
        Verdict::Continue(self.pass(&standings, shadow_denied, tally))
    }
}
