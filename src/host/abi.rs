//! The proxy-wasm ABI (0.2.1) calls floodgate makes, with every status handled.
//!
//! The SDK's own `hostcalls` panic on statuses they do not expect (and its trait helpers
//! `unwrap()`), which with wasm's abort-on-panic kills the whole VM. These wrappers
//! return every non-OK status as an error for the caller to map to a failure mode.
//! Buffers the host returns were allocated through the SDK's `proxy_on_memory_allocate`,
//! so ownership is taken back as a `Vec<u8>` of that exact size.

use std::ptr::{null, null_mut};

/// A proxy-wasm status code other than OK.
pub type Status = u32;

const OK: u32 = 0;
const NOT_FOUND: u32 = 1;

const BUFFER_HTTP_CALL_RESPONSE_BODY: u32 = 4;
const BUFFER_PLUGIN_CONFIGURATION: u32 = 7;
const MAP_REQUEST_HEADERS: u32 = 0;
const MAP_RESPONSE_HEADERS: u32 = 2;
const MAP_HTTP_CALL_RESPONSE_HEADERS: u32 = 6;
const MAP_HTTP_CALL_RESPONSE_TRAILERS: u32 = 7;
const STREAM_REQUEST: u32 = 0;

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

/// Takes ownership of a buffer the host filled in.
///
/// # Safety
/// `data` must be null or a buffer of exactly `size` bytes allocated by
/// `proxy_on_memory_allocate`, not owned by anyone else.
unsafe fn take_buffer(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() {
        Vec::new()
    } else {
        // SAFETY: guaranteed by the caller: the host allocated `size` bytes for us.
        unsafe { Vec::from_raw_parts(data, size, size) }
    }
}

fn check(status: u32) -> Result<(), Status> {
    if status == OK {
        Ok(())
    } else {
        Err(status)
    }
}

/// Writes `message` to Envoy's log at `level` (0 trace ... 4 error).
pub fn log(level: u32, message: &str) -> Result<(), Status> {
    // SAFETY: the message is a valid slice for the duration of the call.
    check(unsafe { proxy_log(level, message.as_ptr(), message.len()) })
}

/// The host's wall clock in nanoseconds since the Unix epoch.
pub fn current_time_ns() -> Result<u64, Status> {
    let mut t = 0u64;
    // SAFETY: the host writes one u64 through a valid pointer.
    check(unsafe { proxy_get_current_time_nanoseconds(&mut t) })?;
    Ok(t)
}

/// Asks for `on_tick` every `ms` milliseconds (in this root context's thread).
pub fn set_tick_period_ms(ms: u32) -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_set_tick_period_milliseconds(ms) })
}

/// The plugin configuration bytes (empty when none was given).
pub fn plugin_configuration() -> Result<Vec<u8>, Status> {
    buffer(BUFFER_PLUGIN_CONFIGURATION)
}

fn buffer(buffer_type: u32) -> Result<Vec<u8>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: the host writes a pointer and a size through valid pointers.
    let status =
        unsafe { proxy_get_buffer_bytes(buffer_type, 0, usize::MAX, &mut data, &mut size) };
    match status {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        OK => Ok(unsafe { take_buffer(data, size) }),
        NOT_FOUND => Ok(Vec::new()),
        other => Err(other),
    }
}

/// The body of an HTTP call's response (`size` bytes, as `proxy_on_http_call_response`
/// said). Readable only inside that callback, before switching context.
pub fn http_call_body(size: usize) -> Result<Vec<u8>, Status> {
    let (mut data, mut len) = (null_mut(), 0usize);
    // SAFETY: the host writes a pointer and a size through valid pointers.
    let status = unsafe {
        proxy_get_buffer_bytes(BUFFER_HTTP_CALL_RESPONSE_BODY, 0, size, &mut data, &mut len)
    };
    match status {
        // SAFETY: on OK the host allocated `len` bytes for us (or left null).
        OK => Ok(unsafe { take_buffer(data, len) }),
        NOT_FOUND => Ok(Vec::new()),
        other => Err(other),
    }
}

/// A request header's value (`None` when absent).
pub fn request_header(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MAP_REQUEST_HEADERS, name)
}

