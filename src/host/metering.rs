//! The response side of a request whose cost the response reports: feeding the pure
//! [`ResponseMeter`] from the host, and settling it when the response is done.
//!
//! Nothing here holds the response back: each callback reads what it is handed (a
//! header, the current body chunk), lets the meter look at it, and the dispatcher
//! returns `Continue`. Only requests that carry a meter get here; the callbacks for the
//! body and trailers are exported only by the build with the `response-cost` feature
//! (see the dispatcher).

use super::failure::HostFailure;
use super::hostcalls;
use super::log;
use super::root::Plugin;
use super::shared::HostShared;
use super::stream_end;
use crate::host::log_throttle::Cause;
use crate::limiter::StreamEndCall;
use crate::request::descriptor::Lookup;
use crate::usage::{Ended, ResponseMeter, ResponseView};
use ::log::Level;
use std::rc::Rc;

/// Where a header source is read from: the response's headers or its trailers.
#[derive(Clone, Copy)]
enum Part {
    Headers,
    Trailers,
}

/// [`ResponseView`] on the current response: one host call per header asked for (the
/// first value; the upstream, not the client, sends these).
struct HostResponse(Part);

impl ResponseView for HostResponse {
    fn header(&mut self, name: &str) -> Lookup {
        let value = match self.0 {
            Part::Headers => hostcalls::response_header(name),
            Part::Trailers => hostcalls::response_trailer(name),
        };
        match value.ok().flatten() {
            Some(v) => Lookup::One(v),
            None => Lookup::Absent,
        }
    }
}

/// Asks the upstream for an uncompressed answer: a rule reads its body, and a body the
/// client had compressed (`accept-encoding: gzip`) could not be read, which would let
/// every client pay only the fallback. Every value the client sent is replaced. Envoy's
/// compressor filter, placed before floodgate, has read the client's `accept-encoding`
/// by now and still compresses the answer on its way out; placed after, it sees
/// `identity` and leaves the answer plain.
pub fn ask_for_identity() {
    if let Err(status) = hostcalls::replace_request_header("accept-encoding", "identity") {
        // Not counted here: an answer that comes compressed is charged the fallback,
        // which is counted (`floodgate_usage_fallback_encoded`).
        log::throttled(Level::Warn, Cause::AddHeader, || {
            format!("cannot set request header accept-encoding (status {status})")
        });
    }
}

/// The response headers came: the meter learns how the body is framed and reads any
/// header source.
pub fn on_headers(plugin: &Plugin, meter: &mut ResponseMeter) {
    meter.on_headers(plugin.limiter.config(), &mut HostResponse(Part::Headers));
}

/// The most bytes of a body chunk copied into the VM at once. A chunk is normally what
/// Envoy read from the upstream in one go (a few KiB), but a filter that buffers before
/// this one hands over the whole body in one chunk: read in pieces, the chunk never
/// costs the VM more than this, whatever its size, and a piece's memory is reused for
/// the next (wasm memory never shrinks, so a peak would be kept for good).
pub const BODY_PIECE_BYTES: usize = 16 * 1024;

/// A body chunk of `size` bytes passes: the meter scans it if it reads bodies, one piece
/// at a time.
pub fn on_body(plugin: &Plugin, meter: &mut ResponseMeter, size: usize) {
    if size == 0 || !meter.reads_body() {
        return;
    }
    let mut at = 0;
    while at < size {
        let want = BODY_PIECE_BYTES.min(size - at);
        match hostcalls::response_body(at, want) {
            Ok(piece) if !piece.is_empty() => {
                meter.on_body(plugin.limiter.config(), &piece);
                at += piece.len();
            }
            Ok(_) => return,
            Err(status) => {
                // Not counted here: the meter misses the rest of the chunk, and a
                // response whose usage was in it is charged the fallback, which is
                // counted.
                log::throttled(Level::Warn, Cause::ResponseBody, || {
                    format!("cannot read a response body chunk (status {status})")
                });
                return;
            }
        }
    }
}

/// The trailers came.
pub fn on_trailers(plugin: &Plugin, meter: &mut ResponseMeter) {
    meter.on_trailers(plugin.limiter.config(), &mut HostResponse(Part::Trailers));
}

/// The response is over (`Complete`), or the request went away first (`CutOff`):
/// charge what it cost.
/// Global rules' costs go to the rate limit service as one stream-end charge, sent
/// without waiting ([`charge`]).
pub fn settle(plugin: &Rc<Plugin>, meter: ResponseMeter, ended: Ended) {
    let charges = meter.finish(plugin.limiter.config(), ended);
    let Ok(mut tally) = plugin.tally.try_borrow_mut() else {
        plugin.count_host_failure(HostFailure::TallyBusy);
        return;
    };
    let global = plugin.limiter.settle(
        &charges,
        || hostcalls::current_time_ns().ok(),
        &HostShared,
        &mut tally,
    );
    drop(tally);
    if let Some(call) = global {
        stream_end::send(plugin, &call, StreamEndCall::Charge);
    }
}
