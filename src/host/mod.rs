//! The host layer: the only code that talks to Envoy through proxy-wasm.
//!
//! It reads the request, calls host functions and carries out the [`Verdict`]s that the
//! pure modules compute. Compiled for wasm32 only; everything it calls into is tested on
//! the host target.
//!
//! [`Verdict`]: crate::limiter::Verdict

mod abi;
mod http;
mod request;
mod root;
mod shared;

proxy_wasm::main! {{
    // Info and above: debug formatting would cost every request a host call.
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn proxy_wasm::traits::RootContext> {
        Box::new(root::Root::default())
    });
}}
