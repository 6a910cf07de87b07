//! floodgate: rate limiting inside Envoy, as a proxy-wasm HTTP filter.
//!
//! # A request, in order
//!
//! 1. **Envoy enters the module** through [`host`]'s exports (the private `host` module:
//!    the only code that speaks the proxy-wasm ABI). Its HTTP context hands the request to
//!    [`limiter::Limiter::check`] and later carries out the [`limiter::Verdict`].
//! 2. **The request is read** through [`request::descriptor::RequestView`]:
//!    [`request::descriptor`] finds the rules whose `match` the request meets and builds
//!    their descriptor values (headers, path, method, authority, client address,
//!    constants) and costs, refusing input that would let a client dodge a limit
//!    ([`request::header_map`] sees a header sent twice).
//! 3. **The limiter's steps** ([`limiter`]), each over state kept in [`shared`] data:
//!    the over-limit cache ([`shared::over_limit`]) rejects a request the service
//!    rejected recently; local rules take tokens from their buckets
//!    ([`shared::local`] on the [`shared::table`], deciding with the GCRA math of
//!    [`bucket`]: read, decide, compare-and-swap, decide again on conflict); global rules
//!    pay from quota grants ([`shared::lease`]) when they can; every fingerprint is keyed
//!    by [`shared::placement`]. A rejected request consumes nothing.
//! 4. **The wire to the service**: the global rules left make one `ShouldRateLimit` call
//!    ([`wire::rls`] encodes it, [`wire::grpc`] frames it for a plain HTTP/2 call, and the
//!    verdict carries it ready to send as a [`wire::call::Call`]); the request waits paused, and [`limiter::Limiter::answer`] turns what comes back (or
//!    the failure to get an answer: degraded mode) into the final verdict.
//! 5. **The reply** ([`reply`]): a rejection answered by the proxy in the client's
//!    protocol ([`reply::protocol`]: 429, or gRPC `RESOURCE_EXHAUSTED`) with
//!    `retry-after` and the rate-limit fields (draft-03 `x-ratelimit-*`, draft-10
//!    [`reply::fields`], a text or [`reply::problem`] body), or the headers an allowed
//!    response carries.
//! 6. **Usage metering** ([`usage`]): for a rule whose cost the response reports (an LLM
//!    API's tokens), the response is read as it passes and the real cost settled when it
//!    is done ([`limiter::Limiter::settle`]).
//!
//! Before any request, [`config`] parses and validates the plugin configuration once per
//! VM (a bad one is refused with the field's path). Every step counts what happened in a
//! [`metrics::Tally`] that the root context flushes to Envoy once a tick.
//!
//! # Pure logic, thin glue
//!
//! Every module above but `host` is plain Rust over plain data, tested on the host target
//! with a fake clock and an in-memory shared store (`testing`). The host layer implements
//! [`request::descriptor::RequestView`] and [`shared::SharedData`] with host calls and
//! carries out the verdicts, which hold every call and reply ready to send; its host calls and callbacks are compiled for wasm32 only.

#![warn(missing_docs)]

pub mod bucket;
pub mod config;
pub mod limiter;
pub mod metrics;
pub mod reply;
pub mod request;
pub mod shared;
pub mod usage;
pub mod wire;

#[cfg(test)]
mod testing;

mod host;

/// The module's allocator: size classes with free lists, smaller and cheaper per request
/// than wasi-libc's dlmalloc that Rust would use otherwise (see `host::heap`).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: host::heap::Allocator = host::heap::Allocator::new();
