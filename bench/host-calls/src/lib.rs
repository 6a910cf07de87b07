//! The host-call calibration module, for `make bench`: each request makes one kind of
//! proxy-wasm host call N times and nothing else, so that the same module configured
//! with no calls, run beside it, prices that kind alone.
//!
//! The cost model (`bench/costs`) sees one average per host call, because floodgate's
//! configurations always make the kinds together (a local request reads the header map,
//! the clock and shared data, and writes it back). The plugin configuration names the
//! kind and the count, `"<kind> <n>"`: `none`, `header` (a request header that is not
//! there: no value comes back, so no allocation is entered), `value` (the request's
//! `x-tenant-id`, which every bench request carries: the call and the allocation it
//! enters), `property` (the same header through `proxy_get_property`'s
//! `request.headers.x-tenant-id`, which Envoy answers with every value of a repeated
//! header joined by commas), `pairs` (the whole header map: the call and the allocation
//! it enters), `clock`, `shared-get` (a key that is not
//! there) or `shared-set` (16 bytes, unconditionally). `reply` is the reject floor: each
//! request is answered 429 by a local reply (`proxy_send_local_response`, the body native
//! `local_ratelimit` sends, no header), the least any wasm filter does to reject, to set
//! beside native `local_ratelimit` rejecting.
//!
//! `limit` and `limit-reject` are the floors of a shared-data limit: what any filter
//! keeping one limit across an Envoy's workers must ask the host for, with no logic
//! around it. `limit` reads the header map (the descriptor's header, seen whole so that a
//! repeated one is seen), the clock and the bucket's key, and writes the key back with
//! the read's compare-and-swap token (the clock as the new value): what an admitted
//! request costs. `limit-reject` makes the same three reads, then answers 429 with
//! floodgate's default reply (its body and the two draft-03 fields a bucket that never
//! refills has) and writes nothing: what a rejected request costs. Beside floodgate's
//! local paths, they tell its own work from what the ABI makes every such filter pay.
//!
//! Like `bench/raw-noop` it exports only what Envoy needs to load and configure it, and
//! `proxy_on_request_headers`.

// Found beside this file also when `bench/callback-floor` compiles it in by path.
#[path = "plan.rs"]
mod plan;
pub use plan::Plan;

#[cfg(target_arch = "wasm32")]
mod filter {
    use super::Plan;
    use std::cell::Cell;