/// Every request header, in the ABI's pair encoding (see [`encode_pairs`]): one host
/// call, after which any number of headers can be read without another.
pub fn request_header_pairs() -> Result<Vec<u8>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: the host writes a pointer and a size through valid pointers.
    let status = unsafe { proxy_get_header_map_pairs(MAP_REQUEST_HEADERS, &mut data, &mut size) };
    match status {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        OK => Ok(unsafe { take_buffer(data, size) }),
        NOT_FOUND => Ok(Vec::new()),
        other => Err(other),
    }
}

/// A header of an HTTP call's response (inside `proxy_on_http_call_response`).
pub fn http_call_header(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MAP_HTTP_CALL_RESPONSE_HEADERS, name)
}

/// A trailer of an HTTP call's response (inside `proxy_on_http_call_response`).
pub fn http_call_trailer(name: &str) -> Result<Option<Vec<u8>>, Status> {
    header_value(MAP_HTTP_CALL_RESPONSE_TRAILERS, name)
}

fn header_value(map_type: u32, name: &str) -> Result<Option<Vec<u8>>, Status> {
    let (mut data, mut size) = (null_mut(), 0usize);
    // SAFETY: key is a valid slice; the host writes a pointer and a size.
    let status = unsafe {
        proxy_get_header_map_value(map_type, name.as_ptr(), name.len(), &mut data, &mut size)
    };
    match status {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        OK => Ok(Some(unsafe { take_buffer(data, size) })),
        NOT_FOUND => Ok(None),
        other => Err(other),
    }
}

/// Adds a header to the request forwarded upstream (while it is paused or in
/// `on_request_headers`).
pub fn add_request_header(name: &str, value: &str) -> Result<(), Status> {
    add_header(MAP_REQUEST_HEADERS, name, value)
}

/// Adds a header to the downstream response.
pub fn add_response_header(name: &str, value: &str) -> Result<(), Status> {
    add_header(MAP_RESPONSE_HEADERS, name, value)
}

fn add_header(map_type: u32, name: &str, value: &str) -> Result<(), Status> {
    // SAFETY: both are valid slices for the duration of the call.
    check(unsafe {
        proxy_add_header_map_value(
            map_type,
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
    match status {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        OK => Ok(Some(unsafe { take_buffer(data, size) })),
        NOT_FOUND => Ok(None),
        other => Err(other),
    }
}

/// A shared-data value and its CAS token (`None` when the key was never written).
pub fn shared_get(key: &str) -> Result<Option<(Vec<u8>, u32)>, Status> {
    let (mut data, mut size, mut cas) = (null_mut(), 0usize, 0u32);
    // SAFETY: key is a valid slice; the host writes a pointer, a size and a token.
    let status =
        unsafe { proxy_get_shared_data(key.as_ptr(), key.len(), &mut data, &mut size, &mut cas) };
    match status {
        // SAFETY: on OK the host allocated `size` bytes for us (or left null).
        OK => Ok(Some((unsafe { take_buffer(data, size) }, cas))),
        NOT_FOUND => Ok(None),
        other => Err(other),
    }
}

/// Writes a shared-data value if its token is still `cas` (0: unconditionally).
/// A stale token gives `Err(CAS_MISMATCH)`.
pub fn shared_set(key: &str, value: &[u8], cas: u32) -> Result<(), Status> {
    // SAFETY: both are valid slices for the duration of the call.
    check(unsafe {
        proxy_set_shared_data(key.as_ptr(), key.len(), value.as_ptr(), value.len(), cas)
    })
}

/// The status a stale CAS token gets.
pub const CAS_MISMATCH: Status = 8;

/// Resumes the request paused while the rate limit service decided.
pub fn continue_request() -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_continue_stream(STREAM_REQUEST) })
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

/// Defines a metric (0 counter, 1 gauge) and returns its id.
pub fn define_metric(kind: u32, name: &str) -> Result<u32, Status> {
    let mut id = 0u32;
    // SAFETY: the name is a valid slice; the host writes the id.
    check(unsafe { proxy_define_metric(kind, name.as_ptr(), name.len(), &mut id) })?;
    Ok(id)
}

/// Adds `delta` to a metric.
pub fn increment_metric(id: u32, delta: i64) -> Result<(), Status> {
    // SAFETY: plain value call.
    check(unsafe { proxy_increment_metric(id, delta) })
}

/// The ABI's encoding of a list of pairs: a count, every (key, value) length, then every
/// key and value each followed by a NUL byte. All integers little-endian u32.
pub fn encode_pairs(pairs: &[(&str, &str)]) -> Vec<u8> {
    let text: usize = pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut out = Vec::with_capacity(4 + 8 * pairs.len() + text);
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}
