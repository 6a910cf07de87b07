//! A unary gRPC call carried by a plain HTTP/2 call: the request headers, the 5-byte
//! message framing, and reading the status and message back out of the response.
//!
//! Why not the host's own gRPC call: measured with `make bench`, Envoy's wasm
//! `grpc_call` costs more worker CPU per call than `http_call` to the same cluster (it
//! parses and hashes a `GrpcService` to find a cached client on every call), which put
//! floodgate's global mode behind Envoy's native rate limit filter. gRPC over HTTP/2 is
//! a small, stable wire format (the public "gRPC over HTTP2" protocol document), so we
//! speak it ourselves: the upstream sees the same request either way.

use crate::reply::protocol::code::{
    INTERNAL, OK, PERMISSION_DENIED, UNAUTHENTICATED, UNAVAILABLE, UNIMPLEMENTED, UNKNOWN,
};

/// What came back for a rate limit call, as the transport saw it: the gRPC layer
/// produces it, [`crate::wire::rls::interpret`] gives it a meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The call could not be started (e.g. the cluster does not exist); host status.
    NotSent(u32),
    /// The call ended with a gRPC status other than OK.
    Status {
        /// gRPC status code (see [`code`]).
        code: u32,
        /// The status message Envoy gave.
        message: String,
    },
    /// A response message.
    Response(Vec<u8>),
    /// The call succeeded but its body is not one gRPC message.
    Undecodable,
}

/// The request headers of a unary call to `path` (`/package.Service/Method`) on `cluster`,
/// with the deadline the callee should give up at.
///
/// `:authority` is the cluster name, as Envoy's own gRPC client sends it; `te: trailers`
/// is what gRPC servers require to accept the request.
pub fn request_headers(path: &str, cluster: &str, timeout_ms: u32) -> [(&'static str, String); 6] {
    [
        (":method", "POST".to_owned()),
        (":path", path.to_owned()),
        (":authority", cluster.to_owned()),
        ("content-type", "application/grpc".to_owned()),
        ("te", "trailers".to_owned()),
        ("grpc-timeout", format!("{timeout_ms}m")),
    ]
}

/// The length of gRPC's message prefix: an uncompressed flag byte, then the message's
/// length as a big-endian u32.
pub const FRAME_PREFIX: usize = 5;

/// A request body with room for the message prefix, to write a message of about
/// `capacity` bytes after it and then [`end_frame`]: the message is framed where it is
/// written, never copied.
pub fn start_frame(capacity: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(FRAME_PREFIX + capacity);
    body.extend_from_slice(&[0; FRAME_PREFIX]);
    body
}

/// Writes the prefix of a body from [`start_frame`]: uncompressed, and the length of what
/// was written after it.
pub fn end_frame(body: &mut [u8]) {
    let length = body.len().saturating_sub(FRAME_PREFIX) as u32;
    if let Some(prefix) = body.get_mut(..FRAME_PREFIX) {
        prefix[0] = 0;
        prefix[1..].copy_from_slice(&length.to_be_bytes());
    }
}

/// `message` framed as a request body.
#[cfg(test)]
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut body = start_frame(message.len());
    body.extend_from_slice(message);
    end_frame(&mut body);
    body
}

/// The message inside a response body holding exactly one uncompressed frame.
fn unframe(mut body: Vec<u8>) -> Option<Vec<u8>> {
    let (&[flag, a, b, c, d], rest) = body.split_first_chunk::<FRAME_PREFIX>()?;
    // We never offer compression (no grpc-accept-encoding), so a compressed frame is an
    // error; so is any length other than "the rest of the body".
    if flag != 0 || u32::from_be_bytes([a, b, c, d]) as usize != rest.len() {
        return None;
    }
    // Moved down in place (`drain` does the same through its guard's drop).
    let message_len = rest.len();
    body.copy_within(FRAME_PREFIX.., 0);
    body.truncate(message_len);
    Some(body)
}

/// A part of the call's response the host can be asked for. Each costs a host call, so
/// [`read_answer`] asks only for what the answer needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A response header's value.
    Header(&'static str),
    /// A response trailer's value.
    Trailer(&'static str),
    /// The whole response body.
    Body,
}

/// What came back for a call whose response had `headers` headers and `trailers`
/// trailers, reading the rest through `read` (`None`: absent or unreadable).
///
/// The gRPC status is always read before the body: `grpc-status` from the trailers, or
/// from the headers of a trailers-only response. A response without one is not a gRPC
/// answer: Envoy's own reply (504 "upstream request timeout", 503 "no healthy upstream")
/// or something else's; its HTTP status maps to a gRPC code and its body becomes the
/// message, so a timeout still reads as one.
pub fn read_answer(
    headers: usize,
    trailers: usize,
    mut read: impl FnMut(Part) -> Option<Vec<u8>>,
) -> Answer {
    if headers == 0 {
        // Envoy answers a reset stream (refused, closed, overflowed) with nothing at all.
        return Answer::Status {
            code: UNAVAILABLE,
            message: "reset before a response".to_owned(),
        };
    }
    let in_trailers = if trailers > 0 {
        read(Part::Trailer("grpc-status"))
    } else {
        None
    };
    // grpc-message travels beside grpc-status.
    let (status, message) = match in_trailers {
        Some(s) => (Some(s), Part::Trailer("grpc-message")),
        None => (
            read(Part::Header("grpc-status")),
            Part::Header("grpc-message"),
        ),
    };
    let Some(status) = status else {
        let http = read(Part::Header(":status"));
        let body = read(Part::Body).unwrap_or_default();
        return Answer::Status {
            code: code_for_http(http.as_deref()),
            message: String::from_utf8_lossy(&body).into_owned(),
        };
    };
    match parse_code(&status) {
        Some(OK) => match read(Part::Body).and_then(unframe) {
            Some(message) => Answer::Response(message),
            None => Answer::Undecodable,
        },
        code => Answer::Status {
            code: code.unwrap_or(UNKNOWN),
            message: String::from_utf8_lossy(&read(message).unwrap_or_default()).into_owned(),
        },
    }
}

/// A `grpc-status` value as a code (`None` if it is not a decimal number). One digit,
/// what every answer carries, is read without the text parser.
fn parse_code(value: &[u8]) -> Option<u32> {
    match value {
        [digit @ b'0'..=b'9'] => Some(u32::from(digit - b'0')),
        _ => std::str::from_utf8(value).ok()?.trim().parse().ok(),
    }
}

/// The gRPC code for a non-gRPC HTTP response, as the gRPC protocol document maps them.
fn code_for_http(status: Option<&[u8]>) -> u32 {
    match status.and_then(parse_code) {
        Some(400) => INTERNAL,
        Some(401) => UNAUTHENTICATED,
        Some(403) => PERMISSION_DENIED,
        Some(404) => UNIMPLEMENTED,
        Some(429 | 502 | 503 | 504) => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

#[cfg(test)]
mod tests;
