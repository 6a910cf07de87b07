//! The host layer: the only code that talks to Envoy, through the proxy-wasm ABI.
//!
//! It reads the request, calls host functions and carries out the [`Verdict`]s that the
//! pure modules compute. Compiled for wasm32 only; everything it calls into is tested on
//! the host target. It speaks the ABI directly (see [`dispatch`] for why we export only
//! the callbacks we use, and [`abi`] for why every status is handled here).
//!
//! [`Verdict`]: crate::limiter::Verdict

mod abi;
mod dispatch;
mod http;
mod log;
mod request;
mod root;
mod shared;
#[cfg(feature = "trap-on-header")]
mod trap;
