//! The fairer floor of local mode, for `make bench`: read one request header, do nothing
//! with it, and export nothing else a request could enter the VM for.
//!
//! The SDK no-op (`bench/noop-filter`) does the same work, but the `proxy-wasm` crate
//! exports every `proxy_on_*` callback, and Envoy enters the VM for each one it finds
//! (context create, response headers, log, done, delete...) whether the module does
//! anything there or not. floodgate exports only the callbacks it uses, so part of what
//! it saves against the SDK no-op is those entries, not its own work. This module speaks
//! the ABI directly, like `bench/call-floor`, and exports only what Envoy needs to load it
//! (the ABI version, the allocator the host writes values through) plus
//! `proxy_on_request_headers`: what floodgate costs above it is floodgate's own work and
//! the callbacks floodgate needs beyond this one.

#[cfg(target_arch = "wasm32")]
mod filter {
    #[link(wasm_import_module = "env")]
    extern "C" {
        fn proxy_get_header_map_value(
            map_type: u32,
            key_data: *const u8,
            key_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
    }

    /// The ABI's map type of the request's headers.
    const REQUEST_HEADERS: u32 = 0;

    /// The ABI's "continue" action.
    const CONTINUE: u32 = 0;

    /// The header the SDK no-op reads (wrk sends `x-tenant-id: bench`).
    const HEADER: &[u8] = b"x-tenant-id";

    /// Tells Envoy which ABI the module speaks; without it the module does not load.
    #[no_mangle]
    pub extern "C" fn proxy_abi_version_0_2_1() {}

    /// Where the host puts the header value it hands back.
    #[no_mangle]
    pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
        let mut buffer = Vec::<u8>::with_capacity(size);
        let pointer = buffer.as_mut_ptr();
        std::mem::forget(buffer);
        pointer
    }

    /// The one callback a request enters the VM for: read the header, continue.
    #[no_mangle]
    pub extern "C" fn proxy_on_request_headers(_: u32, _: usize, _: bool) -> u32 {
        let (mut data, mut size) = (std::ptr::null_mut(), 0);
        // SAFETY: `HEADER` is a live slice; the host writes a pointer and a length it
        // allocated through `proxy_on_memory_allocate`, given back below.
        unsafe {
            proxy_get_header_map_value(
                REQUEST_HEADERS,
                HEADER.as_ptr(),
                HEADER.len(),
                &mut data,
                &mut size,
            );
            if !data.is_null() {
                // SAFETY: a `Vec` of exactly `size` bytes of capacity, from
                // `proxy_on_memory_allocate(size)`; the cost measured is the read.
                drop(Vec::from_raw_parts(data, size, size));
            }
        }
        CONTINUE
    }
}
