//! The floors with floodgate's callbacks, for `make bench`: `bench/host-calls`'s plans
//! (its configuration string, e.g. `value 1` for the raw-ABI no-op's one header, or
//! `limit-reject` for the limit floor rejecting), in a module that also exports the
//! three callbacks floodgate enters on every request and does nothing in them.
//!
//! Envoy enters the VM for every `proxy_on_*` callback a module exports, whether it does
//! anything there or not. floodgate needs three beyond the request's headers, each for a
//! reason the ABI leaves no way around:
//! - `proxy_on_context_create`: the only place ABI 0.2.1 tells a request's context which
//!   root context (plugin configuration) it belongs to. Several share one VM: plugins
//!   with one `vm_id` and different configurations, and the old and new configuration
//!   while a listener update drains.
//! - `proxy_on_response_headers`: `x-ratelimit-*` and the service's headers on allowed
//!   responses. Envoy enters it for the filter's own local reply too.
//! - `proxy_on_delete`: frees a request's state, gives back a concurrency slot, forgets
//!   a call in flight.
//!
//! Beside `bench/host-calls` running the same plan, this module prices those three
//! entries; beside floodgate, it is the floor of a filter that exports what floodgate
//! exports, so what floodgate costs over it is its own work.

// The plans, the configuration and the request's callback are the host-calls module's own
// source, compiled in here (its exports become this module's). Not a dependency: a crate
// built as an rlib as well is not link-time optimised, which costs the floors ~40
// instructions a request.
#[path = "../../host-calls/src/lib.rs"]
pub mod plans;

#[cfg(target_arch = "wasm32")]
mod callbacks {
    /// A context was created: nothing to keep.
    #[no_mangle]
    pub extern "C" fn proxy_on_context_create(_: u32, _: u32) {}

    /// A response's headers: passed on as they are (0: continue).
    #[no_mangle]
    pub extern "C" fn proxy_on_response_headers(_: u32, _: usize, _: bool) -> u32 {
        0
    }

    /// A context is gone: nothing to free.
    #[no_mangle]
    pub extern "C" fn proxy_on_delete(_: u32) {}
}
