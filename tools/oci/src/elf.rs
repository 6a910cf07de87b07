//! Checking that a program can run alone in an image that holds nothing else.
//!
//! The server's image has no shell, no C library and no dynamic loader. A dynamically
//! linked executable names its loader in a `PT_INTERP` program header
//! (`/lib64/ld-linux-x86-64.so.2`); in such an image the kernel cannot find it and the
//! container dies with a bare "no such file or directory". Reading the ELF header here
//! turns that into a build error. Offsets and constants are the ELF-64 format's.

use std::fmt;

/// `\x7fELF`, the first four bytes of every ELF file.
const MAGIC: &[u8; 4] = b"\x7fELF";
/// `EI_CLASS` value of a 64-bit file.
const CLASS_64: u8 = 2;
/// `EI_DATA` value of a little-endian file.
const LITTLE_ENDIAN: u8 = 1;
/// `e_type` of an executable (`ET_EXEC`) and of a position-independent one (`ET_DYN`,
/// which a static-pie executable is too).
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
/// `e_machine` of x86-64.
const EM_X86_64: u16 = 62;
/// The program header naming the dynamic loader.
const PT_INTERP: u32 = 3;
/// The size of the ELF-64 file header.
const HEADER_LEN: usize = 64;

/// Why a file cannot run alone in the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfError {
    /// Not an ELF file.
    NotElf,
    /// Not a 64-bit little-endian x86-64 executable (the image's platform).
    WrongPlatform,
    /// A file (an object, a core dump) rather than a program.
    NotExecutable,
    /// The header or the program headers run past the end of the file.
    Truncated,
    /// It needs a dynamic loader (and so a C library), which the image does not have.
    Dynamic,
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElfError::NotElf => "not an ELF executable",
            ElfError::WrongPlatform => "not an x86-64 (64-bit, little-endian) program",
            ElfError::NotExecutable => "an ELF file, but not an executable",
            ElfError::Truncated => "the ELF headers are cut short",
            ElfError::Dynamic => {
                "dynamically linked (it names a loader); build it statically \
                 (target x86_64-unknown-linux-musl, `make server-static`)"
            }
        })
    }
}

impl std::error::Error for ElfError {}

/// `Ok` when `bytes` are a statically linked x86-64 Linux executable.
pub fn check_static_x86_64(bytes: &[u8]) -> Result<(), ElfError> {
    if !bytes.starts_with(MAGIC) {
        return Err(ElfError::NotElf);
    }
    if bytes.len() < HEADER_LEN {
        return Err(ElfError::Truncated);
    }
    if bytes[4] != CLASS_64 || bytes[5] != LITTLE_ENDIAN || u16_at(bytes, 18) != EM_X86_64 {
        return Err(ElfError::WrongPlatform);
    }
    if !matches!(u16_at(bytes, 16), ET_EXEC | ET_DYN) {
        return Err(ElfError::NotExecutable);
    }
    let offset = usize::try_from(u64_at(bytes, 32)).map_err(|_| ElfError::Truncated)?;
    let entry_len = usize::from(u16_at(bytes, 54));
    let count = usize::from(u16_at(bytes, 56));
    for i in 0..count {
        let at = i
            .checked_mul(entry_len)
            .and_then(|o| o.checked_add(offset))
            .filter(|at| at.checked_add(4).is_some_and(|end| end <= bytes.len()))
            .ok_or(ElfError::Truncated)?;
        if u32_at(bytes, at) == PT_INTERP {
            return Err(ElfError::Dynamic);
        }
    }
    Ok(())
}

// Callers check the length first: the header is 64 bytes, and each program header's
// start plus 4 is checked above.
fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ELF-64 x86-64 executable header followed by `types` as program headers
    /// (56 bytes each, only `p_type` filled in).
    pub(crate) fn elf_with_program_headers(types: &[u32]) -> Vec<u8> {
        let mut bytes = vec![0u8; HEADER_LEN];
        bytes[..4].copy_from_slice(MAGIC);
        bytes[4] = CLASS_64;
        bytes[5] = LITTLE_ENDIAN;
        bytes[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        bytes[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        bytes[32..40].copy_from_slice(&(HEADER_LEN as u64).to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for t in types {
            let mut entry = vec![0u8; 56];
            entry[..4].copy_from_slice(&t.to_le_bytes());
            bytes.extend(entry);
        }
        bytes
    }

    #[test]
    fn a_program_without_a_loader_is_static() {
        // PT_LOAD, PT_DYNAMIC (a static-pie has one), PT_GNU_STACK.
        let elf = elf_with_program_headers(&[1, 2, 0x6474_e551]);
        assert_eq!(check_static_x86_64(&elf), Ok(()));
    }

    #[test]
    fn a_program_that_names_a_loader_is_refused() {
        let elf = elf_with_program_headers(&[6, PT_INTERP, 1]);
        assert_eq!(check_static_x86_64(&elf), Err(ElfError::Dynamic));
    }

    #[test]
    fn other_files_and_platforms_are_refused() {
        assert_eq!(check_static_x86_64(b"#!/bin/sh\n"), Err(ElfError::NotElf));
        assert_eq!(
            check_static_x86_64(b"\x7fELF\x02"),
            Err(ElfError::Truncated)
        );
        let mut arm = elf_with_program_headers(&[1]);
        arm[18..20].copy_from_slice(&183u16.to_le_bytes()); // aarch64
        assert_eq!(check_static_x86_64(&arm), Err(ElfError::WrongPlatform));
        let mut object = elf_with_program_headers(&[]);
        object[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
        assert_eq!(check_static_x86_64(&object), Err(ElfError::NotExecutable));
    }

    #[test]
    fn program_headers_past_the_end_are_refused_not_read() {
        let mut elf = elf_with_program_headers(&[1]);
        elf[56..58].copy_from_slice(&1000u16.to_le_bytes());
        assert_eq!(check_static_x86_64(&elf), Err(ElfError::Truncated));
        elf[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(check_static_x86_64(&elf), Err(ElfError::Truncated));
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn the_host_test_binary_is_judged_by_its_linking() {
        // This test binary itself: dynamic on glibc hosts, static under musl.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let expected = if cfg!(target_env = "musl") {
            Ok(())
        } else {
            Err(ElfError::Dynamic)
        };
        assert_eq!(check_static_x86_64(&me), expected);
    }
}
