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

/// C's `realloc`, for wasi-libc.
///
/// # Safety
/// `ptr` is null or a live pointer from this module's C allocation functions.
#[no_mangle]
pub unsafe extern "C" fn realloc(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        return malloc(size);
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

/// C's `free`, for wasi-libc.
///
/// # Safety
/// `ptr` is null or a live pointer from this module's C allocation functions.
#[no_mangle]
pub unsafe extern "C" fn free(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: as `realloc`.
    unsafe {
        let (block, size, pad) = start(ptr);
        if let Some(layout) = layout(size, pad) {
            std::alloc::dealloc(block, layout);
        }
    }
}
