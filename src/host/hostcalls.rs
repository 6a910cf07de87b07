//! The proxy-wasm ABI (0.2.1) host calls floodgate makes, with every status handled.
//!
//! The SDK's own `hostcalls` panic on statuses they do not expect (and its trait helpers
//! `unwrap()`), which with wasm's abort-on-panic kills the whole VM. These wrappers
//! return every non-OK [`Status`] as an error for the caller to map to a failure mode.
//! Buffers the host returns were allocated through our own `proxy_on_memory_allocate`
//! export ([`memory::allocate`]), so ownership is taken back with [`memory::take_buffer`].

use super::memory::take_buffer;
use super::types::{BufferType, LogLevel, MapType, MetricType, Status, StreamType};
use crate::request::header_map::encode_pairs;
use std::ptr::{null, null_mut};

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

/// Writes `message` to Envoy's log at `level`.
pub fn log(level: LogLevel, message: &str) -> Result<(), Status> {
    // SAFETY: the message is a valid slice for the duration of the call.
    check(unsafe { proxy_log(level as u32, message.as_ptr(), message.len()) })
}

/// The host's wall clock in nanoseconds since the Unix epoch.
pub fn current_time_ns() -> Result<u64, Status> {
    let mut t = 0u64;
    // SAFETY: the host writes one u64 through a valid pointer.
    check(unsafe { proxy_get_current_time_nanoseconds(&mut t) })?;
    Ok(t)
}

/// Bytes from the host's cryptographic random generator; `Err` holds the WASI errno.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], u32> {
    let mut out = [0u8; N];
    // SAFETY: the host writes at most `N` bytes into a buffer of `N` bytes.
    match unsafe { random_get(out.as_mut_ptr(), N) } {
        0 => Ok(out),
        errno => Err(errno),
    }
}

/// Asks for `on_tick` every `ms` milliseconds (in this root context's thread).
pub fn set_tick_period_ms(ms: u32) -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_set_tick_period_milliseconds(ms) })
}

/// The plugin configuration bytes (empty when none was given).
pub fn plugin_configuration() -> Result<Vec<u8>, Status> {
    buffer(BufferType::PluginConfiguration, usize::MAX)
}

/// Up to `max_size` bytes of a buffer (empty when the host has none).
fn buffer(buffer_type: BufferType, max_size: usize) -> Result<Vec<u8>, Status> {
    buffer_from(buffer_type, 0, max_size)
}

/// Up to `max_size` bytes of a buffer from byte `start` (fewer at its end; empty when the
/// host has none).
fn buffer_from(buffer_type: BufferType, start: usize, max_size: usize) -> Result<Vec<u8>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: the host writes a pointer and a size through valid pointers.
    let status = unsafe {
        proxy_get_buffer_bytes(buffer_type as u32, start, max_size, &mut data, &mut size)
    };
    // SAFETY: `data` and `size` are what the host wrote.
    Ok(unsafe { filled(status, data, size) }?.unwrap_or_default())
}

/// The body of an HTTP call's response (`size` bytes, as `proxy_on_http_call_response`
/// said). Readable only inside that callback, before switching context.
pub fn http_call_body(size: usize) -> Result<Vec<u8>, Status> {
    buffer(BufferType::HttpCallResponseBody, size)
}

#[cfg(feature = "response-cost")]
/// Up to `size` bytes of the response body chunk being passed on, from byte `start` (the
/// chunk is as long as `proxy_on_response_body` said). Only the current chunk: the
/// filter never asks Envoy to buffer.
pub fn response_body(start: usize, size: usize) -> Result<Vec<u8>, Status> {
    buffer_from(BufferType::HttpResponseBody, start, size)
}

#[cfg(feature = "response-cost")]
/// A response header's first value (`None` when absent).
pub fn response_header(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MapType::ResponseHeaders, name)
}

#[cfg(feature = "response-cost")]
/// A response trailer's first value (`None` when absent).
pub fn response_trailer(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MapType::ResponseTrailers, name)
}

/// A request header's value (`None` when absent).
pub fn request_header(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MapType::RequestHeaders, name)
}

/// Every request header, in the ABI's pair encoding (see [`encode_pairs`]): one host
/// call, after which any number of headers can be read without another.
pub fn request_header_pairs() -> Result<Vec<u8>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: the host writes a pointer and a size through valid pointers.
    let status =
        unsafe { proxy_get_header_map_pairs(MapType::RequestHeaders as u32, &mut data, &mut size) };
    // SAFETY: `data` and `size` are what the host wrote.
    Ok(unsafe { filled(status, data, size) }?.unwrap_or_default())
}

/// A header of an HTTP call's response (inside `proxy_on_http_call_response`).
pub fn http_call_header(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MapType::HttpCallResponseHeaders, name)
}

/// A trailer of an HTTP call's response (inside `proxy_on_http_call_response`).
pub fn http_call_trailer(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MapType::HttpCallResponseTrailers, name)
}

/// One header of a map: its first value, `None` when absent.
fn header_value(map_type: MapType, name: &str) -> Result<Option<Vec<u8>>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: key is a valid slice; the host writes a pointer and a size.
    let status = unsafe {
        proxy_get_header_map_value(
            map_type as u32,
            name.as_ptr(),
            name.len(),
            &mut data,
            &mut size,
        )
    };
    // SAFETY: `data` and `size` are what the host wrote.
    unsafe { filled(status, data, size) }
}

