//! Whether the store can be reached, shared by the store, `/healthz` and `/metrics`.
//!
//! The memory store is always up. The Redis store marks itself down when calls fail for
//! connectivity reasons and up again on the first success (see [`super::redis`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// The store's reachability.
#[derive(Debug)]
pub struct Health {
    up: AtomicBool,
    reason: Mutex<String>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            up: AtomicBool::new(true),
            reason: Mutex::new(String::new()),
        }
    }
}

impl Health {
    /// Whether the store answered its last call or probe.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Marks the store up; true when it was down.
    pub fn set_up(&self) -> bool {
        !self.up.swap(true, Ordering::Relaxed)
    }

    /// Marks the store down because of `reason`; true when it was up.
    pub fn set_down(&self, reason: &str) -> bool {
        let mut r = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if r.as_str() != reason {
            reason.clone_into(&mut r);
        }
        self.up.swap(false, Ordering::Relaxed)
    }

    /// Why the store was last marked down.
    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
