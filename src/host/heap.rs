//! The module's memory allocator: power-of-two size classes, a free list each.
//!
//! Before it, Rust's `System` allocator on wasm32-wasip1 was wasi-libc's dlmalloc:
//! 11 KB of the module, and on every request tens of instructions per allocation walking
//! bins, splitting and coalescing chunks, its cost depending on the heap left by earlier
//! requests. The filter's allocations are few, small and short-lived (header values,
//! keys, a call's bytes), and a wasm module never gives memory back to the host anyway,
//! so this is enough: a block serves requests of one size class only (8 bytes to 2 GiB,
//! each class twice the last), a freed block goes on its class's list and is the next
//! one handed out, and a class with an empty list carves a fresh block from pages the
//! module grows its memory by. An allocation is a few loads and stores.
//!
//! # The bound on memory
//!
//! Blocks are never split or merged, so class `c` holds at most as many blocks as were
//! ever live in it at once. A block is less than twice the request it serves, and
//! carving aligns it to its own size (at most 64 KiB: alignment beyond a page is refused)
//! which wastes less than the block; so the memory the heap takes is less than four
//! times the sum, over the classes, of each class's peak of live bytes (plus the last
//! page it grew by), however requests come and go. dlmalloc's bound was the same peak
//! without the factor, and it too kept what it had.
//!
//! C's allocation functions are this heap's too (`heap/libc.rs`, for wasi-libc's `getenv`,
//! which std's panic hook reaches): so wasi-libc's dlmalloc is not linked at all, and
//! the Makefile drops the exports `#[no_mangle]` gives those functions (a proxy-wasm host
//! would prefer an exported `malloc` to `proxy_on_memory_allocate`).
//!
//! The logic is plain Rust over addresses, generic over where pages come from
//! ([`Pages`]), so that the host target's tests run it over an arena; the module's
//! `#[global_allocator]` is [`Allocator`], over `memory.grow`.

/// The size of a wasm page, the unit memory grows by.
pub const PAGE: usize = 65_536;

/// Where fresh memory comes from: `memory.grow` in the module, an arena in tests.
pub trait Pages {
    /// Grows memory by `pages` pages: the address the new pages start at (a multiple of
    /// [`PAGE`]), or `None` when there is no more memory.
    fn grow(&mut self, pages: usize) -> Option<usize>;
}

/// The smallest block, as a power of two: 8 bytes, room for a free list's link.
const MIN_SHIFT: u32 = 3;
/// The number of size classes: 8 bytes (2³) to 2 GiB (2³¹).
const CLASSES: usize = 29;

/// The size class of a request (`None`: too large, or aligned beyond a page).
pub fn class(size: usize, align: usize) -> Option<usize> {
    if align > PAGE {
        return None;
    }
    let want = size.max(align).max(1 << MIN_SHIFT);
    // The power of two at or above `want`.
    let shift = usize::BITS - (want - 1).leading_zeros();
    let class = (shift - MIN_SHIFT) as usize;
    (class < CLASSES).then_some(class)
}

/// The size of the blocks of a class.
pub fn block_size(class: usize) -> usize {
    1 << (class as u32 + MIN_SHIFT)
}

/// The heap: each class's free list and the part of the last pages not yet carved.
pub struct Heap<P> {
    pages: P,
    /// The first free block of each class (0: none); each free block's first word holds
    /// the address of the next.
    free: [usize; CLASSES],
    /// Where the next fresh block may start.
    next: usize,
    /// The end of the memory grown so far (of its last contiguous part).
    end: usize,
}

impl<P: Pages> Heap<P> {
    /// An empty heap that takes its memory from `pages`.
    pub const fn new(pages: P) -> Heap<P> {
        Heap {
            pages,
            free: [0; CLASSES],
            next: 0,
            end: 0,
        }
    }

    /// A block for `size` bytes aligned to `align` (a power of two), or 0 when there
    /// is no memory left for it.
    ///
    /// # Safety
    /// The memory [`Pages`] hands out must be this heap's alone, and every block on a
    /// free list one that [`Heap::free`] was given.
    pub unsafe fn alloc(&mut self, size: usize, align: usize) -> usize {
        let Some(class) = class(size, align) else {
            return 0;
        };
        let head = self.free[class];
        if head == 0 {
            return self.carve(class);
        }
        // SAFETY: a free block of this class, whose first word holds the next one's
        // address (written by `free`); blocks are at least a word and word-aligned.
        self.free[class] = unsafe { (head as *const usize).read() };
        head
    }

