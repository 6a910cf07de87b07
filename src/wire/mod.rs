//! The wire to the rate limit service: gRPC over a plain HTTP call, and RLS v3 on it.
//!
//! - [`grpc`]: a unary gRPC call's request headers, its 5-byte framing, and reading the
//!   status and message back out of the response, with the status codes in [`grpc::code`];
//! - [`proto`]: the RLS v3 subset's message types, generated at build time;
//! - [`rls`]: the `ShouldRateLimit` request encoded, and the answer interpreted (the one
//!   module that knows RLS, each protocol quirk commented where it is handled);
//! - [`service_headers`]: which headers the service sends may be added.

pub mod grpc;
pub mod proto;
pub mod rls;
pub mod service_headers;
