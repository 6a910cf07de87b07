//! What a request holds until its stream ends: slots of concurrency rules in this Envoy
//! and the release of the hold its call took on the rate limit service (fleet-wide
//! concurrency rules). Both are given back from `proxy_on_delete`, which Envoy calls for
//! every way a stream ends.
//!
//! A request no concurrency rule applies to holds nothing, and its context carries only
//! an empty `Option<Box<Holding>>`: the list is allocated for the requests that hold.

use super::background;
use super::hostcalls;
use super::root::Plugin;
use super::shared::HostShared;
use super::stream_end;
use crate::limiter::{SlotSink, Slots, StreamEndCall};
use crate::wire::call::Call;
use crate::wire::grpc::Answer;
use std::rc::Rc;

/// A request's holds.
#[derive(Default)]
pub struct Holding {
    /// Slots of concurrency rules in this Envoy.
    pub slots: Slots,
    /// The release of the hold its call took on the rate limit service, dropped if the
    /// service answered that it took none.
    pub release: Option<Box<Call>>,
    /// The token of the call that takes the hold.
    pub call: u32,
}

/// The context's holding is where the check pushes the request's slots, made only when
/// it takes one.
impl SlotSink for Option<Box<Holding>> {
    fn slots(&mut self) -> &mut Slots {
        &mut self.get_or_insert_with(Box::default).slots
    }
}

impl Holding {
    /// The request's call answered: a service that took no hold needs no release.
    pub fn answered(&mut self, plugin: &Plugin, answer: &Answer) {
        if self.release.is_some() && plugin.limiter.took_no_hold(answer) {
            self.release = None;
        }
    }

    /// Gives back the slots and sends the hold's release, once (`self` is consumed).
    /// While the request's call is still in flight (`waiting`: the request went away
    /// before its answer), the release goes out when that call answers instead: sent
    /// first, it would free nothing and the hold would stay to its deadline. Counted when
    /// this thread's tally is free (it always is here: nothing else runs during
    /// `proxy_on_delete`).
    pub fn give_back(mut self, plugin: &Rc<Plugin>, waiting: bool) {
        if waiting {
            if let Some(call) = self.release.take() {
                background::adopt(self.call, stream_end::release_after(plugin, call));
            }
        }
        if !self.slots.is_empty() {
            let now = hostcalls::current_time_ns().ok();
            let mut uncounted = crate::metrics::Tally::new(0);
            let mut busy = plugin.tally.try_borrow_mut();
            let tally = busy.as_deref_mut().unwrap_or(&mut uncounted);
            plugin.limiter.release(&self.slots, now, &HostShared, tally);
        }
        if let Some(call) = &self.release {
            stream_end::send(plugin, call, StreamEndCall::Release);
        }
    }
}