    #[link(wasm_import_module = "env")]
    extern "C" {
        fn proxy_get_buffer_bytes(
            buffer_type: u32,
            start: usize,
            max_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
        fn proxy_get_header_map_value(
            map_type: u32,
            key_data: *const u8,
            key_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
        fn proxy_get_header_map_pairs(
            map_type: u32,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
        fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
        fn proxy_get_property(
            path_data: *const u8,
            path_size: usize,
            return_data: *mut *mut u8,
            return_size: *mut usize,
        ) -> u32;
        fn proxy_get_shared_data(
            key_data: *const u8,
            key_size: usize,
            return_value_data: *mut *mut u8,
            return_value_size: *mut usize,
            return_cas: *mut u32,
        ) -> u32;
        fn proxy_set_shared_data(
            key_data: *const u8,
            key_size: usize,
            value_data: *const u8,
            value_size: usize,
            cas: u32,
        ) -> u32;
        fn proxy_send_local_response(
            status_code: u32,
            status_code_details_data: *const u8,
            status_code_details_size: usize,
            body_data: *const u8,
            body_size: usize,
            additional_headers_map_data: *const u8,
            additional_headers_size: usize,
            grpc_status: i32,
        ) -> u32;
    }

    /// The ABI's buffer type of the plugin configuration.
    const PLUGIN_CONFIGURATION: u32 = 7;
    /// The ABI's map type of the request's headers.
    const REQUEST_HEADERS: u32 = 0;
    /// The ABI's "continue" action.
    const CONTINUE: u32 = 0;
    /// The ABI's "stop iteration" action: the local reply answers the request.
    const STOP: u32 = 1;
    /// The local reply's details (Envoy's response code details: no spaces).
    const REPLY_DETAILS: &[u8] = b"reject_floor";
    /// The body native `local_ratelimit` answers with.
    const REPLY_BODY: &[u8] = b"local_rate_limited";
    /// An empty header list in the ABI's encoding (a count of 0).
    const NO_HEADERS: [u8; 4] = [0; 4];
    /// A header no request of the bench carries.
    const ABSENT_HEADER: &[u8] = b"x-floodgate-calibration";
    /// The header every bench request carries (wrk's `-H`).
    const PRESENT_HEADER: &[u8] = b"x-tenant-id";
    /// The same header as a property path (its parts separated by NUL bytes).
    const PRESENT_PROPERTY: &[u8] = b"request\0headers\0x-tenant-id";
    /// Its value in every bench request.
    const PRESENT_VALUE: &[u8] = b"bench";
    /// The shared-data key the `shared-set` plan writes and no plan reads.
    const WRITTEN_KEY: &[u8] = b"floodgate-calibration.written";
    /// The shared-data key the `shared-get` plan reads and nothing writes.
    const ABSENT_KEY: &[u8] = b"floodgate-calibration.absent";
    /// The limit floors' bucket.
    const BUCKET_KEY: &[u8] = b"floodgate-calibration.bucket";
    /// The limit reject floor's details, as long as floodgate's for a rule named `bench`.
    const LIMIT_DETAILS: &[u8] = b"floodgate_rate_limited{bench}";
    /// floodgate's default rejection body.
    const LIMIT_BODY: &[u8] = b"rate limited\n";
    /// floodgate's draft-03 fields for a bucket of 1 that never refills, in the ABI's
    /// encoding: a count, each (name, value) length, then each name and value with a NUL.
    const LIMIT_FIELDS: &[u8] = b"\x02\0\0\0\x11\0\0\0\x01\0\0\0\x15\0\0\0\x01\0\0\0\
        x-ratelimit-limit\x001\x00x-ratelimit-remaining\x000\x00";

    thread_local! {
        static PLAN: Cell<Plan> = const { Cell::new(Plan::None) };
    }

    /// Takes back a value the host allocated through `proxy_on_memory_allocate`.
    ///
    /// # Safety
    /// `data` is null or a `Vec` of exactly `size` bytes of capacity from
    /// `proxy_on_memory_allocate(size)`.
    unsafe fn take(data: *mut u8, size: usize) -> Vec<u8> {
        if data.is_null() {
            Vec::new()
        } else {
            // SAFETY: as the caller promises.
            unsafe { Vec::from_raw_parts(data, size, size) }
        }
    }

    /// Tells Envoy which ABI the module speaks; without it the module does not load.
    #[no_mangle]
    pub extern "C" fn proxy_abi_version_0_2_1() {}

    /// Where the host puts the values it hands back.
    #[no_mangle]
    pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
        let mut buffer = Vec::<u8>::with_capacity(size);
        let pointer = buffer.as_mut_ptr();
        std::mem::forget(buffer);
        pointer
    }

    /// The plugin configuration names the plan.
    #[no_mangle]
    pub extern "C" fn proxy_on_configure(_: u32, size: usize) -> bool {
        let (mut data, mut len) = (std::ptr::null_mut(), 0);
        // SAFETY: the host writes a pointer and a length it allocated through
        // `proxy_on_memory_allocate`, taken back at once.
        let text = unsafe {
            proxy_get_buffer_bytes(PLUGIN_CONFIGURATION, 0, size, &mut data, &mut len);
            take(data, len)
        };
        PLAN.with(|p| p.set(Plan::parse(&text)));
        true
    }

    /// The one callback a request enters the VM for: the plan's calls, then continue.
    #[no_mangle]
    pub extern "C" fn proxy_on_request_headers(_: u32, _: usize, _: bool) -> u32 {
        let (mut data, mut size) = (std::ptr::null_mut(), 0);
        let mut cas = 0;
        let mut now = 0;
        let value = [7u8; 16];
        // SAFETY: every pointer is to a live local or constant; values the host hands
        // back come through `proxy_on_memory_allocate` and are taken back by `take`.
        unsafe {
            match PLAN.with(Cell::get) {
                Plan::None => {}
                Plan::Header(n) => (0..n).for_each(|_| {
                    proxy_get_header_map_value(
                        REQUEST_HEADERS,
                        ABSENT_HEADER.as_ptr(),
                        ABSENT_HEADER.len(),
                        &mut data,
                        &mut size,
                    );
                    drop(take(data, size));
                    data = std::ptr::null_mut();
                }),
                Plan::Value(n) => {
                    for _ in 0..n {
                        proxy_get_header_map_value(
                            REQUEST_HEADERS,
                            PRESENT_HEADER.as_ptr(),
                            PRESENT_HEADER.len(),
                            &mut data,
                            &mut size,
                        );
                        if take(data, size) != PRESENT_VALUE {
                            return wrong_value();
                        }
                        data = std::ptr::null_mut();
                    }
                }
                Plan::Property(n) => {
                    for _ in 0..n {
                        proxy_get_property(
                            PRESENT_PROPERTY.as_ptr(),
                            PRESENT_PROPERTY.len(),
                            &mut data,
                            &mut size,
                        );
                        if take(data, size) != PRESENT_VALUE {
                            return wrong_value();
                        }
                        data = std::ptr::null_mut();
                    }
                }
                Plan::Pairs(n) => (0..n).for_each(|_| {
                    proxy_get_header_map_pairs(REQUEST_HEADERS, &mut data, &mut size);
                    drop(take(data, size));
                    data = std::ptr::null_mut();
                }),
                Plan::Clock(n) => (0..n).for_each(|_| {
                    proxy_get_current_time_nanoseconds(&mut now);
                }),
                Plan::SharedGet(n) => (0..n).for_each(|_| {
                    proxy_get_shared_data(
                        ABSENT_KEY.as_ptr(),
                        ABSENT_KEY.len(),
                        &mut data,
                        &mut size,
                        &mut cas,
                    );
                    drop(take(data, size));
                    data = std::ptr::null_mut();
                }),
                Plan::Reply => {
                    proxy_send_local_response(
                        429,
                        REPLY_DETAILS.as_ptr(),
                        REPLY_DETAILS.len(),
                        REPLY_BODY.as_ptr(),
                        REPLY_BODY.len(),
                        NO_HEADERS.as_ptr(),
                        NO_HEADERS.len(),
                        -1,
                    );
                    return STOP;
                }
                Plan::Limit | Plan::LimitReject => {
                    proxy_get_header_map_pairs(REQUEST_HEADERS, &mut data, &mut size);
                    drop(take(data, size));
                    proxy_get_current_time_nanoseconds(&mut now);
                    data = std::ptr::null_mut();
                    size = 0;
                    proxy_get_shared_data(
                        BUCKET_KEY.as_ptr(),
                        BUCKET_KEY.len(),
                        &mut data,
                        &mut size,
                        &mut cas,
                    );
                    let found = !data.is_null();
                    drop(take(data, size));
                    // The decision's new state: the clock, in a bucket-sized value.
                    let mut state = [0u8; 16];
                    state[..8].copy_from_slice(&now.to_le_bytes());
                    // A rejecting bucket is written once, when the first request finds no
                    // key (no token: an unconditional write), so every later one reads a
                    // value as floodgate's rejected requests do.
                    if PLAN.with(Cell::get) == Plan::LimitReject && found {
                        proxy_send_local_response(
                            429,
                            LIMIT_DETAILS.as_ptr(),
                            LIMIT_DETAILS.len(),
                            LIMIT_BODY.as_ptr(),
                            LIMIT_BODY.len(),
                            LIMIT_FIELDS.as_ptr(),
                            LIMIT_FIELDS.len(),
                            -1,
                        );
                        return STOP;
                    }
                    // The first request finds no key and no token (0): an unconditional
                    // write.
                    proxy_set_shared_data(
                        BUCKET_KEY.as_ptr(),
                        BUCKET_KEY.len(),
                        state.as_ptr(),
                        state.len(),
                        cas,
                    );
                }
                Plan::SharedSet(n) => (0..n).for_each(|_| {
                    proxy_set_shared_data(
                        WRITTEN_KEY.as_ptr(),
                        WRITTEN_KEY.len(),
                        value.as_ptr(),
                        value.len(),
                        0,
                    );
                }),
            }
        }
        std::hint::black_box(now);
        CONTINUE
    }

    /// A read of the present header came back other than as sent: answered 500, which
    /// the bench's warm-up refuses in a row that must admit every request.
    #[cold]
    #[inline(never)]
    fn wrong_value() -> u32 {
        // SAFETY: pointers to constants.
        unsafe {
            proxy_send_local_response(
                500,
                REPLY_DETAILS.as_ptr(),
                REPLY_DETAILS.len(),
                REPLY_BODY.as_ptr(),
                REPLY_BODY.len(),
                NO_HEADERS.as_ptr(),
                NO_HEADERS.len(),
                -1,
            )
        };
        STOP
    }
}
