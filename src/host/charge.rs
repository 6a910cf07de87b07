//! The stream-end charge on the wire: a [`background`] call that no request waits for.
//!
//! [`send`] dispatches the charge call [`Limiter::settle`] made (with the charge header);
//! when the answer comes, the limiter counts it. Nothing waits: the response has gone on
//! already, and a charge that fails is counted, not sent again.
//!
//! [`Limiter::settle`]: crate::limiter::Limiter::settle

use super::background;
use super::log;
use super::root::Plugin;
use crate::host::log_throttle::Cause;
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use ::log::Level;
use std::rc::Rc;

/// Sends `call` (what [`Limiter::settle`] made of a finished response's global costs)
/// to the rate limit service without waiting: counted as sent, or as failed if it
/// cannot be sent.
///
/// [`Limiter::settle`]: crate::limiter::Limiter::settle
pub fn send(plugin: &Rc<Plugin>, call: &Call) {
    let Some(rls) = plugin.limiter.rls() else {
        return;
    };
    let answered = Rc::clone(plugin);
    let sent = background::call(
        rls,
        call,
        "send a charge to",
        Box::new(move |answer| on_answer(&answered, &answer)),
    );
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.charge_dispatched(sent.is_ok(), &mut tally);
    }
}

/// Counts a charge's answer.
fn on_answer(plugin: &Plugin, answer: &Answer) {
    if let Answer::Status { code, message } = answer {
        log::throttled(Level::Warn, Cause::RlsFailed, || {
            format!("a charge to the rate limit service failed: gRPC status {code}: {message}")
        });
    }
    if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
        plugin.limiter.charge_answered(answer, &mut tally);
    }
}
