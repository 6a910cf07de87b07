//! The memory the host and the module hand each other: buffers the host fills in (the
//! ABI's encoding of header pairs is [`crate::request::header_map`]'s).
//!
//! Plain Rust with no host call, so it is compiled and tested on every target. The host
//! fills in memory it asked for through our `proxy_on_memory_allocate` export (see
//! [`allocate`]); [`take_buffer`] gives that memory back to Rust's ownership.

use std::mem::MaybeUninit;

/// Memory for the host to fill in: exactly `size` bytes, so that [`take_buffer`] can
/// rebuild it as a `Vec<u8>` of that capacity.
pub fn allocate(size: usize) -> *mut u8 {
    // A boxed slice has exactly `size` bytes of capacity, as `Vec::from_raw_parts` needs.
    let buffer: Box<[MaybeUninit<u8>]> = Box::new_uninit_slice(size);
    Box::into_raw(buffer).cast::<u8>()
}

/// Takes ownership of a buffer the host filled in (empty when it left the pointer null).
///
/// # Safety
/// `data` must be null or come from [`allocate`] with exactly `size`, its `size` bytes
/// written, and be owned by nobody else.
pub unsafe fn take_buffer(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() {
        Vec::new()
    } else {
        // SAFETY: guaranteed by the caller: `allocate(size)` made it and it is initialised.
        unsafe { Vec::from_raw_parts(data, size, size) }
    }
}

#[cfg(test)]
mod tests;
