//! The wire to the rate limit service: gRPC over a plain HTTP call, and RLS v3 on it.
//!
//! - [`call`]: a call ready for the host to send (headers in the host's encoding, framed
//!   body), and the header sets every call shares, encoded once;
//! - [`grpc`]: a unary gRPC call's request headers, its 5-byte framing, and reading the
//!   status and message back out of the response (in the status codes of
//!   [`crate::reply::protocol::code`]);
//! - [`proto`]: the RLS v3 subset's message types, generated at build time;
//! - [`rls`]: the `ShouldRateLimit` request encoded, and the answer interpreted (the one
//!   module that knows RLS, each protocol quirk commented where it is handled);
//! - [`service_headers`]: which headers the service sends may be added.

pub mod call;
pub mod grpc;
pub mod proto;
pub mod rls;
pub mod service_headers;
