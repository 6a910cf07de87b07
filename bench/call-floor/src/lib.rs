//! The floor of global mode in any wasm filter, for `make bench`.
//!
//! Per request it does only what every filter in global mode must: read the descriptor's
//! header, make one `ShouldRateLimit` call over `http_call` (its bytes built once, not per
//! request), read the answer's `grpc-status` trailer and body, and resume the request.
//! Nothing is decoded or decided, and only the callbacks the call needs are exported (no
//! per-request state to create or delete). No wasm filter can do this job for less, so
//! what floodgate's global mode costs above this is floodgate's own work, and what this
//! costs above Envoy's native rate limit filter is the price of being wasm.
//!
//! The call is the one `make bench`'s global configuration makes: cluster `ratelimit`,
//! domain `bench`, descriptor `tenant` = `bench` (wrk sends `x-tenant-id: bench`), 1 s
//! timeout.

#[cfg(target_arch = "wasm32")]
mod filter {
    use std::cell::RefCell;
    use std::collections::HashMap;

    #[link(wasm_import_module = "env")]
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        fn proxy_http_call(
            upstream_data: *const u8,
            upstream_size: usize,
            headers_data: *const u8,
            headers_size: usize,
            body_data: *const u8,
            body_size: usize,
            trailers_data: *const u8,
            trailers_size: usize,
            timeout_ms: u32,
            return_token: *mut u32,
        ) -> u32;
        fn proxy_set_effective_context(context_id: u32) -> u32;
        fn proxy_continue_stream(stream_type: u32) -> u32;
        fn proxy_get_header_map_value(
            map_type: u32,
            key_data: *const u8,
            key_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
        fn proxy_get_buffer_bytes(
            buffer_type: u32,
            start: usize,
            max_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
    }

    /// ABI map types and buffer types used here.
    const REQUEST_HEADERS: u32 = 0;
    const CALL_RESPONSE_TRAILERS: u32 = 7;
    const CALL_RESPONSE_BODY: u32 = 4;

    const CLUSTER: &[u8] = b"ratelimit";

    /// What every call sends: built once per VM.
    struct Call {
        headers: Vec<u8>,
        body: Vec<u8>,
    }

    thread_local! {
        static CALL: Call = Call { headers: headers(), body: body() };
        /// Calls in flight: token -> the HTTP context waiting for it.
        static WAITING: RefCell<HashMap<u32, u32>> = RefCell::new(HashMap::new());
    }

    /// The ABI's header-pair encoding: count, then (key length, value length) pairs,
    /// then each key and value NUL-terminated.
    fn headers() -> Vec<u8> {
        let pairs: [(&str, &str); 6] = [
            (":method", "POST"),
            (
                ":path",
                "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            ),
            (":authority", "ratelimit"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", "1000m"),
        ];
        let mut out = (pairs.len() as u32).to_le_bytes().to_vec();
        for (k, v) in pairs {
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        }
        for (k, v) in pairs {
            out.extend_from_slice(k.as_bytes());
            out.push(0);
            out.extend_from_slice(v.as_bytes());
            out.push(0);
        }
        out
    }

    /// One gRPC frame holding RateLimitRequest{domain: "bench",
    /// descriptors: [{entries: [{key: "tenant", value: "bench"}]}], hits_addend: 1}.
    fn body() -> Vec<u8> {
        let field = |tag: u8, bytes: &[u8]| {
            let mut out = vec![tag, bytes.len() as u8];
            out.extend_from_slice(bytes);
            out
        };
        let entry = [field(0x0a, b"tenant"), field(0x12, b"bench")].concat();
        let descriptor = field(0x0a, &entry);
        let message = [
            field(0x0a, b"bench"),
            field(0x12, &descriptor),
            vec![0x18, 1],
        ]
        .concat();
        let mut frame = vec![0];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(&message);
        frame
    }

    #[no_mangle]
    pub extern "C" fn proxy_abi_version_0_2_1() {}

    #[no_mangle]
    pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
        let mut buffer = Vec::<u8>::with_capacity(size);
        let pointer = buffer.as_mut_ptr();
        std::mem::forget(buffer);
        pointer
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_request_headers(context_id: u32, _: usize, _: bool) -> u32 {
        read_header(REQUEST_HEADERS, b"x-tenant-id");
        let mut token = 0;
        // SAFETY: every pointer and length is of a live slice; the host writes one u32.
        let status = CALL.with(|call| unsafe {
            proxy_http_call(
                CLUSTER.as_ptr(),
                CLUSTER.len(),
                call.headers.as_ptr(),
                call.headers.len(),
                call.body.as_ptr(),
                call.body.len(),
                std::ptr::null(),
                0,
                1000,
                &mut token,
            )
        });
        if status != 0 {
            return 0;
        }
        WAITING.with(|w| w.borrow_mut().insert(token, context_id));
        1
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_http_call_response(
        _: u32,
        token: u32,
        _: usize,
        body_size: usize,
        _: usize,
    ) {
        read_header(CALL_RESPONSE_TRAILERS, b"grpc-status");
        let (mut data, mut size) = (std::ptr::null_mut(), 0);
        // SAFETY: the host writes a pointer and a length it allocated through
        // `proxy_on_memory_allocate`; `take` gives that memory back.
        unsafe {
            proxy_get_buffer_bytes(CALL_RESPONSE_BODY, 0, body_size, &mut data, &mut size);
            take(data, size);
        }
        if let Some(context_id) = WAITING.with(|w| w.borrow_mut().remove(&token)) {
            // SAFETY: plain host calls with integer arguments.
            unsafe {
                proxy_set_effective_context(context_id);
                proxy_continue_stream(0);
            }
        }
    }

    /// Reads one header's value as a filter would, and drops it: the cost is the read.
    fn read_header(map_type: u32, key: &[u8]) {
        let (mut data, mut size) = (std::ptr::null_mut(), 0);
        // SAFETY: `key` is a live slice; the host writes a pointer and a length it
        // allocated through `proxy_on_memory_allocate`, which `take` gives back.
        unsafe {
            proxy_get_header_map_value(map_type, key.as_ptr(), key.len(), &mut data, &mut size);
            take(data, size);
        }
    }

    /// Frees memory the host filled in through `proxy_on_memory_allocate`.
    ///
    /// # Safety
    /// `data` is null or came from `proxy_on_memory_allocate(size)`.
    unsafe fn take(data: *mut u8, size: usize) {
        if !data.is_null() {
            // SAFETY: the caller's promise: a `Vec` of exactly `size` bytes of capacity.
            drop(unsafe { Vec::from_raw_parts(data, size, size) });
        }
    }
}
