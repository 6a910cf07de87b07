//! A lease refill on the wire: a [`background`] call that no request waits for.
//!
//! The limiter asks for one when a request paid from grants found them below their
//! low-water mark ([`Refill`]); the request goes on at once, and the answer stores the
//! new grants.

use super::background;
use super::hostcalls;
use super::root::Plugin;
use super::shared::HostShared;
use crate::limiter::Refill;
use crate::wire::grpc::Answer;
use std::rc::Rc;

/// Makes a lease refill call that no request waits for; its answer (or its failure to
/// start) goes to [`crate::limiter::Limiter::refilled`].
pub fn send(plugin: &Rc<Plugin>, refill: Refill) {
    let Some(rls) = plugin.limiter.rls() else {
        return;
    };
    let refilled = |plugin: &Plugin, keys: &[u128], answer: Answer| {
        if let Ok(mut tally) = plugin.tally.try_borrow_mut() {
            let now = || hostcalls::current_time_ns().ok();
            plugin
                .limiter
                .refilled(keys, answer, now, &HostShared, &mut tally);
        }
    };
    let keys = refill.keys.clone();
    let handler = {
        let plugin = Rc::clone(plugin);
        Box::new(move |answer: Answer| refilled(&plugin, &refill.keys, answer))
    };
    let sent = background::call(rls, &refill.call, "call", handler);
    if let Err(status) = sent {
        refilled(plugin, &keys, Answer::NotSent(status.0));
    }
}
