//! The stream-end charge on the wire: a fire-and-forget `http_call` that no request
//! waits for.
//!
//! [`send`] dispatches what [`Limiter::charge_call`] encoded, with the charge header,
//! and remembers its token here (not in the dispatcher's map of waiting requests: no
//! context waits for it, and the dispatcher's map is in use while a request's callback
//! runs). When the answer comes, [`answered`] finds the token and the limiter counts it.
//! At most the calls sent within `rls.timeout_ms` are remembered: each one ends by then.
//!
//! [`Limiter::charge_call`]: crate::limiter::Limiter::charge_call

use super::hostcalls;
use super::log;
use super::root::Plugin;
use crate::grpc::{self, Answer};
use crate::limiter::GlobalCharge;
use crate::log_throttle::Cause;
use ::log::Level;
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    /// Charge calls in flight: token → how many descriptors the charge holds.
    static IN_FLIGHT: RefCell<HashMap<u32, usize>> = RefCell::new(HashMap::new());
}

/// Charges `charges` to the rate limit service without waiting: counted as sent, or as
/// failed if it cannot be sent. Nothing to charge: no call.
pub fn send(plugin: &Plugin, charges: &[GlobalCharge<'_>]) {
    let (Some(rls), Some(message)) = (plugin.limiter.rls(), plugin.limiter.charge_call(charges))
    else {
        return;
    };
    let descriptors = charges.len();
    let sent = hostcalls::http_call(
        &rls.cluster,
        &plugin.charge_headers,
        &grpc::frame(&message),
        rls.timeout_ms,
    );
    if let Err(status) = &sent {
        log::throttled(Level::Warn, Cause::RlsNotSent, || {
            format!(
                "cannot send a charge to the rate limit service on cluster {} (status {status})",
                rls.cluster
            )
        });
    }
    if let Ok(token) = sent {
        IN_FLIGHT.with(|m| {
            if let Ok(mut m) = m.try_borrow_mut() {
                m.insert(token, descriptors);
            }
        });
    }
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.charge_dispatched(sent.is_ok(), &mut tally);
    }
}

/// Whether `token` is a charge's; if so its answer (read with `read`) is counted.
pub fn answered(plugin: Option<&Plugin>, token: u32, read: impl FnOnce() -> Answer) -> bool {
    let Some(descriptors) = IN_FLIGHT.with(|m| m.try_borrow_mut().ok()?.remove(&token)) else {
        return false;
    };
    let answer = read();
    if let Answer::Status { code, message } = &answer {
        log::throttled(Level::Warn, Cause::RlsFailed, || {
            format!("a charge to the rate limit service failed: gRPC status {code}: {message}")
        });
    }
    if let Some(plugin) = plugin {
        if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
            plugin
                .limiter
                .charge_answered(&answer, descriptors, &mut tally);
        }
    }
    true
}
