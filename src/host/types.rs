//! The proxy-wasm ABI's values (0.2.1) as types: what a callback answers, which map or
//! buffer a host call reads, and the status every host call returns.
//!
//! Plain data, compiled and tested on every target: only [`super::hostcalls`] turns
//! these into the `u32`s the host expects, so no other code handles a bare ABI number.

use std::fmt;

/// What a callback tells the host to do with the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Action {
    /// Go on with the stream.
    Continue = 0,
    /// Hold it until `proxy_continue_stream` or a local reply.
    Pause = 1,
}

/// A header map the host keeps (only those floodgate reads or writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    /// The downstream request's headers.
    RequestHeaders = 0,
    /// The response's headers, on their way downstream.
    ResponseHeaders = 2,
    /// The response's trailers.
    #[cfg_attr(not(feature = "response-cost"), allow(dead_code))]
    ResponseTrailers = 3,
    /// The headers of an HTTP call's response.
    HttpCallResponseHeaders = 6,
    /// The trailers of an HTTP call's response.
    HttpCallResponseTrailers = 7,
}

/// A buffer the host keeps (only those floodgate reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BufferType {
    /// The chunk of the response body being passed downstream.
    #[cfg_attr(not(feature = "response-cost"), allow(dead_code))]
    HttpResponseBody = 1,
    /// The body of an HTTP call's response.
    HttpCallResponseBody = 4,
    /// The plugin's configuration.
    PluginConfiguration = 7,
}

/// A direction of the stream (only the one floodgate pauses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum StreamType {
    /// The downstream request.
    Request = 0,
}

/// A metric's kind, as `proxy_define_metric` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MetricType {
    /// Only goes up.
    Counter = 0,
    /// Goes up and down.
    Gauge = 1,
}

/// A log level, as `proxy_log` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum LogLevel {
    /// Finest detail.
    Trace = 0,
    /// Debugging detail.
    Debug = 1,
    /// Normal operation.
    Info = 2,
    /// Something went wrong but the filter carries on.
    Warn = 3,
    /// Something failed.
    Error = 4,
}

/// What a host call returned. A newtype rather than an enum: a newer host may return a
/// code this module does not know, and it must still be logged, not lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    /// The call did what was asked.
    pub const OK: Status = Status(0);
    /// What was asked for does not exist (a header, a key, a property).
    pub const NOT_FOUND: Status = Status(1);
    /// A shared-data write whose CAS token was stale.
    pub const CAS_MISMATCH: Status = Status(8);
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests;
