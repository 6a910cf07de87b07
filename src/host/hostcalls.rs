//! The proxy-wasm ABI (0.2.1) host calls floodgate makes, with every status handled.
//!
//! The SDK's own `hostcalls` panic on statuses they do not expect (and its trait helpers
//! `unwrap()`), which with wasm's abort-on-panic kills the whole VM. These wrappers
//! return every non-OK [`Status`] as an error for the caller to map to a failure mode.
//! Buffers the host returns were allocated through our own `proxy_on_memory_allocate`
//! export ([`memory::allocate`](super::memory::allocate)), so ownership is taken back with
//! [`take_buffer`].
//!
//! Every function imported from the host is declared here, in one place; the wrappers
//! come in two halves: [`streams`] (the request's and responses' headers and bodies, the
//! plugin configuration, properties) and [`calls`] (log, clock, randomness, timer, shared
//! data, the stream's resumption, HTTP calls, local replies, metrics).

mod calls;
mod streams;

pub use calls::*;
pub use streams::*;

use super::memory::take_buffer;
use super::types::Status;

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_log(level: u32, message_data: *const u8, message_size: usize) -> u32;
    fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
    fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
    fn proxy_get_buffer_bytes(
        buffer_type: u32,
        start: usize,
        max_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_get_header_map_pairs(
        map_type: u32,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_add_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
    ) -> u32;
    #[cfg(feature = "response-cost")]
    fn proxy_replace_header_map_value(
        map_type: u32,
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_get_property(
        path_data: *const u8,
        path_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
    ) -> u32;
    fn proxy_get_shared_data(
        key_data: *const u8,
        key_size: usize,
        return_data: *mut *mut u8,
        return_size: *mut usize,
        return_cas: *mut u32,
    ) -> u32;
    fn proxy_set_shared_data(
        key_data: *const u8,
        key_size: usize,
        value_data: *const u8,
        value_size: usize,
        cas: u32,
    ) -> u32;
    fn proxy_send_local_response(
        status_code: u32,
        details_data: *const u8,
        details_size: usize,
        body_data: *const u8,
        body_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_continue_stream(stream_type: u32) -> u32;
    fn proxy_set_effective_context(context_id: u32) -> u32;
    fn proxy_http_call(
        upstream_data: *const u8,
        upstream_size: usize,
        headers_data: *const u8,
        headers_size: usize,
        body_data: *const u8,
        body_size: usize,
        trailers_data: *const u8,
        trailers_size: usize,
        timeout_ms: u32,
        return_token: *mut u32,
    ) -> u32;
    fn proxy_define_metric(
        metric_type: u32,
        name_data: *const u8,
        name_size: usize,
        return_id: *mut u32,
    ) -> u32;
    fn proxy_increment_metric(metric_id: u32, offset: i64) -> u32;
}

// WASI's `random_get`: proxy-wasm hosts provide it (Envoy's with BoringSSL's
// `RAND_bytes`), to modules of any wasm32 target. The standard library of
// wasm32-wasip1 imports it already (for its hash maps' keys).
#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    fn random_get(buf: *mut u8, buf_len: usize) -> u32;
}

/// `Ok` for the OK status, the status itself otherwise.
fn check(status: u32) -> Result<(), Status> {
    match Status(status) {
        Status::OK => Ok(()),
        other => Err(other),
    }
}

/// The host's answer to a call that fills in a buffer: the buffer, nothing for
/// NOT_FOUND, or the status.
///
/// # Safety
/// On OK, `data` and `size` must be what the host wrote (see [`take_buffer`]).
unsafe fn filled(status: u32, data: *mut u8, size: usize) -> Result<Option<Vec<u8>>, Status> {
    match Status(status) {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        Status::OK => Ok(Some(unsafe { take_buffer(data, size) })),
        Status::NOT_FOUND => Ok(None),
        other => Err(other),
    }
}
