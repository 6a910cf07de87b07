//! The concurrency step: taking slots for the request's concurrency rules after its local
//! rules admitted it, and giving them back when its stream ends ([`Limiter::release`]).
//!
//! A request takes its slots in every concurrency rule that applies, in order; if an
//! enforced rule has no room the slots already taken are given back at once, and so are
//! the request's local tokens: a rejected request takes nothing. A shadow rule with no
//! room is counted (`rejected`, `shadow_denied`) and takes nothing; with room it takes
//! its slots like any other, so that its `in_flight` is real, and gives them back the
//! same way.

use super::record::{record, rule_counter, BucketFailure, Outcome};
use super::Limiter;
use crate::config::{Concurrency, Limit};
use crate::metrics::{PerConcurrency, Tally};
use crate::reply::Standing;
use crate::request::descriptor::Applied;
use crate::shared::concurrency::{rule_tag, Acquired, ConcurrencyError, Hold, Want};
use crate::shared::local::PerBucket;
use crate::shared::SharedData;

/// Slots a request holds for one rule, given back by [`Limiter::release`] when its
/// stream ends (however it ends); if that never happens, they come back at their
/// deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHold {
    /// The rule (its index in the configuration).
    pub rule: usize,
    /// Where, and until when.
    pub hold: Hold,
}

/// The slots one request holds: two inline (a request meets one or two concurrency rules),
/// so that holding them takes no allocation of its own.
pub type Slots = PerBucket<SlotHold>;

/// Where a request's slots go: a plain list, or the host's per-request holding, made on
/// first use so that a request of a configuration without concurrency rules in this
/// Envoy builds, moves and drops no list at all (the check never asks for it).
pub trait SlotSink {
    /// The list the request's slots are pushed onto.
    fn slots(&mut self) -> &mut Slots;
}

impl SlotSink for Slots {
    fn slots(&mut self) -> &mut Slots {
        self
    }
}

/// What the concurrency step decided.
pub(super) enum SlotsDecided {
    /// Every enforced rule had room.
    Admitted {
        /// A shadow rule had none.
        shadow_denied: bool,
    },
    /// An enforced rule had no room: where each rule stands, for the reply.
    Rejected(PerBucket<Standing>),
    /// A key could not be decided: the failure mode decides.
    Failed,
}

impl Limiter {
    /// Takes slots of the concurrency rules among `applied` (`costs` in the same order)
    /// at `now_ns` (`None`: the clock failed), pushing what the request holds onto
    /// `holds`.
    pub(super) fn take_slots(
        &self,
        applied: &[Applied],
        costs: &[u32],
        now_ns: Option<u64>,
        store: &impl SharedData,
        holds: &mut Slots,
        tally: &mut Tally,
    ) -> SlotsDecided {
        let Some(now_ms) = now_ns.map(|ns| ns / 1_000_000) else {
            record(Outcome::SlotsFailed(Some(BucketFailure::Clock)), tally);
            return SlotsDecided::Failed;
        };
        let start = holds.len();
        let mut shadow_denied = false;
        let mut standings = PerBucket::new();
        let mut rejected = false;
        for (a, &cost) in applied.iter().zip(costs) {
            let rule = &self.config.rules[a.rule];
            let Limit::Concurrency(limit) = rule.limit else {
                continue;
            };
            let want = self.want(a, limit, cost);
            let acquired = match self.slots.acquire(store, &want, now_ms) {
                Ok(acquired) => acquired,
                Err(e) => {
                    record(
                        Outcome::SlotsFailed(match e {
                            ConcurrencyError::Full => None,
                            ConcurrencyError::Store(_) => Some(BucketFailure::SharedData),
                            ConcurrencyError::Contention => Some(BucketFailure::Contention),
                        }),
                        tally,
                    );
                    self.release_from(holds, start, now_ms, store, tally);
                    return SlotsDecided::Failed;
                }
            };
            if acquired.reclaimed > 0 || acquired.reclaimed_other.is_some() {
                self.count_reclaims(a.rule, acquired.reclaimed, acquired.reclaimed_other, tally);
            }
            let allowed = acquired.hold.is_some();
            let (metric, in_flight) = match acquired.outcome {
                Acquired::Held { in_flight, .. } => (PerConcurrency::Admitted, in_flight),
                Acquired::Full { in_flight } => (PerConcurrency::Rejected, in_flight),
            };
            self.count(a.rule, metric, 1, tally);
            record(
                Outcome::Buckets {
                    table: crate::shared::local::TableEvents {
                        conflicts: acquired.conflicts,
                        ..Default::default()
                    },
                    rules: &[(a.rule, rule_counter(allowed, rule.shadow))],
                },
                tally,
            );
            if let Some(hold) = acquired.hold {
                self.count(
                    a.rule,
                    PerConcurrency::InFlight,
                    i64::from(hold.cost),
                    tally,
                );
                holds.push(SlotHold { rule: a.rule, hold });
            }
            shadow_denied |= !allowed && rule.shadow;
            rejected |= !allowed && !rule.shadow;
            standings.push(Standing {
                rule: a.rule,
                limit: limit.max,
                window_s: None,
                remaining: u32::try_from(u64::from(limit.max).saturating_sub(in_flight))
                    .unwrap_or(0),
                reset_ns: None,
                next_ns: None,
                allowed,
                retry_ns: None,
                shadow: rule.shadow,
            });
        }
        if rejected {
            self.release_from(holds, start, now_ms, store, tally);
            return SlotsDecided::Rejected(standings);
        }
        SlotsDecided::Admitted { shadow_denied }
    }

