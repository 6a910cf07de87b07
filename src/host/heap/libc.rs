//! C's allocation functions (`malloc`, `calloc`, `realloc`, `free`, `posix_memalign`,
//! `aligned_alloc`), on the module's heap.
//!
//! The only C in the module is wasi-libc, and the only allocating C it runs is `getenv`
//! building C's environment, which std's panic hook reaches reading `RUST_BACKTRACE`.
//! Left to wasi-libc, that one path would link its dlmalloc (about 8 KB of the module);
//! defined here, the linker takes these instead (all six: dlmalloc defines them in one
//! object, and std refers to `posix_memalign`). A C block carries its size and
//! alignment in a header, since `free` is not told them.
//!
//! `#[no_mangle]` exports these from the module too, and a proxy-wasm host would use an
//! exported `malloc` instead of `proxy_on_memory_allocate` for the buffers it fills in
//! (which the host layer frees with a Rust layout); so the Makefile's `wasm` rule drops
//! these exports after the link (`wasm-metadce`), and `tests/tests/wasm_exports.rs`
//! checks that they are gone.

use std::alloc::Layout;

/// The alignment C's `malloc` promises (`max_align_t`), and the room before each C
/// pointer for its header: the size asked for, then the offset back to the block.
const HEADER: usize = 16;

/// The layout of a block with room for `size` bytes after its `pad` (the alignment,
/// at least [`HEADER`], a power of two).
fn layout(size: usize, pad: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(pad)?, pad).ok()
}

/// Allocates a C block of `size` bytes aligned to `align` (null when it cannot).
fn alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    let pad = align.max(HEADER);
    let Some(layout) = layout(size, pad) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (the pad).
    let block = unsafe {
        if zeroed {
            std::alloc::alloc_zeroed(layout)
        } else {
            std::alloc::alloc(layout)
        }
    };
    // SAFETY: the block is null or `layout`'s.
    unsafe { finish(block, size, pad) }
}

/// The C pointer into a block fresh from the heap (null stays null), its header written.
///
/// # Safety
/// `block` is null or a block of `layout(size, pad)`.
unsafe fn finish(block: *mut u8, size: usize, pad: usize) -> *mut u8 {
    if block.is_null() {
        return block;
    }
    // SAFETY: the block's first `pad` bytes (at least HEADER, the header's two words in
    // its last HEADER bytes, word-aligned) are ours.
    unsafe {
        let ptr = block.add(pad);
        let header = ptr.sub(HEADER) as *mut usize;
        header.write(size);
        header.add(1).write(pad);
        ptr
    }
}

/// The block, size and pad behind a C pointer.
///
/// # Safety
/// `ptr` came from this module's C allocation functions and is still live.
unsafe fn start(ptr: *mut u8) -> (*mut u8, usize, usize) {
    // SAFETY: `finish` wrote the header HEADER bytes before the pointer it returned.
    unsafe {
        let header = ptr.sub(HEADER) as *const usize;
        let (size, pad) = (header.read(), header.add(1).read());
        (ptr.sub(pad), size, pad)
    }
}

/// A C `realloc` of `ptr` (null or live, from these functions) to `size` bytes.
///
/// # Safety
/// `ptr` is null or a live pointer from this module's C allocation functions.
unsafe fn resize(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        return alloc(size, HEADER, false);
    }
    // SAFETY: `ptr` is live (this function's contract), so its header is intact and its
    // block was allocated with `layout(old, pad)`, which the heap's realloc is given.
    unsafe {
        let (block, old, pad) = start(ptr);
        let (Some(old), Some(new)) = (layout(old, pad), layout(size, pad)) else {
            return std::ptr::null_mut();
        };
        finish(std::alloc::realloc(block, old, new.size()), size, pad)
    }
}

/// A C `free` of `ptr` (null or live, from these functions).
///
/// # Safety
/// `ptr` is null or a live pointer from this module's C allocation functions.
unsafe fn release(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: as `resize`.
    unsafe {
        let (block, size, pad) = start(ptr);
        if let Some(layout) = layout(size, pad) {
            std::alloc::dealloc(block, layout);
        }
    }
}

/// A C `posix_memalign`: 0 and the block in `out`, or C's error number.
///
/// # Safety
/// `out` is valid for a pointer's write.
unsafe fn memalign(out: *mut *mut u8, align: usize, size: usize) -> i32 {
    /// C's EINVAL and ENOMEM on WASI.
    const EINVAL: i32 = 28;
    const ENOMEM: i32 = 48;
    if !align.is_power_of_two() || align % std::mem::size_of::<usize>() != 0 {
        return EINVAL;
    }
    let ptr = alloc(size, align, false);
    if ptr.is_null() {
        return ENOMEM;
    }
    // SAFETY: this function's contract.
    unsafe { out.write(ptr) };
    0
}

