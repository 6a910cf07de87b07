//! The two request headers of concurrency limits: [`HOLD_HEADER`] takes slots under a
//! caller's id with the admission, [`RELEASE_HEADER`] gives them back at stream end (see
//! [`crate::algorithm::concurrency`] and `docs/server/protocol.md`).
//!
//! Both are floodgate's own, like the charge and quota headers; Envoy's native filter sends
//! neither, so a concurrency limit it reaches holds under an id of the server's own that
//! only its deadline ends ([`server_id`]): without a release it limits N per unit.

use crate::algorithm::concurrency::{HoldId, HoldOp, MAX_HOLD_ID};
use crate::algorithm::{Algorithm, Decision};
use crate::metrics::{DomainCounters, HoldEvent};
use crate::store::Check;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use tonic::metadata::MetadataMap;
use tonic::Status;

/// The request headers of holds, named once in the shared crate that the filter sends
/// them from: [`HOLD_HEADER`] takes slots under the caller's id with the admission,
/// [`RELEASE_HEADER`] frees that id's slots (idempotent).
pub use floodgate_common::headers::{HOLD_HEADER, RELEASE_HEADER};

/// What a call asks of concurrency limits, from its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldCall {
    /// No hold header: a concurrency limit holds under an id of the server's own.
    Anonymous,
    /// [`HOLD_HEADER`]: take holds under this id.
    Hold(HoldId),
    /// [`RELEASE_HEADER`]: release this id's holds, nothing else.
    Release(HoldId),
}

impl HoldCall {
    /// The call its metadata says; `Err` (INVALID_ARGUMENT, naming the header) for a
    /// malformed id, a header sent twice, or both headers on one call.
    pub fn of(metadata: &MetadataMap) -> Result<HoldCall, Status> {
        let hold = one(metadata, HOLD_HEADER)?;
        let release = one(metadata, RELEASE_HEADER)?;
        match (hold, release) {
            (None, None) => Ok(HoldCall::Anonymous),
            (Some(id), None) => Ok(HoldCall::Hold(id)),
            (None, Some(id)) => Ok(HoldCall::Release(id)),
            (Some(_), Some(_)) => Err(Status::invalid_argument(format!(
                "{HOLD_HEADER} and {RELEASE_HEADER} cannot be sent on one call"
            ))),
        }
    }

    /// Whether this is a release.
    pub fn is_release(&self) -> bool {
        matches!(self, HoldCall::Release(_))
    }

    /// What a concurrency descriptor of an admission does: acquire under the caller's id
    /// (or a fresh one of the server's), or release.
    pub fn op(&self) -> HoldOp {
        match *self {
            HoldCall::Anonymous => HoldOp::Acquire(server_id()),
            HoldCall::Hold(id) => HoldOp::Acquire(id),
            HoldCall::Release(id) => HoldOp::Release(id),
        }
    }
}

/// Counts the concurrency descriptors of a call in `floodgate_holds_total`: `checks` as
/// the store decided them (`decisions`), the call `over` or not.
pub(super) fn count(
    checks: &[Check],
    decisions: &[Decision],
    over: bool,
    counters: &DomainCounters,
) {
    for (c, d) in checks.iter().zip(decisions) {
        if c.limit.algorithm != Algorithm::Concurrency || c.blocked {
            continue;
        }
        let event = match c.hold {
            // A charge: holds are neither taken nor counted.
            None => continue,
            Some(HoldOp::Release(_)) => HoldEvent::Released,
            _ if !d.allowed => HoldEvent::Rejected,
            // Admitted in a call that is: a hold taken (check-only and no-hold items take
            // none, and are not counted).
            Some(HoldOp::Acquire(_)) if !over && c.hits > 0 => HoldEvent::Acquired,
            _ => continue,
        };
        counters.hold(event);
    }
}

/// The id `name` carries, if sent: once, well formed.
fn one(metadata: &MetadataMap, name: &str) -> Result<Option<HoldId>, Status> {
    let mut values = metadata.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Status::invalid_argument(format!(
            "{name} must be sent once"
        )));
    }
    HoldId::parse(first.as_bytes()).map(Some).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{name} must be 1 to {MAX_HOLD_ID} bytes of [A-Za-z0-9._-]"
        ))
    })
}

/// A fresh id of the server's own, for a hold taken without [`HOLD_HEADER`]: `fg-srv.`
/// and 32 hex digits, from a sequence hashed under a key random per process, so replicas
/// sharing Redis never mint the same id and a client cannot predict one.
pub fn server_id() -> HoldId {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    static KEY: OnceLock<RandomState> = OnceLock::new();
    let key = KEY.get_or_init(RandomState::new);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    HoldId::server(key.hash_one((n, 0u8)), key.hash_one((n, 1u8)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn meta(pairs: &[(&'static str, &'static str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.append(*k, MetadataValue::from_static(v));
        }
        m
    }

    #[test]
    fn each_header_reads_its_id() {
        assert_eq!(HoldCall::of(&meta(&[])).unwrap(), HoldCall::Anonymous);
        let id = HoldId::parse(b"req-1.a_B").unwrap();
        let hold = HoldCall::of(&meta(&[(HOLD_HEADER, "req-1.a_B")])).unwrap();
        assert_eq!(hold, HoldCall::Hold(id));
        assert_eq!(hold.op(), HoldOp::Acquire(id));
        let release = HoldCall::of(&meta(&[(RELEASE_HEADER, "req-1.a_B")])).unwrap();
        assert_eq!(release.op(), HoldOp::Release(id));
        assert!(release.is_release());
    }

    #[test]
    fn malformed_repeated_or_both_are_invalid_argument_naming_the_header() {
        let long: &'static str = Box::leak("a".repeat(65).into_boxed_str());
        for (pairs, message) in [
            (
                vec![(HOLD_HEADER, "")],
                "x-floodgate-hold must be 1 to 64 bytes of [A-Za-z0-9._-]",
            ),
            (
                vec![(HOLD_HEADER, long)],
                "x-floodgate-hold must be 1 to 64 bytes of [A-Za-z0-9._-]",
            ),
            (
                vec![(RELEASE_HEADER, "a:b")],
                "x-floodgate-release must be 1 to 64 bytes of [A-Za-z0-9._-]",
            ),
            (
                vec![(RELEASE_HEADER, "a b")],
                "x-floodgate-release must be 1 to 64 bytes of [A-Za-z0-9._-]",
            ),
            (
                vec![(HOLD_HEADER, "a"), (HOLD_HEADER, "a")],
                "x-floodgate-hold must be sent once",
            ),
            (
                vec![(RELEASE_HEADER, "a"), (RELEASE_HEADER, "b")],
                "x-floodgate-release must be sent once",
            ),
            (
                vec![(HOLD_HEADER, "a"), (RELEASE_HEADER, "a")],
                "x-floodgate-hold and x-floodgate-release cannot be sent on one call",
            ),
        ] {
            let e = HoldCall::of(&meta(&pairs)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert_eq!(e.message(), message);
        }
        assert!(
            HoldCall::of(&meta(&[(HOLD_HEADER, long.get(1..).unwrap())])).is_ok(),
            "64 bytes"
        );
    }

    #[test]
    fn server_ids_are_well_formed_and_distinct() {
        let a = server_id();
        let b = server_id();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("fg-srv."));
        assert_eq!(a.as_str().len(), 39);
        assert_eq!(HoldId::parse(a.as_str().as_bytes()), Some(a));
    }
}
