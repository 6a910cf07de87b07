//! One node's part of a counter, and the fleet's counter made of every node's part: pure.
//!
//! Each node writes only its own part of a counter (per key and window: what it admitted,
//! grow-only within the window) and publishes it; the fleet's count is the sum of the
//! parts. A part is a tiny window state that every node reads the same way as time passes
//! ([`Part::at`]), so a part that stops changing (its node died, or has no traffic) keeps
//! counting for exactly as long as the memory store's counter would have: a fixed window
//! until its window ends, or the next one when it carries debt; a sliding counter until
//! its current window has slid out.
//!
//! # Debt
//! A fixed window's charge may count past the limit, and what lies beyond it (the debt, at
//! most one limit) carries into the next window (see
//! [`crate::algorithm::fixed_window`]). A part keeps the debt its own node ran up beside
//! its count, so the next window starts from it whether or not the node is still there to
//! settle it: the carried debt is never lost with a dropped or unsettled window. On one
//! node the fleet is exactly the memory store's counter, to the nanosecond.

use crate::algorithm::{fixed_window, sliding_counter, Algorithm, Limit, State};

/// A node's own part of one counter, in the window it was last written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A fixed window: the hits this node counted in `window` (its carried debt
    /// included), and the debt its charges ran up there (what it counted past the limit).
    Fixed {
        /// Window index: `now / period`.
        window: u64,
        /// Hits counted in the window.
        count: u64,
        /// Hits counted beyond the fleet's limit, which the next window starts with.
        debt: u64,
    },
    /// A sliding window counter: this node's counts of `window` and the one before.
    Sliding {
        /// Window index: `now / period`.
        window: u64,
        /// Hits counted in the previous window.
        previous: u64,
        /// Hits counted in this window.
        current: u64,
    },
}

/// The algorithms a gossip store can hold: those that are counts, which add up across
/// nodes. Their names, for the refusal of any other at load.
pub const SUPPORTED: &[&str] = &["fixed_window", "sliding_window_counter"];

/// Whether the gossip store can enforce `algorithm`.
pub fn supports(algorithm: Algorithm) -> bool {
    matches!(
        algorithm,
        Algorithm::FixedWindow | Algorithm::SlidingWindowCounter
    )
}

impl Part {
    /// A part that has counted nothing, in `window`; `None` for an algorithm the gossip
    /// store does not hold.
    pub fn empty(limit: &Limit, window: u64) -> Option<Part> {
        match limit.algorithm {
            Algorithm::FixedWindow => Some(Part::Fixed {
                window,
                count: 0,
                debt: 0,
            }),
            Algorithm::SlidingWindowCounter => Some(Part::Sliding {
                window,
                previous: 0,
                current: 0,
            }),
            _ => None,
        }
    }

    /// The window it was written in.
    pub fn window(&self) -> u64 {
        match *self {
            Part::Fixed { window, .. } | Part::Sliding { window, .. } => window,
        }
    }

    /// The part as it counts in window `window`: the same window as written; the next one
    /// starts with the carried debt (fixed) or with this window as its previous (sliding);
    /// later ones with nothing. A part from a later window (its node's clock is ahead, or
    /// ours went back) counts as it is, as the memory store keeps counting when the clock
    /// goes back.
    pub fn at(&self, window: u64, limit: &Limit) -> Part {
        if self.window() >= window {
            return *self;
        }
        let next = self.window().saturating_add(1) == window;
        match *self {
            Part::Fixed { debt, .. } => Part::Fixed {
                window,
                count: if next { debt.min(limit.rpu()) } else { 0 },
                debt: 0,
            },
            Part::Sliding { current, .. } => Part::Sliding {
                window,
                previous: if next { current } else { 0 },
                current: 0,
            },
        }
    }

    /// From this instant (ns) the part counts nothing any more, so it may be forgotten and
    /// its gossip key deleted.
    pub fn idle_at(&self, limit: &Limit) -> u64 {
        self.idle_at_period(limit.period_ns())
    }

    /// [`Part::idle_at`] for a limit whose window is `period_ns` long.
    pub fn idle_at_period(&self, period_ns: u64) -> u64 {
        let windows = match *self {
            Part::Fixed { debt, .. } => 1 + u64::from(debt > 0),
            Part::Sliding {
                previous, current, ..
            } => {
                if current > 0 {
                    2
                } else if previous > 0 {
                    1
                } else {
                    0
                }
            }
        };
        if windows == 0 {
            return 0;
        }
        self.window()
            .saturating_add(windows)
            .saturating_mul(period_ns)
    }

