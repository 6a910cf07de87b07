//! The module's exports: the proxy-wasm (ABI 0.2.1) callbacks Envoy calls, routed to
//! root and HTTP contexts.
//!
//! We export only the callbacks floodgate uses. Envoy skips a callback the module does
//! not export, and every call into the VM costs microseconds: the SDK exports all
//! twenty-odd callbacks, so each request would also enter the VM for its response body,
//! its log and its `done`, for nothing. Measured with `make bench`, those entries alone
//! cost more than floodgate's own work (see `docs/benchmarks.md`).

use super::background;
use super::hostcalls;
use super::http::{Flow, Http};
use super::id_map::IdMap;
use super::memory;
use super::root::Root;
use super::types::Action;
use crate::wire::grpc::{self, Part};
use std::cell::RefCell;

/// Every live context of this VM. The VM is single-threaded: one thread, one VM.
struct Contexts {
    roots: IdMap<Root>,
    http: IdMap<Http>,
    /// Rate limit calls in flight: token → the HTTP context waiting for it. The only
    /// place a call token is kept.
    calls: IdMap<u32>,
}

thread_local! {
    /// Built in a constant, not on first use: a lazily built thread-local is checked at
    /// every callback and brought its initialiser into the module (1 KB).
    static CONTEXTS: RefCell<Contexts> = const {
        RefCell::new(Contexts {
            roots: IdMap::new(),
            http: IdMap::new(),
            calls: IdMap::new(),
        })
    };
}

/// Runs `f` on the root context `id`, if it exists.
fn with_root<T>(id: u32, f: impl FnOnce(&mut Root) -> T) -> Option<T> {
    CONTEXTS.with(|c| c.try_borrow_mut().ok()?.roots.get_mut(id).map(f))
}

/// Runs `f` on the HTTP context `id`, if it exists.
fn with_http<T>(id: u32, f: impl FnOnce(&mut Http) -> T) -> Option<T> {
    CONTEXTS.with(|c| c.try_borrow_mut().ok()?.http.get_mut(id).map(f))
}

/// Marks the ABI version this module speaks.
#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// WASI reactor initialisation: runs static constructors once, before any callback.
#[cfg(target_os = "wasi")]
#[no_mangle]
pub extern "C" fn _initialize() {
    extern "C" {
        fn __wasm_call_ctors();
    }
    // SAFETY: called once by the host before anything else, as the WASI reactor ABI says.
    unsafe { __wasm_call_ctors() };
    super::log::install();
}

/// Memory the host fills in for us (header values, shared data, configuration). Its
/// ownership comes back to Rust as a `Vec<u8>` of exactly `size` bytes (see `memory`).
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    memory::allocate(size)
}

/// A new context: a root context (no parent) per plugin, an HTTP context per request.
#[no_mangle]
pub extern "C" fn proxy_on_context_create(context_id: u32, parent_id: u32) {
    CONTEXTS.with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        if parent_id == 0 {
            c.roots.insert(context_id, Root::default());
        } else {
            let plugin = c.roots.get(parent_id).and_then(Root::plugin);
            c.http.insert(context_id, Http::new(plugin));
        }
    });
}

/// The VM started; nothing to do until the plugin is configured.
#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_context_id: u32, _configuration_size: usize) -> bool {
    true
}

/// The plugin configuration arrived (or changed): `false` makes Envoy refuse it.
#[no_mangle]
pub extern "C" fn proxy_on_configure(context_id: u32, _configuration_size: usize) -> bool {
    with_root(context_id, Root::configure).unwrap_or(false)
}

/// The periodic tick of one root context (each thread has its own).
#[no_mangle]
pub extern "C" fn proxy_on_tick(context_id: u32) {
    with_root(context_id, |root| root.tick());
}

/// A request's headers: where the limit is decided.
#[no_mangle]
pub extern "C" fn proxy_on_request_headers(context_id: u32, _headers: usize, _end: bool) -> u32 {
    #[cfg(feature = "trap-on-header")]
    super::trap::on_request_headers();
    let action = CONTEXTS.with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return Action::Continue;
        };
        let Some(http) = c.http.get_mut(context_id) else {
            return Action::Continue;
        };
        match http.on_request_headers() {
            Flow::Continue => Action::Continue,
            Flow::Pause => Action::Pause,
            Flow::WaitingOn(token) => {
                c.calls.insert(token, context_id);
                Action::Pause
            }
        }
    });
    action as u32
}

/// The answer to a rate limit call. It arrives on the root context that made the call
/// (response parts are readable only here, before switching context); the HTTP context
/// waiting for it is found by token. A call no request waits for goes to its handler
/// (see [`background`]), in the root context, with no request context made current.
#[no_mangle]
pub extern "C" fn proxy_on_http_call_response(
    _root_id: u32,
    token: u32,
    headers: usize,
    body_size: usize,
    trailers: usize,
) {
    let read = || {
        grpc::read_answer(headers, trailers, |part| match part {
            Part::Header(name) => hostcalls::http_call_header(name).ok().flatten(),
            Part::Trailer(name) => hostcalls::http_call_trailer(name).ok().flatten(),
            Part::Body => hostcalls::http_call_body(body_size).ok(),
        })
    };
    let Some(context_id) = CONTEXTS.with(|c| c.try_borrow_mut().ok()?.calls.remove(token)) else {
        // Not a request's call: a background call's handler, or nobody (the request is
        // gone, its context deleted).
        if let Some(handler) = background::take(token) {
            handler(read());
        }
        return;
    };
    let answer = read();
    // Everything the request's context does from here acts on whichever context is
    // current, so it must be this request's.
    with_http(context_id, |http| {
        match hostcalls::set_effective_context(context_id) {
            Ok(()) => http.on_rls_answer(answer),
            Err(status) => http.on_context_unreachable(status),
        }
    });
}

/// The response's headers: where `x-ratelimit-*` headers are added to allowed requests,
/// and where reading a response cost starts.
#[no_mangle]
pub extern "C" fn proxy_on_response_headers(context_id: u32, _headers: usize, end: bool) -> u32 {
    with_http(context_id, |http| http.on_response_headers(end));
    Action::Continue as u32
}

/// A response body chunk, looked at for a response cost and passed on at once (never
/// buffered, never delayed). Exported only by the `response-cost` build: Envoy enters
/// the VM for every chunk of every response of a module that exports it.
#[cfg(feature = "response-cost")]
#[no_mangle]
pub extern "C" fn proxy_on_response_body(context_id: u32, size: usize, end: bool) -> u32 {
    with_http(context_id, |http| http.on_response_body(size, end));
    Action::Continue as u32
}

/// The response trailers, where a response cost header may come last. Exported only by
/// the `response-cost` build, as the body callback.
#[cfg(feature = "response-cost")]
#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(context_id: u32, _trailers: usize) -> u32 {
    with_http(context_id, Http::on_response_trailers);
    Action::Continue as u32
}

/// A context is gone.
#[no_mangle]
pub extern "C" fn proxy_on_delete(context_id: u32) {
    CONTEXTS.with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        match c.http.remove(context_id) {
            // A call still in flight finds nobody when it answers. (ABI 0.2.1 cannot
            // cancel an HTTP call; it ends at its timeout at the latest.) Only a request
            // deleted while it waits (its client went away) pays for the search.
            Some(mut http) => {
                // A response cut off before its end is charged here (ABI 0.2.1 calls
                // `proxy_on_delete` for every context, so no other export is needed).
                http.on_delete();
                if http.is_waiting() {
                    c.calls.retain(|waiting| *waiting != context_id);
                }
            }
            None => {
                c.roots.remove(context_id);
            }
        }
    });
}
