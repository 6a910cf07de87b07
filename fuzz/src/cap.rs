//! "No allocation over 64 MiB", enforced in-process: a global allocator that aborts on a
//! bigger request. An input that makes a parser reserve memory by a length it read is a
//! finding even when the machine could grant it.
//!
//! Why not libFuzzer's `-malloc_limit_mb`: it hooks `malloc` through the sanitizer runtime,
//! and the targets run without one (`-s none`, so that stable Rust can build them).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// The largest single allocation a target may make: 64 MiB.
pub const LIMIT: usize = 64 << 20;

/// The system allocator, with any allocation over [`LIMIT`] turned into an abort (which
/// libFuzzer reports as a crash and saves the input of).
#[derive(Debug)]
pub struct Capped;

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the only addition is a size check before it.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: same layout the caller gave us, under the same contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (through us).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: `ptr` and `layout` come from an earlier allocation through us.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Aborts with a message if `size` is over the limit. Writes without allocating: we are
/// inside the allocator.
fn check(size: usize) {
    if size <= LIMIT {
        return;
    }
    let mut digits = [0u8; 20];
    let mut n = size;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"floodgate-fuzz: an allocation of ");
    let _ = err.write_all(&digits[i..]);
    let _ = err.write_all(b" bytes, over the 64 MiB limit\n");
    std::process::abort();
}
