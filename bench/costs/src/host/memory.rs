//! Moving values across the ABI: reading the module's memory, writing into it, and
//! handing a value back through the module's allocator, each byte counted.

use super::Host;
use crate::abi::status;
use crate::cost::ALLOCATE;
use wasmi::{Caller, Error};

/// The caller of a host function.
pub(super) type C<'a> = Caller<'a, Host>;

/// Counts one host call.
pub(super) fn count(c: &mut C, name: &str) {
    c.data_mut().cost.call(name);
}

/// `len` bytes of the module's memory at `ptr` (`None`: outside it), counted as out.
pub(super) fn read(c: &mut C, ptr: i32, len: i32) -> Result<Option<Vec<u8>>, Error> {
    let memory = c
        .data()
        .memory
        .ok_or_else(|| Error::new("the module has no memory"))?;
    let mut out = vec![0; len as u32 as usize];
    if memory.read(&*c, ptr as u32 as usize, &mut out).is_err() {
        return Ok(None);
    }
    c.data_mut().cost.bytes_out += out.len() as u64;
    Ok(Some(out))
}

/// Writes bytes into the module's memory without counting them (the ABI's out-words).
pub(super) fn poke(c: &mut C, ptr: i32, bytes: &[u8]) -> Result<bool, Error> {
    let memory = c
        .data()
        .memory
        .ok_or_else(|| Error::new("the module has no memory"))?;
    Ok(memory.write(&mut *c, ptr as u32 as usize, bytes).is_ok())
}

/// Hands a value back the way Envoy does: a non-empty one in memory the module
/// allocates (one VM entry), its pointer and size written to `ptr_ptr` and `size_ptr`.
pub(super) fn give(c: &mut C, value: &[u8], ptr_ptr: i32, size_ptr: i32) -> Result<i32, Error> {
    let mut pointer = 0i32;
    if !value.is_empty() {
        let alloc = c
            .data()
            .alloc
            .ok_or_else(|| Error::new("the module exports no proxy_on_memory_allocate"))?;
        c.data_mut().cost.enter(ALLOCATE);
        pointer = alloc.call(&mut *c, value.len() as i32)?;
        if pointer == 0 || !poke(c, pointer, value)? {
            return Ok(status::INVALID_MEMORY_ACCESS);
        }
        c.data_mut().cost.bytes_in += value.len() as u64;
    }
    let ok = poke(c, ptr_ptr, &pointer.to_le_bytes())?
        && poke(c, size_ptr, &(value.len() as u32).to_le_bytes())?;
    Ok(if ok {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    })
}

/// Reads an argument, or returns INVALID_MEMORY_ACCESS from the host function.
macro_rules! arg {
    ($c:expr, $ptr:expr, $len:expr) => {
        match read($c, $ptr, $len)? {
            Some(bytes) => bytes,
            None => return Ok(status::INVALID_MEMORY_ACCESS),
        }
    };
}

pub(super) fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}
