//! A concurrency rule's metrics (see `docs/concurrency.md`).

use super::Kind;

/// A concurrency rule's metrics, in index order, after every rule's [`PerRule`] ones:
/// `in_flight` and the slots `released` and `reclaimed` count slots (a request's cost),
/// `admitted` and `rejected` count requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum PerConcurrency {
    /// Gauge: slots held by requests in flight, this rule's keys together.
    InFlight,
    /// Requests that took their slots.
    Admitted,
    /// Requests rejected (or, for a shadow rule, that would have been) for lack of slots.
    Rejected,
    /// Slots given back at their deadline, their holder gone or past
    /// `max_duration_seconds`.
    Reclaimed,
    /// Slots given back at the end of their stream.
    Released,
}

pub(super) const PER_CONCURRENCY: [(PerConcurrency, Kind, &str); 5] = [
    (
        PerConcurrency::InFlight,
        Kind::Gauge,
        "concurrency_in_flight",
    ),
    (
        PerConcurrency::Admitted,
        Kind::Counter,
        "concurrency_admitted",
    ),
    (
        PerConcurrency::Rejected,
        Kind::Counter,
        "concurrency_rejected",
    ),
    (
        PerConcurrency::Reclaimed,
        Kind::Counter,
        "concurrency_reclaimed",
    ),
    (
        PerConcurrency::Released,
        Kind::Counter,
        "concurrency_released",
    ),
];
