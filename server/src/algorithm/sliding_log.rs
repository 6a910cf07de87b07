//! Sliding window log: remembers when each admitted request came, exact over any window.
//!
//! A request is admitted when the hits admitted in the last unit of time — the half-open
//! window `(now − unit, now]` — plus its own fit within the limit. So no window of one unit,
//! wherever it starts, ever holds more than the limit. The price is memory: one entry per
//! admitted request still inside the window (hits arriving at the same nanosecond share one
//! entry), so up to `requests_per_unit` entries of 16 bytes per counter. The configuration
//! caps `requests_per_unit` for this algorithm (see [`crate::config`]).

use super::{clamp_u32, Decision, Limit};
use std::collections::VecDeque;

/// Admitted requests still inside the window, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct State {
    entries: VecDeque<Entry>,
    total: u64,
}

/// Hits admitted at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    at_ns: u64,
    hits: u64,
}

/// A change to a log: drop the oldest entries that left the window, maybe record a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    expired: usize,
    record: Option<(u64, u64)>,
    /// Record into the newest entry, restamped at the record's time, rather than a new
    /// one (a charge past the limit, see [`charge`]).
    merge: bool,
}

impl Update {
    /// How many old entries this update drops.
    pub fn expired(&self) -> usize {
        self.expired
    }

    /// Whether this update records hits (into a new entry or the newest).
    pub fn records(&self) -> bool {
        self.record.is_some()
    }
}

impl State {
    /// Number of stored entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Once the newest entry leaves the window, the log is as good as empty.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        self.entries
            .back()
            .map_or(0, |e| e.at_ns.saturating_add(limit.period_ns()))
    }

    /// Applies an update computed by [`decide`] on this state.
    pub fn apply(&mut self, update: Update) {
        for _ in 0..update.expired {
            if let Some(e) = self.entries.pop_front() {
                self.total = self.total.saturating_sub(e.hits);
            }
        }
        if let Some((at_ns, hits)) = update.record {
            self.total = self.total.saturating_add(hits);
            match self.entries.back_mut() {
                Some(last) if last.at_ns == at_ns || update.merge => {
                    last.at_ns = last.at_ns.max(at_ns);
                    last.hits = last.hits.saturating_add(hits);
                }
                _ => self.entries.push_back(Entry { at_ns, hits }),
            }
        }
    }
}

/// Admits `hits` when the window ending now has room for them. `hits` of 0 is a check-only
/// probe: admitted when one hit would fit, recording nothing.
pub fn decide(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, Update) {
    let period = limit.period_ns();
    let rpu = limit.rpu();
    // An entry at `t` is inside the window while `now < t + period`.
    let inside = |e: &Entry| e.at_ns.saturating_add(period) > now_ns;
    let expired = state.entries.iter().take_while(|e| !inside(e)).count();
    let expired_hits: u64 = state.entries.iter().take(expired).map(|e| e.hits).sum();
    let live = state.total.saturating_sub(expired_hits);
    let after = live.saturating_add(hits);
    if hits == 0 && live < rpu {
        // Check-only: nothing recorded, so the limit is fully available once the newest
        // live entry leaves (at once with none live).
        let newest = state.entries.back().filter(|_| live > 0);
        let decision = Decision {
            allowed: true,
            remaining: clamp_u32(rpu - live),
            reset_in_ns: newest
                .map_or(0, |e| e.at_ns.saturating_add(period).saturating_sub(now_ns)),
            grant: None,
        };
        let update = Update {
            expired,
            record: None,
            merge: false,
        };
        return (decision, update);
    }
    if hits > 0 && after <= rpu {
        // Keep the log ordered even if the clock went back.
        let at_ns = state.entries.back().map_or(now_ns, |e| e.at_ns.max(now_ns));
        let decision = Decision {
            allowed: true,
            remaining: clamp_u32(rpu - after),
            reset_in_ns: at_ns.saturating_add(period).saturating_sub(now_ns),
            grant: None,
        };
        let update = Update {
            expired,
            record: Some((at_ns, hits)),
            merge: false,
        };
        return (decision, update);
    }
    let live_entries = state
        .entries
        .iter()
        .skip(expired)
        .map(|e| (e.at_ns, e.hits));
    let decision = Decision {
        allowed: false,
        remaining: clamp_u32(rpu.saturating_sub(live)),
        reset_in_ns: one_hit_in(live_entries, live, now_ns, limit),
        grant: None,
    };
    let update = Update {
        expired,
        record: None,
        merge: false,
    };
    (decision, update)
}

