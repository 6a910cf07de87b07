//! The calls sent when a stream ends: a response's charge and a fleet-wide concurrency
//! hold's release, each a [`background`] call that no request waits for.
//!
//! [`send`] dispatches the call the limiter built (the charge [`Limiter::settle`] made,
//! or the release built with the request's hold call); when the answer comes it is
//! counted. Nothing waits: the stream is over. A call that fails is counted, not sent
//! again: a charge's retry would need keeping, unbounded, while the service is away, and
//! a hold comes back at its deadline on the service.
//!
//! [`Limiter::settle`]: crate::limiter::Limiter::settle

use super::background;
use super::log;
use super::root::Plugin;
use crate::host::log_throttle::Cause;
use crate::limiter::StreamEndCall;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use ::log::Level;
use std::rc::Rc;

/// Sends `call` (`kind`) to the rate limit service without waiting: counted as sent, or
/// as failed if it cannot be sent.
pub fn send(plugin: &Rc<Plugin>, call: &Call, kind: StreamEndCall) {
    let Some(rls) = plugin.limiter.rls() else {
        return;
    };
    let answered = Rc::clone(plugin);
    let sent = background::call(
        rls,
        call,
        kind.sending(),
        Box::new(move |answer| on_answer(&answered, kind, &answer)),
    );
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin
            .limiter
            .stream_end_dispatched(kind, sent.is_ok(), &mut tally);
    }
}

/// The handler for the answer of a call that takes a hold, once its request went away
/// while waiting: sends `call` (the hold's release) unless the service answered that it
/// took none.
pub fn release_after(plugin: &Rc<Plugin>, call: Box<Call>) -> background::Handler {
    let plugin = Rc::clone(plugin);
    Box::new(move |answer| {
        if !plugin.limiter.took_no_hold(&answer) {
            send(&plugin, &call, StreamEndCall::Release);
        }
    })
}

/// Counts a stream-end call's answer.
fn on_answer(plugin: &Plugin, kind: StreamEndCall, answer: &Answer) {
    if let Answer::Status { code, message } = answer {
        log::throttled(Level::Warn, Cause::RlsFailed, || {
            format!(
                "{} to the rate limit service failed: gRPC status {code}: {message}",
                kind.noun()
            )
        });
    }
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.stream_end_answered(kind, answer, &mut tally);
    }
}
