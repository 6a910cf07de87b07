//! A small reader of the WebAssembly binary format: enough to list a module's sections and
//! exports, so tests can pin what the built filter exposes to Envoy.
//!
//! Written by hand rather than pulled in as a dependency because the format's outer layer
//! is tiny: an 8-byte header, then sections of (id byte, LEB128 size, payload). Only the
//! export section (id 7) and the names of custom sections (id 0) are decoded; every other
//! section is skipped by its size. A malformed module is an error naming the byte offset.

use std::fmt;

/// What an export is, from its kind byte (the binary format's `exportdesc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExportKind {
    /// A function: Envoy calls it (a `proxy_on_*` callback) or the runtime does.
    Function,
    /// A table.
    Table,
    /// A linear memory: the host reads and writes the module's memory through it.
    Memory,
    /// A global.
    Global,
}

impl fmt::Display for ExportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExportKind::Function => "function",
            ExportKind::Table => "table",
            ExportKind::Memory => "memory",
            ExportKind::Global => "global",
        })
    }
}

/// One section of a module: its id and, for a custom section, its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The section id (0 custom, 1 type, 2 import, ... 7 export, 10 code, 11 data).
    pub id: u8,
    /// A custom section's name (`name`, `producers`, ...); `None` for the others.
    pub custom_name: Option<String>,
    /// The payload's size in bytes.
    pub size: usize,
}

/// A parsed module: its sections in order and its exports.
#[derive(Debug, Clone, Default)]
pub struct Module {
    /// Every section, in file order.
    pub sections: Vec<Section>,
    /// Every export: its name and kind, in file order.
    pub exports: Vec<(String, ExportKind)>,
}

/// Why a module could not be read: what was wrong and at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the module where reading failed.
    pub offset: usize,
    /// What was expected there.
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not a wasm module: {} at byte {}",
            self.what, self.offset
        )
    }
}

/// A cursor over the module's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, what: &'static str) -> ParseError {
        ParseError {
            offset: self.at,
            what,
        }
    }

    fn byte(&mut self) -> Result<u8, ParseError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.error("unexpected end"))?;
        self.at += 1;
        Ok(b)
    }

    /// An unsigned LEB128 number of at most 32 bits, as the format uses for sizes.
    fn u32(&mut self) -> Result<u32, ParseError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.byte()?;
            value |= u32::from(b & 0x7f)
                .checked_shl(shift)
                .ok_or_else(|| self.error("LEB128 too long"))?;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("LEB128 too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| self.error("a size past the end"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn name(&mut self) -> Result<String, ParseError> {
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a name that is not UTF-8"))
    }
}

/// The 8-byte header: `\0asm` and version 1.
const HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// The export section's id.
const EXPORT: u8 = 7;

/// Reads a module's sections and exports.
pub fn parse(bytes: &[u8]) -> Result<Module, ParseError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(HEADER.len())? != HEADER {
        return Err(ParseError {
            offset: 0,
            what: "the \\0asm version 1 header",
        });
    }
    let mut module = Module::default();
    while r.at < bytes.len() {
        let id = r.byte()?;
        let size = r.u32()? as usize;
        let start = r.at;
        r.take(size)?;
        // The section's payload alone: nothing in it may read past its end.
        let mut inner = Reader {
            bytes: &bytes[..r.at],
            at: start,
        };
        let custom_name = if id == 0 { Some(inner.name()?) } else { None };
        if id == EXPORT {
            let count = inner.u32()?;
            for _ in 0..count {
                let name = inner.name()?;
                let kind = match inner.byte()? {
                    0 => ExportKind::Function,
                    1 => ExportKind::Table,
                    2 => ExportKind::Memory,
                    3 => ExportKind::Global,
                    _ => return Err(inner.error("an export kind of 0 to 3")),
                };
                inner.u32()?;
                module.exports.push((name, kind));
            }
        }
        module.sections.push(Section {
            id,
            custom_name,
            size,
        });
    }
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with one function export `f`, one memory export `memory` and a custom
    /// section `name`, hand-assembled.
    fn sample() -> Vec<u8> {
        let mut m = HEADER.to_vec();
        let exports = [
            &[2u8][..],
            &[1, b'f', 0, 0],
            &[6, b'm', b'e', b'm', b'o', b'r', b'y', 2, 0],
        ]
        .concat();
        m.push(EXPORT);
        m.push(exports.len() as u8);
        m.extend_from_slice(&exports);
        let custom = [&[4u8, b'n', b'a', b'm', b'e'][..], &[1, 2, 3]].concat();
        m.push(0);
        m.push(custom.len() as u8);
        m.extend_from_slice(&custom);
        m
    }

    #[test]
    fn reads_exports_and_custom_section_names() {
        let module = parse(&sample()).expect("sample parses");
        assert_eq!(
            module.exports,
            vec![
                ("f".to_string(), ExportKind::Function),
                ("memory".to_string(), ExportKind::Memory)
            ]
        );
        assert_eq!(module.sections.len(), 2);
        assert_eq!(module.sections[1].custom_name.as_deref(), Some("name"));
        assert_eq!(module.sections[1].size, 8);
    }

    #[test]
    fn a_truncated_module_is_an_error_not_a_panic() {
        let bytes = sample();
        // A module may end after the header or after any whole section.
        let export_end = HEADER.len() + 2 + usize::from(bytes[HEADER.len() + 1]);
        for len in 0..bytes.len() {
            if len == HEADER.len() || len == export_end {
                continue;
            }
            assert!(parse(&bytes[..len]).is_err(), "prefix of {len} bytes");
        }
    }

    #[test]
    fn another_file_is_refused_at_the_header() {
        let err = parse(b"#!/bin/sh\n").expect_err("not wasm");
        assert_eq!(
            err.to_string(),
            "not a wasm module: the \\0asm version 1 header at byte 0"
        );
    }
}