/// Records `hits` whether they fit or not (a stream-end charge, see [`super::charge`]).
/// When they fit, exactly [`decide`]. When they do not, the log holds more than the limit
/// until enough has left the window, and they are added to the newest live entry,
/// restamped now, rather than as an entry of their own: a new entry is only ever made by
/// hits that fit, so a log never holds more entries than its limit, however much is
/// charged past it. The price is conservative: the newest entry's earlier hits stay in the
/// window until now + one unit, later than their own time would keep them. With no live
/// entry, the charge is one new entry. The log owes at most one limit: it holds at most
/// [`Limit::max_count`] live hits, what is charged beyond is forgiven (the restamp still
/// happens, so a charge at the cap keeps the limit over one unit from now).
pub fn charge(state: &State, now_ns: u64, limit: &Limit, hits: u64) -> (Decision, Update) {
    let (decision, update) = decide(state, now_ns, limit, hits);
    if decision.allowed {
        return (decision, update);
    }
    let expired = update.expired;
    let expired_hits: u64 = state.entries.iter().take(expired).map(|e| e.hits).sum();
    let live = state.total.saturating_sub(expired_hits);
    let hits = hits.min(limit.max_count().saturating_sub(live));
    let newest = state.entries.back().map(|e| e.at_ns);
    let at_ns = newest.map_or(now_ns, |at| at.max(now_ns));
    let merge = expired < state.entries.len();
    let update = Update {
        expired,
        record: Some((at_ns, hits)),
        merge,
    };
    // The live entries as they will be after the update.
    let kept = state.entries.len() - expired - usize::from(merge);
    let merged = state.entries.back().filter(|_| merge).map_or(0, |e| e.hits);
    let after = state
        .entries
        .iter()
        .skip(expired)
        .take(kept)
        .map(|e| (e.at_ns, e.hits))
        .chain(std::iter::once((at_ns, merged.saturating_add(hits))));
    let live: u64 = after.clone().map(|(_, h)| h).fold(0, u64::saturating_add);
    let decision = Decision {
        allowed: false,
        remaining: 0,
        reset_in_ns: one_hit_in(after, live, now_ns, limit),
        grant: None,
    };
    (decision, update)
}

