use super::*;

#[test]
fn a_null_buffer_is_empty() {
    // SAFETY: null is always allowed.
    assert!(unsafe { take_buffer(std::ptr::null_mut(), 0) }.is_empty());
}

#[test]
fn a_filled_in_buffer_comes_back_whole() {
    for size in [0usize, 1, 7, 4096] {
        let data = allocate(size);
        let bytes: Vec<u8> = (0..size).map(|i| i as u8).collect();
        // SAFETY: `data` has room for `size` bytes, as the host would write them.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, size) };
        // SAFETY: from `allocate(size)`, fully written, owned by nobody else.
        let taken = unsafe { take_buffer(data, size) };
        assert_eq!(taken, bytes);
        assert_eq!(taken.capacity(), size);
    }
}