    /// Adds `other` (seen in the same window) to this part: the fleet's count is the sum of
    /// its nodes' parts. Parts of different algorithms do not add (a bug: ignored).
    fn add(&mut self, other: &Part) {
        match (self, other) {
            (
                Part::Fixed { count, debt, .. },
                Part::Fixed {
                    count: c, debt: d, ..
                },
            ) => {
                *count = count.saturating_add(*c);
                *debt = debt.saturating_add(*d);
            }
            (
                Part::Sliding {
                    previous, current, ..
                },
                Part::Sliding {
                    previous: p,
                    current: c,
                    ..
                },
            ) => {
                *previous = previous.saturating_add(*p);
                *current = current.saturating_add(*c);
            }
            _ => debug_assert!(false, "parts of two algorithms"),
        }
    }

    /// The algorithm's state this part stands for (a sum of parts: the fleet's counter).
    pub fn state(&self) -> State {
        match *self {
            Part::Fixed { window, count, .. } => {
                State::FixedWindow(fixed_window::State { window, count })
            }
            Part::Sliding {
                window,
                previous,
                current,
            } => State::SlidingWindowCounter(sliding_counter::State {
                window,
                previous,
                current,
            }),
        }
    }
}

/// The fleet's counter at one instant: this node's part and the others', seen in the same
/// window, and their sum as the algorithm's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    /// This node's part, as of the window decided in.
    pub own: Part,
    /// Every node's parts added up, as the algorithm's state.
    pub state: State,
}

impl Fleet {
    /// The counter at `now_ns` from this node's part (`None`: it has counted nothing
    /// live) and the others' (`peers`, under the same limit): `None` when no node has
    /// anything live, which decides as fresh; also `None` for an algorithm the gossip
    /// store does not hold.
    pub fn of<'p>(
        own: Option<&Part>,
        peers: impl IntoIterator<Item = &'p Part>,
        limit: &Limit,
        now_ns: u64,
    ) -> Option<Fleet> {
        let now_window = now_ns / limit.period_ns();
        // As the memory store: a part from a later window (the clock went back) keeps
        // counting in that window.
        let window = own.map_or(now_window, |p| p.window().max(now_window));
        let mut any = own.is_some_and(|p| p.idle_at(limit) > now_ns);
        let own = match own {
            Some(p) => p.at(window, limit),
            None => Part::empty(limit, window)?,
        };
        let mut sum = own;
        for p in peers {
            if p.idle_at(limit) <= now_ns {
                continue;
            }
            any = true;
            sum.add(&p.at(window, limit));
        }
        any.then(|| Fleet {
            own,
            state: sum.state(),
        })
    }

    /// This node's part after the fleet's counter went from `before` (what [`Fleet::of`]
    /// said, or a fresh state) to `after` by this node's decisions: the others' parts did
    /// not change meanwhile (they are the same numbers on both sides), so what changed is
    /// this node's. Hits counted past the limit are this node's debt (at most one limit).
    pub fn own_after(own: Option<&Part>, before: &State, after: &State, limit: &Limit) -> Part {
        match (before, after) {
            (State::FixedWindow(b), State::FixedWindow(a)) => {
                let (count, debt) = match own {
                    Some(Part::Fixed { count, debt, .. }) => (*count, *debt),
                    _ => (0, 0),
                };
                let beyond = a.count.saturating_sub(b.count.max(limit.rpu()));
                Part::Fixed {
                    window: a.window,
                    count: count.saturating_add(a.count.saturating_sub(b.count)),
                    debt: debt.saturating_add(beyond).min(limit.rpu()),
                }
            }
            (State::SlidingWindowCounter(b), State::SlidingWindowCounter(a)) => {
                let (previous, current) = match own {
                    Some(Part::Sliding {
                        previous, current, ..
                    }) => (*previous, *current),
                    _ => (0, 0),
                };
                Part::Sliding {
                    window: a.window,
                    previous: previous.saturating_add(a.previous.saturating_sub(b.previous)),
                    current: current.saturating_add(a.current.saturating_sub(b.current)),
                }
            }
            // Only the two window algorithms reach a gossip store.
            _ => Part::empty(limit, 0).unwrap_or(Part::Fixed {
                window: 0,
                count: 0,
                debt: 0,
            }),
        }
    }
}