/// The exported names, on wasm32 only: on the host target they would replace the C
/// library's own allocator for the tests.
#[cfg(target_arch = "wasm32")]
mod exports {
    use super::{alloc, HEADER};

    /// C's `malloc`, for wasi-libc.
    #[no_mangle]
    pub extern "C" fn malloc(size: usize) -> *mut u8 {
        alloc(size, HEADER, false)
    }

    /// C's `calloc`, for wasi-libc.
    #[no_mangle]
    pub extern "C" fn calloc(count: usize, size: usize) -> *mut u8 {
        match count.checked_mul(size) {
            Some(total) => alloc(total, HEADER, true),
            None => std::ptr::null_mut(),
        }
    }

    /// C's `aligned_alloc`, for wasi-libc and std.
    #[no_mangle]
    pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut u8 {
        if !align.is_power_of_two() {
            return std::ptr::null_mut();
        }
        alloc(size, align, false)
    }

    /// C's `posix_memalign`, for std.
    ///
    /// # Safety
    /// `out` is valid for a pointer's write.
    #[no_mangle]
    pub unsafe extern "C" fn posix_memalign(out: *mut *mut u8, align: usize, size: usize) -> i32 {
        // SAFETY: this function's contract.
        unsafe { super::memalign(out, align, size) }
    }

    /// C's `realloc`, for wasi-libc.
    ///
    /// # Safety
    /// `ptr` is null or a live pointer from this module's C allocation functions.
    #[no_mangle]
    pub unsafe extern "C" fn realloc(ptr: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: this function's contract.
        unsafe { super::resize(ptr, size) }
    }

    /// C's `free`, for wasi-libc.
    ///
    /// # Safety
    /// `ptr` is null or a live pointer from this module's C allocation functions.
    #[no_mangle]
    pub unsafe extern "C" fn free(ptr: *mut u8) {
        // SAFETY: this function's contract.
        unsafe { super::release(ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills `size` bytes at `ptr` with a pattern, and checks they hold it.
    unsafe fn fill_and_check(ptr: *mut u8, size: usize, seed: u8) {
        for i in 0..size {
            unsafe { ptr.add(i).write(seed.wrapping_add(i as u8)) };
        }
        for i in 0..size {
            assert_eq!(unsafe { ptr.add(i).read() }, seed.wrapping_add(i as u8));
        }
    }

    #[test]
    fn blocks_keep_their_alignment_size_and_contents_through_realloc_and_free() {
        for align in [HEADER, 32, 64, 4096] {
            for size in [0, 1, 15, 16, 17, 100, 5000] {
                let ptr = alloc(size, align, false);
                assert!(!ptr.is_null());
                assert_eq!(ptr as usize % align, 0, "align {align} size {size}");
                unsafe {
                    assert_eq!(start(ptr).1, size);
                    fill_and_check(ptr, size, 7);
                    let grown = resize(ptr, size * 3 + 1);
                    assert_eq!(grown as usize % align, 0);
                    for i in 0..size {
                        assert_eq!(grown.add(i).read(), 7u8.wrapping_add(i as u8));
                    }
                    fill_and_check(grown, size * 3 + 1, 9);
                    let shrunk = resize(grown, size / 2);
                    for i in 0..size / 2 {
                        assert_eq!(shrunk.add(i).read(), 9u8.wrapping_add(i as u8));
                    }
                    release(shrunk);
                }
            }
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_and_null_is_handled() {
        let ptr = alloc(300, HEADER, true);
        assert!((0..300).all(|i| unsafe { ptr.add(i).read() } == 0));
        unsafe {
            release(ptr);
            release(std::ptr::null_mut());
            let fresh = resize(std::ptr::null_mut(), 24);
            assert!(!fresh.is_null());
            assert_eq!(start(fresh).1, 24);
            release(fresh);
        }
    }

    #[test]
    fn impossible_sizes_and_alignments_are_refused_not_wrapped() {
        assert!(alloc(usize::MAX, HEADER, false).is_null());
        assert!(alloc(usize::MAX - 8, HEADER, false).is_null());
        let mut out = std::ptr::null_mut();
        unsafe {
            assert_eq!(memalign(&mut out, 3, 8), 28);
            assert_eq!(memalign(&mut out, 2, 8), 28);
            assert_eq!(memalign(&mut out, 64, usize::MAX), 48);
            assert!(out.is_null());
            assert_eq!(memalign(&mut out, 64, 10), 0);
            assert_eq!(out as usize % 64, 0);
            release(out);
        }
    }
}
