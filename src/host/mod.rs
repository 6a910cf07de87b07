//! The host layer: the only code that talks to Envoy, through the proxy-wasm ABI.
//!
//! It reads the request, calls host functions and carries out the [`Verdict`]s that the
//! pure modules compute: a verdict carries its call to the rate limit service ready to
//! send ([`Call`]: encoded headers, framed body) and its reply ready to send, so nothing
//! here encodes, frames or words anything. Laid out as proxy-wasm SDK users know it:
//!
//! - [`types`]: the ABI's values as types (actions, map and buffer types, [`Status`]);
//! - `hostcalls`: the host functions we import (declared in one place), every status
//!   handled: the stream's headers and bodies in `streams`, the rest in `calls`;
//! - `dispatcher`: the callbacks we export, routing them to root and HTTP contexts
//!   (see there for why we export only those we use);
//! - `root` and `http`: the contexts; `request`, `shared` and `log` implement the pure
//!   modules' traits on host calls;
//! - `background`: starting every call to the rate limit service, and calls no request
//!   waits for, whose answers go to a handler;
//! - `holding`: what a request holds until its stream ends (concurrency slots, a hold's
//!   release), given back from `proxy_on_delete`;
//! - `refill`, `charge` and `release`: a lease refill, the stream-end charge of a response
//!   cost and the stream-end release of a fleet-wide concurrency hold, three such calls.
//!
//! [`types`], [`memory`] (host buffers), [`heap`] (the module's allocator), [`id_map`] (the
//! dispatcher's contexts by host id), [`failure`] (what to do
//! when a verdict cannot be carried out) and [`log_throttle`] (one log line per failure
//! cause and period) make no host call: they are compiled and tested on every target.
//! The rest is compiled for wasm32 only.
//!
//! [`Verdict`]: crate::limiter::Verdict
//! [`Call`]: crate::wire::call::Call
//! [`Status`]: types::Status

// On the host target only the tests use the pure modules.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

pub mod failure;
pub mod heap;
pub mod id_map;
pub mod log_throttle;
pub mod memory;
pub mod types;

#[cfg(target_arch = "wasm32")]
pub mod background;
#[cfg(target_arch = "wasm32")]
mod dispatcher;
#[cfg(target_arch = "wasm32")]
mod holding;
#[cfg(target_arch = "wasm32")]
mod hostcalls;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod log;
#[cfg(all(target_arch = "wasm32", feature = "response-cost"))]
mod metering;
#[cfg(target_arch = "wasm32")]
mod refill;
#[cfg(target_arch = "wasm32")]
mod request;
#[cfg(target_arch = "wasm32")]
mod root;
#[cfg(target_arch = "wasm32")]
mod shared;
#[cfg(target_arch = "wasm32")]
mod stream_end;
#[cfg(all(target_arch = "wasm32", feature = "trap-on-header"))]
mod trap;
