//! The few WASI functions a Rust `wasm32-wasip1` module imports, as a proxy gives them:
//! no environment, output captured, randomness from a fixed sequence, exit as a trap.

use super::memory::{count, poke, read, C};
use super::Host;
use crate::abi::status;
use wasmi::{Error, Linker};

/// The WASI import module.
pub const MODULE: &str = "wasi_snapshot_preview1";

/// The WASI functions provided.
pub const PROVIDED: &[&str] = &[
    "random_get",
    "environ_get",
    "environ_sizes_get",
    "fd_write",
    "proc_exit",
];

/// WASI's "bad file descriptor".
const EBADF: i32 = 8;

/// Defines [`PROVIDED`].
pub fn link(linker: &mut Linker<Host>) -> Result<(), Error> {
    linker.func_wrap(MODULE, "random_get", random_get)?;
    linker.func_wrap(MODULE, "environ_get", environ_get)?;
    linker.func_wrap(MODULE, "environ_sizes_get", environ_sizes_get)?;
    linker.func_wrap(MODULE, "fd_write", fd_write)?;
    linker.func_wrap(MODULE, "proc_exit", proc_exit)?;
    Ok(())
}

fn random_get(mut c: C, ptr: i32, len: i32) -> Result<i32, Error> {
    count(&mut c, "random_get");
    let mut bytes = vec![0; len as u32 as usize];
    c.data_mut().random(&mut bytes);
    if !poke(&mut c, ptr, &bytes)? {
        return Ok(status::INVALID_MEMORY_ACCESS);
    }
    c.data_mut().cost.bytes_in += bytes.len() as u64;
    Ok(0)
}

fn environ_get(mut c: C, _environ: i32, _buffer: i32) -> Result<i32, Error> {
    count(&mut c, "environ_get");
    Ok(0)
}

fn environ_sizes_get(mut c: C, count_ptr: i32, size_ptr: i32) -> Result<i32, Error> {
    count(&mut c, "environ_sizes_get");
    let zero = 0u32.to_le_bytes();
    poke(&mut c, count_ptr, &zero)?;
    poke(&mut c, size_ptr, &zero)?;
    Ok(0)
}

fn fd_write(mut c: C, fd: i32, iovs: i32, iovs_len: i32, written_ptr: i32) -> Result<i32, Error> {
    count(&mut c, "fd_write");
    if fd != 1 && fd != 2 {
        return Ok(EBADF);
    }
    let mut written = 0u32;
    for i in 0..iovs_len {
        let Some(iov) = read(&mut c, iovs + 8 * i, 8)? else {
            return Ok(status::INVALID_MEMORY_ACCESS);
        };
        let ptr = i32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
        let len = i32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
        let Some(bytes) = read(&mut c, ptr, len)? else {
            return Ok(status::INVALID_MEMORY_ACCESS);
        };
        written += bytes.len() as u32;
        c.data_mut().output.extend_from_slice(&bytes);
    }
    poke(&mut c, written_ptr, &written.to_le_bytes())?;
    Ok(0)
}

fn proc_exit(mut c: C, code: i32) -> Result<(), Error> {
    count(&mut c, "proc_exit");
    Err(Error::i32_exit(code))
}