/// The ns from `now_ns` until one hit fits in a log whose live entries are `entries`
/// (oldest first, `live` hits in all): once `live + 1 - rpu` of the oldest live hits have
/// left the window, i.e. when the entry whose running total reaches that many leaves, at
/// its time plus one period (the window is half-open, so it is inside one ns before).
/// Nothing must leave: 0.
fn one_hit_in(
    entries: impl Iterator<Item = (u64, u64)>,
    live: u64,
    now_ns: u64,
    limit: &Limit,
) -> u64 {
    let must_leave = live.saturating_add(1).saturating_sub(limit.rpu());
    if must_leave == 0 {
        return 0;
    }
    let mut left = 0u64;
    entries
        .map(|(at_ns, hits)| {
            left = left.saturating_add(hits);
            (at_ns, left)
        })
        .find(|&(_, left)| left >= must_leave)
        .map_or(0, |(at_ns, _)| {
            at_ns
                .saturating_add(limit.period_ns())
                .saturating_sub(now_ns)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::test_support::limit;
    use crate::algorithm::{Algorithm, Unit};

    const S: u64 = 1_000_000_000;

    fn step(s: &mut State, now: u64, l: &Limit, hits: u64) -> Decision {
        let (d, u) = decide(s, now, l, hits);
        s.apply(u);
        d
    }

    #[test]
    fn no_boundary_burst() {
        let l = limit(2, Unit::Second, Algorithm::SlidingWindowLog);
        let mut s = State::default();
        assert!(step(&mut s, 10 * S - 2, &l, 1).allowed);
        assert!(step(&mut s, 10 * S - 1, &l, 1).allowed);
        // A fixed window would reset at 10 s; the log still sees both requests.
        let d = step(&mut s, 10 * S, &l, 1);
        assert!(!d.allowed);
        assert_eq!(d.reset_in_ns, S - 2, "the oldest leaves at 11 s - 2 ns");
        assert!(!step(&mut s, 11 * S - 3, &l, 1).allowed);
        assert!(step(&mut s, 11 * S - 2, &l, 1).allowed);
        assert_eq!(s.len(), 2, "the expired entry was trimmed");
    }

    #[test]
    fn same_instant_hits_share_an_entry() {
        let l = limit(10, Unit::Minute, Algorithm::SlidingWindowLog);
        let mut s = State::default();
        for _ in 0..5 {
            assert!(step(&mut s, S, &l, 1).allowed);
        }
        assert_eq!(s.len(), 1);
        let d = step(&mut s, S, &l, 5);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_in_ns, 60 * S);
    }

    #[test]
    fn a_charge_past_the_limit_joins_the_newest_entry() {
        let l = limit(10, Unit::Second, Algorithm::SlidingWindowLog);
        let mut s = State::default();
        assert!(step(&mut s, 0, &l, 3).allowed);
        assert!(step(&mut s, S / 2, &l, 4).allowed);
        let (d, u) = charge(&s, S / 2 + 100, &l, 6);
        s.apply(u);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(s.len(), 2, "no entry of its own");
        // 13 live: one hit fits once 4 have left. The 3 at 0 leave at 1 s, the newest (10
        // hits, restamped) at 1.5 s + 100 ns.
        assert_eq!(d.reset_in_ns, S);
        assert!(!step(&mut s, 3 * S / 2 + 99, &l, 1).allowed);
        assert!(step(&mut s, 3 * S / 2 + 100, &l, 1).allowed);

        let mut s = State::default();
        let (d, u) = charge(&s, 5 * S, &l, 25);
        s.apply(u);
        assert!(
            !d.allowed,
            "with nothing live, the charge is an entry of its own"
        );
        assert_eq!((s.len(), d.reset_in_ns), (1, S));
    }

    #[test]
    fn a_charge_owes_at_most_one_limit() {
        let l = limit(10, Unit::Second, Algorithm::SlidingWindowLog);
        let mut s = State::default();
        assert!(step(&mut s, 0, &l, 4).allowed);
        let (d, u) = charge(&s, S / 2, &l, u64::from(u32::MAX));
        s.apply(u);
        assert_eq!(
            (s.total, s.len()),
            (20, 1),
            "the limit and one limit of debt"
        );
        assert_eq!(d.reset_in_ns, S, "until the restamped entry leaves");
        let (d, u) = charge(&s, S / 2 + 7, &l, 5);
        s.apply(u);
        assert_eq!(s.total, 20, "nothing more is owed");
        assert_eq!(
            d.reset_in_ns, S,
            "but the charge keeps it over a unit from now"
        );
        assert!(!step(&mut s, 3 * S / 2 + 6, &l, 1).allowed);
        assert!(step(&mut s, 3 * S / 2 + 7, &l, 1).allowed);
    }

    #[test]
    fn retry_time_counts_the_hits_that_must_leave() {
        let l = limit(3, Unit::Second, Algorithm::SlidingWindowLog);
        let mut s = State::default();
        step(&mut s, 0, &l, 1);
        step(&mut s, 100, &l, 1);
        step(&mut s, 200, &l, 1);
        // Whatever the cost, the answer is when one hit fits: when the oldest leaves.
        for hits in [1, 2, 4] {
            let d = step(&mut s, 300, &l, hits);
            assert!(!d.allowed);
            assert_eq!(d.reset_in_ns, S - 300, "the first leaves at 1 s");
        }
        assert!(
            step(&mut s, S + 100, &l, 1).allowed,
            "two left, one came: 2 live"
        );
        let d = step(&mut s, S + 100, &l, 2);
        assert!(!d.allowed);
        assert_eq!(
            d.reset_in_ns, 0,
            "one hit fits now: only a cost of 2 is too much"
        );
    }
}
