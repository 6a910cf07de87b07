//! Host calls on the stream's data: request, response and HTTP-call headers, trailers and
//! bodies, the plugin configuration, and host properties.

#[cfg(feature = "response-cost")]
use super::proxy_replace_header_map_value;
use super::{check, filled};
use super::{proxy_add_header_map_value, proxy_get_buffer_bytes, proxy_get_header_map_pairs};
use super::{proxy_get_header_map_value, proxy_get_property};
use crate::host::types::{BufferType, MapType, Status};
use std::ptr::null_mut;

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

/// Every request header, in the ABI's pair encoding (see [`Headers`](crate::reply::Headers)): one host
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
    add_header(MapType::RequestHeaders, name.as_bytes(), value.as_bytes())
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
pub fn add_response_header(name: &[u8], value: &[u8]) -> Result<(), Status> {
    add_header(MapType::ResponseHeaders, name, value)
}

/// Adds a value to a header map.
fn add_header(map_type: MapType, name: &[u8], value: &[u8]) -> Result<(), Status> {
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
