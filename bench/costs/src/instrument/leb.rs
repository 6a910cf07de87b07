//! LEB128 numbers, as the binary format writes them.

use super::Error;

/// An unsigned LEB128 at `at`: its value and its width.
pub(super) fn read_leb(bytes: &[u8], at: usize) -> Result<(u64, usize), Error> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *bytes
            .get(at + i)
            .ok_or_else(|| Error(format!("truncated number at {at}")))?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(Error(format!("number too long at {at}")))
}

pub(super) fn write_leb(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(super) fn write_sleb(out: &mut Vec<u8>, mut value: i64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        let done = (value == 0 && byte & 0x40 == 0) || (value == -1 && byte & 0x40 != 0);
        if done {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