    /// Gives back a block from [`Heap::alloc`] with the same `size` and `align`.
    ///
    /// # Safety
    /// `block` must come from `alloc(size, align)` on this heap and not be used again.
    pub unsafe fn free(&mut self, block: usize, size: usize, align: usize) {
        if let Some(class) = class(size, align) {
            // SAFETY: the block is ours again and at least a word, word-aligned.
            unsafe { (block as *mut usize).write(self.free[class]) };
            self.free[class] = block;
        }
    }

    /// Moves a block to one for `new_size` bytes, or keeps it when its class has room:
    /// the new block's address (0, the old block untouched, when there is no memory).
    ///
    /// # Safety
    /// As [`Heap::free`] for `block`, `size` and `align`.
    pub unsafe fn realloc(
        &mut self,
        block: usize,
        size: usize,
        align: usize,
        new_size: usize,
    ) -> usize {
        if class(size, align) == class(new_size, align) {
            return block;
        }
        // SAFETY: as this function's.
        let moved = unsafe { self.alloc(new_size, align) };
        if moved != 0 {
            // SAFETY: both blocks hold at least the bytes copied and do not overlap
            // (the old one is still allocated).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    block as *const u8,
                    moved as *mut u8,
                    size.min(new_size),
                );
                self.free(block, size, align);
            }
        }
        moved
    }

    /// A fresh block of `class`, growing memory when the pages left are too few. Kept
    /// out of line: it runs only until the heap has grown to the module's working set,
    /// and inlined into every allocation it would cost the module kilobytes.
    #[cold]
    #[inline(never)]
    fn carve(&mut self, class: usize) -> usize {
        let size = block_size(class);
        let align = size.min(PAGE);
        loop {
            // Checked: near the top of a 4 GiB memory an unchecked sum would wrap to a
            // low address that is not the heap's.
            let fits = self
                .next
                .checked_next_multiple_of(align)
                .and_then(|start| Some((start, start.checked_add(size)?)))
                .filter(|&(_, end)| end <= self.end);
            if let Some((start, end)) = fits {
                self.next = end;
                return start;
            }
            let pages = size.div_ceil(PAGE);
            let Some(base) = self.pages.grow(pages) else {
                return 0;
            };
            if base != self.end {
                // Someone else grew memory since (or this is the first growth): the
                // tail of the old pages is left, the new ones start afresh.
                self.next = base;
            }
            // Saturating: the last page of a 4 GiB memory ends past usize::MAX.
            self.end = base.saturating_add(pages * PAGE);
        }
    }
}

/// The module's pages: `memory.grow` on memory 0.
#[cfg(target_arch = "wasm32")]
pub struct WasmPages;

#[cfg(target_arch = "wasm32")]
impl Pages for WasmPages {
    fn grow(&mut self, pages: usize) -> Option<usize> {
        match core::arch::wasm32::memory_grow(0, pages) {
            usize::MAX => None,
            old => Some(old * PAGE),
        }
    }
}

/// The `#[global_allocator]` of the module (see `lib.rs`): a [`Heap`] over
/// `memory.grow`.
#[cfg(target_arch = "wasm32")]
pub struct Allocator(std::cell::UnsafeCell<Heap<WasmPages>>);

#[cfg(target_arch = "wasm32")]
impl Allocator {
    /// The allocator, its heap empty until the first allocation.
    pub const fn new() -> Allocator {
        Allocator(std::cell::UnsafeCell::new(Heap::new(WasmPages)))
    }
}

// SAFETY: a proxy-wasm module runs on one thread (wasm32-wasip1 has no threads), so the
// heap is never used from two places at once; no method calls back into the allocator.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for Allocator {}

// SAFETY: blocks are at least `layout.size()` bytes, aligned to `layout.align()` (class
// sizes are powers of two at or above both, and carving aligns each block to its size),
// and a block is handed out again only after `dealloc` gave it back.
#[cfg(target_arch = "wasm32")]
unsafe impl std::alloc::GlobalAlloc for Allocator {
    // Each of these out of line: inlined at every allocation and drop they would cost
    // the module tens of kilobytes, for a call's few instructions.
    #[inline(never)]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: single-threaded, no reentrance (see the Sync impl); the pages
        // memory.grow hands the heap are its alone (C's malloc is this heap too).
        unsafe { (*self.0.get()).alloc(layout.size(), layout.align()) as *mut u8 }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as `alloc`; `ptr` came from it with this layout (GlobalAlloc's contract).
        unsafe { (*self.0.get()).free(ptr as usize, layout.size(), layout.align()) }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`.
        unsafe {
            (*self.0.get()).realloc(ptr as usize, layout.size(), layout.align(), new_size)
                as *mut u8
        }
    }
}

mod libc;

#[cfg(test)]
mod tests;
