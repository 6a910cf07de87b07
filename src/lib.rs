//! floodgate: rate limiting inside Envoy, as a proxy-wasm HTTP filter.
//!
//! # How a request flows
//!
//! 1. [`descriptor`] finds the rules that apply to the request (its `match`) and builds
//!    their descriptor values from headers, path, method, authority or client address.
//! 2. [`local`] takes tokens from each rule's bucket in the shared [`table`], atomically
//!    per bucket (read, decide with [`bucket`], compare-and-swap, decide again on
//!    conflict); a rejected request consumes nothing.
//! 3. [`response`] turns the decisions into a rejection (429 or gRPC RESOURCE_EXHAUSTED
//!    with `retry-after` and the rate-limit fields: draft-03 `x-ratelimit-*` or
//!    draft-10 `RateLimit-Policy`/`RateLimit`, a text or problem+json body) or headers
//!    for an allowed response.
//!
//! [`limiter`] ties these together and is the single entry point the host layer calls.
//! Configuration is parsed and validated once by [`config`]; [`metrics`] names and
//! batches the counters.
//!
//! # Pure logic, thin glue
//!
//! Every module above is plain Rust over plain data, tested on the host target with a
//! fake clock and an in-memory shared store. Only the private `host` module talks to
//! Envoy (its host calls and callbacks are compiled for wasm32 only; its pure helpers
//! are tested on the host too): it implements [`descriptor::RequestView`] and
//! [`shared::SharedData`] with proxy-wasm host calls and carries out the verdicts.

#![warn(missing_docs)]

pub mod bucket;
pub mod config;
pub mod descriptor;
pub mod grpc;
pub mod header_map;
pub mod lease;
pub mod limiter;
pub mod local;
pub mod log_throttle;
pub mod metrics;
pub mod over_limit;
pub mod placement;
pub mod proto;
pub mod protocol;
pub mod response;
pub mod rls;
pub mod service_headers;
pub mod sets;
pub mod shared;
pub mod table;
pub mod usage;

#[cfg(test)]
mod testing;

mod host;
