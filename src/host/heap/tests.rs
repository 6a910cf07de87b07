use super::*;
use proptest::prelude::*;

/// Pages from a boxed arena, page-aligned; `gap` pages are skipped before every other
/// growth, as when something else grows memory in between.
struct Arena {
    memory: Vec<u8>,
    used: usize,
    gap: bool,
    grown: usize,
}

impl Arena {
    fn new(pages: usize, gap: bool) -> Arena {
        Arena {
            memory: vec![0; (pages + 1) * PAGE],
            used: 0,
            gap,
            grown: 0,
        }
    }
    fn base(&self) -> usize {
        (self.memory.as_ptr() as usize).next_multiple_of(PAGE)
    }
}

impl Pages for Arena {
    fn grow(&mut self, pages: usize) -> Option<usize> {
        if self.gap && self.grown % 2 == 1 {
            self.used += PAGE;
        }
        self.grown += 1;
        let start = self.base() + self.used;
        if self.used + pages * PAGE > self.memory.len() - PAGE {
            return None;
        }
        self.used += pages * PAGE;
        Some(start)
    }
}

#[test]
fn classes_are_the_powers_of_two_at_or_above_size_and_align() {
    assert_eq!(class(1, 1), Some(0));
    assert_eq!(class(8, 8), Some(0));
    assert_eq!(class(9, 1), Some(1));
    assert_eq!(class(16, 1), Some(1));
    assert_eq!(class(4, 32), Some(2));
    assert_eq!(class(100, 4), Some(4));
    assert_eq!(block_size(4), 128);
    assert_eq!(class(1 << 31, 1), Some(CLASSES - 1));
    assert_eq!(class((1 << 31) + 1, 1), None);
    assert_eq!(class(8, 2 * PAGE), None);
}

#[test]
fn a_freed_block_is_the_next_one_of_its_class() {
    let mut heap = Heap::new(Arena::new(4, false));
    // SAFETY: the arena is the heap's alone; blocks are freed once with their layout.
    unsafe {
        let a = heap.alloc(24, 8);
        let b = heap.alloc(24, 8);
        assert_ne!(a, b);
        heap.free(a, 24, 8);
        assert_eq!(heap.alloc(32, 4), a, "same class");
        assert_ne!(heap.alloc(24, 8), b);
        heap.free(b, 24, 8);
        assert_ne!(heap.alloc(8, 8), b, "another class");
    }
}

#[test]
fn realloc_keeps_a_block_whose_class_has_room_and_moves_the_bytes_otherwise() {
    let mut heap = Heap::new(Arena::new(4, false));
    // SAFETY: as above; the blocks hold the bytes written and read.
    unsafe {
        let a = heap.alloc(5, 1);
        std::ptr::copy_nonoverlapping(b"hello".as_ptr(), a as *mut u8, 5);
        assert_eq!(heap.realloc(a, 5, 1, 8), a);
        let b = heap.realloc(a, 8, 1, 100);
        assert_ne!(b, a);
        assert_eq!(std::slice::from_raw_parts(b as *const u8, 5), b"hello");
        assert_eq!(heap.alloc(8, 1), a, "the old block went back to its list");
        let c = heap.realloc(b, 100, 1, 3);
        assert_eq!(std::slice::from_raw_parts(c as *const u8, 3), b"hel");
    }
}

#[test]
fn no_memory_is_an_error_not_a_block() {
    let mut heap = Heap::new(Arena::new(2, false));
    // SAFETY: as above.
    unsafe {
        assert_ne!(heap.alloc(PAGE, 1), 0);
        assert_ne!(heap.alloc(PAGE, 1), 0);
        assert_eq!(heap.alloc(PAGE, 1), 0);
        assert_eq!(heap.alloc(1 << 31, 1), 0);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc { size: usize, align_shift: u32 },
    Free(usize),
    Realloc(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..3000, 0u32..7).prop_map(|(size, align_shift)| Op::Alloc { size, align_shift }),
        (0usize..64).prop_map(Op::Free),
        (0usize..64, 1usize..3000).prop_map(|(i, n)| Op::Realloc(i, n)),
    ]
}

proptest! {
    /// Under any mix, live blocks are aligned, never overlap, keep their bytes, and the
    /// heap takes less than four times the sum of each class's peak live bytes plus a page
    /// per growth with a gap.
    #[test]
    fn blocks_are_aligned_disjoint_and_bounded(ops in proptest::collection::vec(op(), 1..400), gap in any::<bool>()) {
        let mut heap = Heap::new(Arena::new(256, gap));
        // (address, size, align, fill byte)
        let mut live: Vec<(usize, usize, usize, u8)> = Vec::new();
        let mut peak = [0usize; CLASSES];
        let mut now = [0usize; CLASSES];
        for (n, op) in ops.into_iter().enumerate() {
            let fill = n as u8;
            // SAFETY: the arena is the heap's; every block is freed once with its layout
            // and read or written only within its size while live.
            unsafe {
                match op {
                    Op::Alloc { size, align_shift } => {
                        let align = 1 << align_shift;
                        let a = heap.alloc(size, align);
                        prop_assert_ne!(a, 0);
                        prop_assert_eq!(a % align, 0);
                        std::ptr::write_bytes(a as *mut u8, fill, size);
                        let c = class(size, align).unwrap();
                        now[c] += size;
                        peak[c] = peak[c].max(now[c]);
                        live.push((a, size, align, fill));
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (a, size, align, _) = live.swap_remove(i % live.len());
                        now[class(size, align).unwrap()] -= size;
                        heap.free(a, size, align);
                    }
                    Op::Realloc(i, new_size) if !live.is_empty() => {
                        let i = i % live.len();
                        let (a, size, align, f) = live[i];
                        let b = heap.realloc(a, size, align, new_size);
                        prop_assert_ne!(b, 0);
                        let kept = std::slice::from_raw_parts(b as *const u8, size.min(new_size));
                        prop_assert!(kept.iter().all(|&x| x == f));
                        std::ptr::write_bytes(b as *mut u8, f, new_size);
                        now[class(size, align).unwrap()] -= size;
                        let c = class(new_size, align).unwrap();
                        now[c] += new_size;
                        peak[c] = peak[c].max(now[c]);
                        live[i] = (b, new_size, align, f);
                    }
                    _ => {}
                }
            }
            let mut spans: Vec<(usize, usize)> = live.iter().map(|&(a, s, _, _)| (a, a + s)).collect();
            spans.sort_unstable();
            prop_assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "overlap");
            for &(a, size, _, f) in &live {
                // SAFETY: a live block of `size` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(a as *const u8, size) };
                prop_assert!(bytes.iter().all(|&x| x == f), "a live block was overwritten");
            }
        }
        let bound: usize = 4 * peak.iter().sum::<usize>();
        let taken = heap.pages.used;
        let slack = PAGE * (1 + heap.pages.grown);
        prop_assert!(taken <= bound + slack, "{taken} > {bound} + {slack}");
    }
}
