//! The stream-end release of a fleet-wide concurrency hold: a [`background`] call that no
//! request waits for.
//!
//! [`send`] dispatches the release the limiter built with the request's call (the
//! `x-floodgate-release` header and the concurrency descriptors); when the answer comes it
//! is counted. Nothing waits: the stream is over. A release that fails is counted, not
//! sent again: the hold comes back at its deadline on the service.

use super::background;
use super::log;
use super::root::Plugin;
use crate::host::log_throttle::Cause;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use ::log::Level;
use std::rc::Rc;

/// Sends `call` (a hold's release) to the rate limit service without waiting: counted as
/// sent, or as failed if it cannot be sent.
pub fn send(plugin: &Rc<Plugin>, call: &Call) {
    let Some(rls) = plugin.limiter.rls() else {
        return;
    };
    let answered = Rc::clone(plugin);
    let sent = background::call(
        rls,
        call,
        "send a release to",
        Box::new(move |answer| on_answer(&answered, &answer)),
    );
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.release_dispatched(sent.is_ok(), &mut tally);
    }
}

/// The handler for the answer of a call that takes a hold, once its request went away
/// while waiting: sends `call` (the hold's release) unless the service answered that it
/// took none.
pub fn after_call(plugin: &Rc<Plugin>, call: Box<Call>) -> background::Handler {
    let plugin = Rc::clone(plugin);
    Box::new(move |answer| {
        if !plugin.limiter.took_no_hold(&answer) {
            send(&plugin, &call);
        }
    })
}

/// Counts a release's answer.
fn on_answer(plugin: &Plugin, answer: &Answer) {
    if let Answer::Status { code, message } = answer {
        log::throttled(Level::Warn, Cause::RlsFailed, || {
            format!("a release to the rate limit service failed: gRPC status {code}: {message}")
        });
    }
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.release_answered(answer, &mut tally);
    }
}