    /// Gives back the slots a request held, when its stream ends (`now_ns`: the clock;
    /// `None`: the slots come back at their deadline instead).
    pub fn release(
        &self,
        holds: &[SlotHold],
        now_ns: Option<u64>,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        let Some(now_ms) = now_ns.map(|ns| ns / 1_000_000) else {
            record(Outcome::SlotsFailed(Some(BucketFailure::Clock)), tally);
            return;
        };
        for h in holds {
            let released = self.slots.release(store, &h.hold, now_ms);
            self.count(
                h.rule,
                PerConcurrency::Released,
                i64::from(released.freed),
                tally,
            );
            self.count(
                h.rule,
                PerConcurrency::InFlight,
                -i64::from(released.freed),
                tally,
            );
            if released.reclaimed > 0 {
                self.count_reclaims(h.rule, released.reclaimed, None, tally);
            }
        }
    }

    /// Gives back `holds[start..]` and forgets them: a request rejected after taking them.
    fn release_from(
        &self,
        holds: &mut Slots,
        start: usize,
        now_ms: u64,
        store: &impl SharedData,
        tally: &mut Tally,
    ) {
        // Released in place, then forgotten: a copy of them cost the module 0.9 KB.
        let taken = holds.get(start..).unwrap_or_default();
        self.release(taken, Some(now_ms.saturating_mul(1_000_000)), store, tally);
        holds.truncate(start);
    }

    fn want(&self, a: &Applied, limit: Concurrency, cost: u32) -> Want {
        let rule = &self.config.rules[a.rule];
        let prefixes = self.prefixes();
        let fingerprint = match prefixes.concurrency(a.rule) {
            Some(prefix) => prefix.values(&a.values),
            None => prefixes
                .key
                .concurrency_prefix(&rule.name, limit)
                .values(&a.values),
        };
        Want {
            fingerprint,
            tag: rule_tag(&rule.name),
            max: limit.max,
            duration_ms: limit.max_duration_ms,
            cost,
        }
    }

    /// Counts slots reclaimed from rule `rule`'s key, and from another key whose slot it
    /// took (found by its tag among this configuration's rules; a rule no longer
    /// configured has no metric left to count them in).
    fn count_reclaims(&self, rule: usize, own: u64, other: Option<(u32, u64)>, tally: &mut Tally) {
        let n = |slots: u64| i64::try_from(slots).unwrap_or(i64::MAX);
        if own > 0 {
            self.count_cold(rule, PerConcurrency::Reclaimed, n(own), tally);
            self.count_cold(rule, PerConcurrency::InFlight, -n(own), tally);
        }
        if let Some((tag, slots)) = other {
            let owner =
                self.config.rules.iter().position(|r| {
                    matches!(r.limit, Limit::Concurrency(_)) && rule_tag(&r.name) == tag
                });
            if let Some(owner) = owner {
                self.count_cold(owner, PerConcurrency::Reclaimed, n(slots), tally);
                self.count_cold(owner, PerConcurrency::InFlight, -n(slots), tally);
            }
        }
    }

    /// [`Limiter::count`], out of line, for the reclaims (rare: inlined at their four
    /// calls it was 1.3 KB of the module).
    #[inline(never)]
    fn count_cold(&self, rule: usize, metric: PerConcurrency, n: i64, tally: &mut Tally) {
        self.count(rule, metric, n, tally);
    }

    /// Adds `n` to rule `rule`'s concurrency metric `metric`.
    fn count(&self, rule: usize, metric: PerConcurrency, n: i64, tally: &mut Tally) {
        if n == 0 {
            return;
        }
        let rules = &self.config.rules;
        let ordinal = rules[..rule]
            .iter()
            .filter(|r| matches!(r.limit, Limit::Concurrency(_)))
            .count();
        let slots = Outcome::Slots {
            rules: rules.len(),
            ordinal,
            metric,
            n,
        };
        record(slots, tally);
    }
}
