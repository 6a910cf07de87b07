//! Background calls: an HTTP call that no request waits for, whose answer goes to a
//! handler given when the call is made.
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
use super::types::Status;
use crate::wire::grpc::Answer;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// What to do with a background call's answer.
pub type Handler = Box<dyn FnOnce(Answer)>;

thread_local! {
    /// Background calls in flight on this thread: token → handler.
    static HANDLERS: RefCell<BTreeMap<u32, Handler>> = const { RefCell::new(BTreeMap::new()) };
}

/// Makes an HTTP call to `cluster` (headers encoded as [`super::memory::encode_pairs`]
/// does) whose answer goes to `handler`. `Err`: the call was not started, and `handler`
/// is dropped without being called.
pub fn call(
    cluster: &str,
    headers: &[u8],
    body: &[u8],
    timeout_ms: u32,
    handler: Handler,
) -> Result<(), Status> {
    let token = hostcalls::http_call(cluster, headers, body, timeout_ms)?;
    HANDLERS.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.insert(token, handler);
        }
    });
    Ok(())
}

/// The handler waiting for the call with `token`, taken out of the map; `None` when the
/// call is not a background call.
pub fn take(token: u32) -> Option<Handler> {
    HANDLERS.with(|h| h.try_borrow_mut().ok()?.remove(&token))
}
