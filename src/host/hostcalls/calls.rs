//! Host calls that are not about the stream's data: the log, the clock, randomness, the
//! timer, shared data, resuming the stream, HTTP calls, local replies and metrics.

use super::proxy_set_tick_period_milliseconds;
use super::{check, filled, random_get};
use super::{proxy_continue_stream, proxy_define_metric, proxy_get_current_time_nanoseconds};
use super::{proxy_get_shared_data, proxy_http_call, proxy_increment_metric, proxy_log};
use super::{proxy_send_local_response, proxy_set_effective_context, proxy_set_shared_data};
use crate::host::types::{LogLevel, MetricType, Status, StreamType};
use std::ptr::{null, null_mut};

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

/// Starts an HTTP call to `cluster` with `headers` (already in the host's encoding, see
/// [`Headers`](crate::reply::Headers)) and
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
/// response with that status; `headers` are already in the host's encoding (a reply's
/// [`Headers`](crate::reply::Headers) keeps them so) and sent as given.
pub fn send_local_response(
    status: u32,
    details: &str,
    body: &[u8],
    headers: &[u8],
    grpc_status: i32,
) -> Result<(), Status> {
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
