//! Background calls: an HTTP call that no request waits for, whose answer goes to a
//! handler given when the call is made; and [`start`], which every call to the rate limit
//! service goes through.
//!
//! A request's own rate limit call pauses it, and its answer is routed to the request's
//! context by the dispatcher. Some calls have nobody waiting: a lease refill made while
//! the request that noticed goes on, a charge sent when a stream ends. For those, the
//! caller hands [`call`] a handler; when the answer comes, the dispatcher reads it as it
//! reads a request's (status, trailers, one gRPC message) and gives it to the handler.
//!
//! The handlers live in their own thread-local map, not in the dispatcher's context map:
//! a background call is usually made from inside a request callback, while the context
//! map is borrowed, and a handler must be able to make another background call itself.
//! The host cannot cancel an HTTP call (ABI 0.2.1) but always ends it at its timeout, so
//! the map holds at most the calls made within one timeout of each other.

use super::hostcalls;
use super::log;
use super::types::Status;
use crate::config::RlsConfig;
use crate::host::log_throttle::Cause;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use ::log::Level;
use std::cell::RefCell;

/// What to do with a background call's answer.
pub type Handler = Box<dyn FnOnce(Answer)>;

thread_local! {
    /// Background calls in flight on this thread: (token, handler), in no order. A list
    /// searched from its end, not a map: it holds the calls of one timeout (a few, or
    /// a few hundred while the service is slow), and a `BTreeMap` brought 5 KB of
    /// B-tree code into the module for it, a `HashMap` more instructions per call.
    static HANDLERS: RefCell<Vec<(u32, Handler)>> = const { RefCell::new(Vec::new()) };
}

/// Starts `call` to the service `rls` configures; its answer goes to the dispatcher,
/// which routes it by the token returned. A call that cannot be started is logged (one
/// line per period) as `what` (what the call was for) and handed back as the status.
pub fn start(rls: &RlsConfig, call: &Call, what: &str) -> Result<u32, Status> {
    hostcalls::http_call(&rls.cluster, call.headers(), &call.body, rls.timeout_ms).inspect_err(
        |status| {
            log::throttled(Level::Warn, Cause::RlsNotSent, || {
                format!(
                    "cannot {what} the rate limit service on cluster {} (status {status})",
                    rls.cluster
                )
            });
        },
    )
}

/// Starts `call` as [`start`] does, its answer going to `handler`. `Err`: the call was
/// not started, and `handler` is dropped without being called.
pub fn call(rls: &RlsConfig, call: &Call, what: &str, handler: Handler) -> Result<(), Status> {
    let token = start(rls, call, what)?;
    HANDLERS.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.push((token, handler));
        }
    });
    Ok(())
}

/// Hands the answer of the call with `token`, started for a request whose context is
/// gone, to `handler` instead (a hold's release that must wait for the call that takes
/// the hold: sent before it, it would free nothing and the hold would stay to its
/// deadline).
pub fn adopt(token: u32, handler: Handler) {
    HANDLERS.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.push((token, handler));
        }
    });
}

/// The handler waiting for the call with `token`, taken out of the map; `None` when the
/// call is not a background call.
pub fn take(token: u32) -> Option<Handler> {
    HANDLERS.with(|h| {
        let mut h = h.try_borrow_mut().ok()?;
        let at = h.iter().rposition(|(t, _)| *t == token)?;
        Some(h.swap_remove(at).1)
    })
}
