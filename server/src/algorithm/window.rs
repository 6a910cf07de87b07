//! A limit's window: how many units it spans, and how long that is.

use super::{Unit, NANOS_PER_SECOND};
use std::num::NonZeroU16;

/// The longest window a limit may have (`unit` × `unit_multiplier`): ten years of 365
/// days. Nothing useful is longer, and within it every store's arithmetic stays exact:
/// nanoseconds fit a `u64` many times over, and Redis TTLs stay under the script's cap.
pub const MAX_WINDOW_SECONDS: u64 = 10 * 365 * 86_400;

/// A limit's window: `multiplier` whole `unit`s (`unit_multiplier` in the configuration,
/// 1 by default). Fixed windows align to the Unix epoch in multiples of the whole window,
/// as the reference aligns its windows (a window starts at `now - now % length`): a
/// 90-minute window starts at 00:00, 01:30, 03:00 UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// The unit of time.
    pub unit: Unit,
    /// How many units make the window.
    pub multiplier: NonZeroU16,
}

impl Window {
    /// One `unit`.
    pub fn of(unit: Unit) -> Window {
        Window {
            unit,
            multiplier: NonZeroU16::MIN,
        }
    }

    /// The window's length in seconds.
    pub fn seconds(self) -> u64 {
        self.unit
            .seconds()
            .saturating_mul(u64::from(self.multiplier.get()))
    }

    /// The window's length in nanoseconds: the period every algorithm works with.
    pub fn period_ns(self) -> u64 {
        self.seconds().saturating_mul(NANOS_PER_SECOND)
    }
}
