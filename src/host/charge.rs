//! The stream-end charge on the wire: a [`background`] call that no request waits for.
//!
//! [`send`] dispatches the charge [`Limiter::settle`] encoded, with the charge header;
//! when the answer comes, the limiter counts it. Nothing waits: the response has gone on
//! already, and a charge that fails is counted, not sent again.
//!
//! [`Limiter::settle`]: crate::limiter::Limiter::settle

use super::background;
use super::log;
use super::root::Plugin;
use crate::host::log_throttle::Cause;
use crate::wire::grpc::{self, Answer};
use ::log::Level;
use std::rc::Rc;

/// Sends `message` (what [`Limiter::settle`] made of a finished response's global
/// costs) to the rate limit service without waiting: counted as sent, or as failed if it
/// cannot be sent.
///
/// [`Limiter::settle`]: crate::limiter::Limiter::settle
pub fn send(plugin: &Rc<Plugin>, message: &[u8]) {
    let Some(rls) = plugin.limiter.rls() else {
        return;
    };
    let answered = Rc::clone(plugin);
    let sent = background::call(
        &rls.cluster,
        &plugin.charge_headers,
        &grpc::frame(message),
        rls.timeout_ms,
        Box::new(move |answer| on_answer(&answered, &answer)),
    );
    if let Err(status) = &sent {
        log::throttled(Level::Warn, Cause::RlsNotSent, || {
            format!(
                "cannot send a charge to the rate limit service on cluster {} (status {status})",
                rls.cluster
            )
        });
    }
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
