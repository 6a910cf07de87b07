//! Whether the store can decide, shared by the store, `/healthz` and `/metrics`.
//!
//! "Up" means the store can run a decision, not only that a socket connects: a Redis that
//! answers `PING` but refuses our commands (no password or a wrong one, an ACL without
//! `EVALSHA`, scripting disabled, out of memory, a read-only replica) decides nothing, and
//! a readiness probe must say so, or Kubernetes keeps routing to a replica whose every call
//! answers UNAVAILABLE. The Redis store's probe therefore runs the decision script itself
//! (see [`super::redis`]), and every failure of a call or a probe is counted by [`Cause`]
//! in `floodgate_store_failures_total`. The memory store is always up.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// The `cause` label of `floodgate_store_failures_total`.
type CauseLabel = [(&'static str, &'static str); 1];

/// Why the store could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// No connection: refused, dropped, reset, or a cluster that cannot route.
    Unreachable,
    /// No answer in time (`--redis-timeout-ms`), or one Redis ran past its deadline.
    Timeout,
    /// Redis refused our credentials or permissions: `NOAUTH`, `WRONGPASS`, `NOPERM`.
    Auth,
    /// Redis refuses commands for now: `OOM`, `READONLY`, `MISCONF`, `LOADING`, `BUSY`.
    Refused,
    /// The decision script failed or answered what the server does not understand.
    Script,
}

const CAUSES: [(Cause, &str); 5] = [
    (Cause::Unreachable, "unreachable"),
    (Cause::Timeout, "timeout"),
    (Cause::Auth, "auth"),
    (Cause::Refused, "refused"),
    (Cause::Script, "script"),
];

impl Cause {
    /// The `cause` label and the word `/healthz` uses.
    pub fn label(self) -> &'static str {
        CAUSES[self as usize].1
    }
}

/// The store's ability to decide, and its failures by cause.
#[derive(Debug)]
pub struct Health {
    up: AtomicBool,
    down: Mutex<(Cause, String)>,
    failures_family: Family<CauseLabel, Counter>,
    failures: [Counter; 5],
}

impl Default for Health {
    fn default() -> Self {
        let failures_family = Family::<CauseLabel, Counter>::default();
        let failures =
            CAUSES.map(|(_, label)| failures_family.get_or_create_owned(&[("cause", label)]));
        Health {
            up: AtomicBool::new(true),
            down: Mutex::new((Cause::Unreachable, String::new())),
            failures_family,
            failures,
        }
    }
}

impl Health {
    /// Whether the store decided its last call or probe.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Marks the store up; true when it was down.
    pub fn set_up(&self) -> bool {
        !self.up.swap(true, Ordering::Relaxed)
    }

    /// Marks the store down because of `cause`, described by `reason`; true when it was up.
    pub fn set_down(&self, cause: Cause, reason: &str) -> bool {
        let mut down = self.down.lock().unwrap_or_else(PoisonError::into_inner);
        down.0 = cause;
        if down.1 != reason {
            reason.clone_into(&mut down.1);
        }
        self.up.swap(false, Ordering::Relaxed)
    }

    /// Why the store was last marked down.
    pub fn reason(&self) -> String {
        self.down
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }

    /// The cause the store was last marked down for.
    pub fn cause(&self) -> Cause {
        self.down.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// What `/healthz` says while the store is down:
    /// `store cannot decide (<cause>): <reason>`.
    pub fn describe(&self) -> String {
        let down = self.down.lock().unwrap_or_else(PoisonError::into_inner);
        format!("store cannot decide ({}): {}", down.0.label(), down.1)
    }

    /// Counts one failed call or probe.
    pub fn failed(&self, cause: Cause) {
        self.failures[cause as usize].inc();
    }

    /// Failed calls and probes of `cause` so far.
    pub fn failures(&self, cause: Cause) -> u64 {
        self.failures[cause as usize].get()
    }

    /// Adds `floodgate_store_failures_total` to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "floodgate_store_failures",
            "Store calls and health probes that failed, by cause (unreachable, timeout, auth, refused, script)",
            self.failures_family.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_says_why_and_failures_count_by_cause() {
        let h = Health::default();
        assert!(h.is_up());
        assert!(h.set_down(Cause::Auth, "NOAUTH Authentication required."));
        assert!(!h.set_down(Cause::Auth, "NOAUTH Authentication required."));
        assert_eq!(
            h.describe(),
            "store cannot decide (auth): NOAUTH Authentication required."
        );
        h.failed(Cause::Auth);
        h.failed(Cause::Auth);
        h.failed(Cause::Script);
        assert_eq!((h.failures(Cause::Auth), h.failures(Cause::Script)), (2, 1));
        assert!(h.set_up());
        assert!(CAUSES
            .iter()
            .enumerate()
            .all(|(i, (c, _))| *c as usize == i));
    }
}