/// Adds a header to the request forwarded upstream (while it is paused or in
/// `on_request_headers`).
pub fn add_request_header(name: &str, value: &str) -> Result<(), Status> {
    add_header(MapType::RequestHeaders, name, value)
}

#[cfg(feature = "response-cost")]
/// Sets a header of the request forwarded upstream, replacing every value it had (while
/// the request is paused or in `on_request_headers`).
pub fn replace_request_header(name: &str, value: &str) -> Result<(), Status> {
    // SAFETY: both are valid slices for the duration of the call.
    check(unsafe {
        proxy_replace_header_map_value(
            MapType::RequestHeaders as u32,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        )
    })
}

/// Adds a header to the downstream response.
pub fn add_response_header(name: &str, value: &str) -> Result<(), Status> {
    add_header(MapType::ResponseHeaders, name, value)
}

/// Adds a value to a header map.
fn add_header(map_type: MapType, name: &str, value: &str) -> Result<(), Status> {
    // SAFETY: both are valid slices for the duration of the call.
    check(unsafe {
        proxy_add_header_map_value(
            map_type as u32,
            name.as_ptr(),
            name.len(),
            value.as_ptr(),
            value.len(),
        )
    })
}

/// A host property by path, e.g. `["source", "address"]` (`None` when absent).
pub fn property(path: &[&str]) -> Result<Option<Vec<u8>>, Status> {
    let encoded = path.join("\0");
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: the path is a valid slice; the host writes a pointer and a size.
    let status =
        unsafe { proxy_get_property(encoded.as_ptr(), encoded.len(), &mut data, &mut size) };
    // SAFETY: `data` and `size` are what the host wrote.
    unsafe { filled(status, data, size) }
}

/// A shared-data value and its CAS token (`None` when the key was never written).
pub fn shared_get(key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Status> {
    let (mut data, mut size, mut cas) = (null_mut(), 0usize, 0u32);
    // SAFETY: key is a valid slice; the host writes a pointer, a size and a token.
    let status =
        unsafe { proxy_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut size, &mut cas) };
    // SAFETY: `data` and `size` are what the host wrote.
    Ok(unsafe { filled(status, data, size) }?.map(|value| (value, cas)))
}

/// Writes a shared-data value if its token is still `cas` (0: unconditionally).
/// A stale token gives `Err(Status::CAS_MISMATCH)`.
pub fn shared_set(key: &[u8], value: &[u8], cas: u32) -> Result<(), Status> {
    // SAFETY: both are valid slices for the duration of the call.
    check(unsafe {
        proxy_set_shared_data(key.as_ptr(), key.len(), value.as_ptr(), value.len(), cas)
    })
}

/// Resumes the request paused while the rate limit service decided.
pub fn continue_request() -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_continue_stream(StreamType::Request as u32) })
}

/// Makes `context_id` the context later calls act on: callbacks for an HTTP call arrive
/// on the root context, but the request to resume or answer is an HTTP context.
pub fn set_effective_context(context_id: u32) -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_set_effective_context(context_id) })
}

/// Starts an HTTP call to `cluster` with `headers` (already [`encode_pairs`]-encoded) and
/// `body`; returns its token. The answer arrives in `proxy_on_http_call_response`.
pub fn http_call(
    cluster: &str,
    headers: &[u8],
    body: &[u8],
    timeout_ms: u32,
) -> Result<u32, Status> {
    // No trailers: an encoded empty list is a zero count.
    let trailers = [0u8; 4];
    let mut token = 0u32;
    // SAFETY: all slices are valid for the duration of the call; the host writes the token.
    check(unsafe {
        proxy_http_call(
            cluster.as_ptr(),
            cluster.len(),
            headers.as_ptr(),
            headers.len(),
            body.as_ptr(),
            body.len(),
            trailers.as_ptr(),
            trailers.len(),
            timeout_ms,
            &mut token,
        )
    })?;
    Ok(token)
}

/// Sends a reply from the proxy. `grpc_status` ≥ 0 makes it a gRPC trailers-only
/// response with that status; headers are sent as given.
pub fn send_local_response(
    status: u32,
    details: &str,
    body: &[u8],
    headers: &[(&str, &str)],
    grpc_status: i32,
) -> Result<(), Status> {
    let headers = encode_pairs(headers);
    // SAFETY: all slices are valid for the duration of the call.
    check(unsafe {
        proxy_send_local_response(
            status,
            details.as_ptr(),
            details.len(),
            if body.is_empty() {
                null()
            } else {
                body.as_ptr()
            },
            body.len(),
            headers.as_ptr(),
            headers.len(),
            grpc_status,
        )
    })
}

/// Defines a metric and returns its id.
pub fn define_metric(kind: MetricType, name: &str) -> Result<u32, Status> {
    let mut id = 0u32;
    // SAFETY: the name is a valid slice; the host writes the id.
    check(unsafe { proxy_define_metric(kind as u32, name.as_ptr(), name.len(), &mut id) })?;
    Ok(id)
}

/// Adds `delta` to a metric.
pub fn increment_metric(id: u32, delta: i64) -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_increment_metric(id, delta) })
}
