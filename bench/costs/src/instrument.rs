//! Counting what a module executes: the module is rewritten with three counters that its
//! own code keeps up to date, so the count is exact and owes nothing to the runtime.
//!
//! Every function body is cut into straight-line segments at each place control can
//! enter or leave (after `loop`, `if`, `else`, `end` and every branch, return or trap).
//! At the start of each segment the rewritten code adds the segment's instruction count
//! to an exported mutable `i64` global, [`INSTRUCTIONS`]. `block`, `loop`, `else`, `end`
//! and `nop` count 0 (they only mark structure and compile to nothing); every other
//! operator counts 1, calls included (the callee's own instructions are counted in the
//! callee). A segment cut short by a trap is counted whole: a trap ends the request anyway.
//!
//! `memory.copy`, `memory.fill` and `memory.init` are one instruction each but move any
//! number of bytes, so before each the rewritten code also adds its length operand to a
//! second global, [`BULK_BYTES`] (through one extra local in the functions that have them),
//! and one to a third, [`BULK_OPS`]: V8 carries each of them out by a call into C (about
//! 5.5 ns for a short copy, docs/costs.md), where most instructions are a machine
//! instruction or two, so how many there are matters more than how many bytes they move.
//!
//! The counters are appended after the module's own globals and exports, so no index the
//! module uses moves; every byte of the original code is copied as it was.

use std::fmt;
use wasmparser::{FunctionBody, Operator, Parser, Payload, TypeRef};

/// The exported global counting executed instructions.
pub const INSTRUCTIONS: &str = "floodgate_costs_instructions";
/// The exported global counting bytes moved by bulk-memory instructions.
pub const BULK_BYTES: &str = "floodgate_costs_bulk_bytes";
/// The exported global counting bulk-memory instructions executed.
pub const BULK_OPS: &str = "floodgate_costs_bulk_ops";

/// Why a module could not be instrumented.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot instrument the module: {}", self.0)
    }
}

impl std::error::Error for Error {}

impl From<wasmparser::BinaryReaderError> for Error {
    fn from(e: wasmparser::BinaryReaderError) -> Error {
        Error(e.to_string())
    }
}

/// What the rewrite needs to know about the module before touching it.
#[derive(Default)]
struct Layout {
    /// Parameter count of each type (by type index; 0 for non-function types).
    type_params: Vec<u32>,
    /// Imported functions and globals: defined ones are numbered after them.
    imported_functions: u32,
    imported_globals: u32,
    /// Type index of each defined function.
    function_types: Vec<u32>,
    defined_globals: u32,
}

impl Layout {
    fn read(wasm: &[u8]) -> Result<Layout, Error> {
        let mut layout = Layout::default();
        for payload in Parser::new(0).parse_all(wasm) {
            match payload? {
                Payload::TypeSection(reader) => {
                    for group in reader {
                        for sub in group?.into_types() {
                            let params = match &sub.composite_type.inner {
                                wasmparser::CompositeInnerType::Func(f) => f.params().len(),
                                _ => 0,
                            };
                            layout.type_params.push(params as u32);
                        }
                    }
                }
                Payload::ImportSection(reader) => {
                    for import in reader {
                        match import?.ty {
                            TypeRef::Func(_) => layout.imported_functions += 1,
                            TypeRef::Global(_) => layout.imported_globals += 1,
                            _ => {}
                        }
                    }
                }
                Payload::FunctionSection(reader) => {
                    for ty in reader {
                        layout.function_types.push(ty?);
                    }
                }
                Payload::GlobalSection(reader) => layout.defined_globals = reader.count(),
                _ => {}
            }
        }
        Ok(layout)
    }
}

/// The prefix of the per-function counters [`instrument_with`] exports (then the
/// function's index).
pub const FUNCTION_PREFIX: &str = "floodgate_costs_fn_";
/// The prefix of the per-function counters of bulk-memory operations: where copies are.
pub const FUNCTION_COPIES_PREFIX: &str = "floodgate_costs_copies_fn_";

/// The module with the three counters added (see the module docs).
pub fn instrument(wasm: &[u8]) -> Result<Vec<u8>, Error> {
    instrument_with(wasm, false)
}

/// The same, and with `per_function` two more counters per defined function, exported as
/// [`FUNCTION_PREFIX`] and [`FUNCTION_COPIES_PREFIX`] and its index: where the
/// instructions are executed and the bulk-memory operations made.
pub fn instrument_with(wasm: &[u8], per_function: bool) -> Result<Vec<u8>, Error> {
    let layout = Layout::read(wasm)?;
    if layout.defined_globals == 0 {
        return Err(Error(
            "it defines no global section to add the counters to".into(),
        ));
    }
    let counter = layout.imported_globals + layout.defined_globals;
    let counters = Counters {
        instructions: counter,
        bulk: counter + 1,
        bulk_ops: counter + 2,
        per_function: per_function.then_some(counter + 3),
    };
    // Defined function `i`'s instructions at `counter + 3 + i`, its copies after them all.
    let functions = if per_function {
        layout.function_types.len() as u32
    } else {
        0
    };
    let globals: Vec<Vec<u8>> = (0..3 + 2 * functions).map(|_| i64_global()).collect();
    let mut exports = vec![
        export_global(INSTRUCTIONS, counters.instructions),
        export_global(BULK_BYTES, counters.bulk),
        export_global(BULK_OPS, counters.bulk_ops),
    ];
    for i in 0..functions {
        let name = format!("{FUNCTION_PREFIX}{}", layout.imported_functions + i);
        exports.push(export_global(&name, counter + 3 + i));
        let name = format!("{FUNCTION_COPIES_PREFIX}{}", layout.imported_functions + i);
        exports.push(export_global(&name, counter + 3 + functions + i));
    }
    let mut out = wasm
        .get(..8)
        .ok_or_else(|| Error("shorter than its header".into()))?
        .to_vec();
    let mut at = 8;
    while at < wasm.len() {
        let id = wasm[at];
        let (size, width) = read_leb(wasm, at + 1)?;
        let start = at + 1 + width;
        let end = start + size as usize;
        let payload = wasm
            .get(start..end)
            .ok_or_else(|| Error(format!("section {id} at {at} runs past the end")))?;
        let rewritten = match id {
            6 => Some(append_entries(payload, &globals)?),
            7 => Some(append_entries(payload, &exports)?),
            10 => Some(code_section(
                wasm, start, end, &layout, counters, functions,
            )?),
            _ => None,
        };
        match rewritten {
            Some(section) => {
                out.push(id);
                write_leb(&mut out, section.len() as u64);
                out.extend_from_slice(&section);
            }
            None => out.extend_from_slice(&wasm[at..end]),
        }
        at = end;
    }
    Ok(out)
}

/// Function names by index, from the module's `name` section (empty without one: the
/// shipped modules are stripped of it).
pub fn function_names(wasm: &[u8]) -> std::collections::BTreeMap<u32, String> {
    let mut names = std::collections::BTreeMap::new();
    for payload in Parser::new(0).parse_all(wasm).flatten() {
        let Payload::CustomSection(section) = payload else {
            continue;
        };
        let wasmparser::KnownCustom::Name(reader) = section.as_known() else {
            continue;
        };
        for name in reader.flatten() {
            if let wasmparser::Name::Function(map) = name {
                for naming in map.into_iter().flatten() {
                    names.insert(naming.index, naming.name.to_string());
                }
            }
        }
    }
    names
}

/// The counters' global indices.
#[derive(Clone, Copy)]
struct Counters {
    instructions: u32,
    bulk: u32,
    bulk_ops: u32,
    /// The first per-function counter, if any (defined function `i` has `first + i`).
    per_function: Option<u32>,
}

/// A mutable `i64` global starting at 0.
fn i64_global() -> Vec<u8> {
    vec![0x7e, 0x01, 0x42, 0x00, 0x0b]
}

/// An export of global `index` as `name`.
fn export_global(name: &str, index: u32) -> Vec<u8> {
    let mut entry = Vec::new();
    write_leb(&mut entry, name.len() as u64);
    entry.extend_from_slice(name.as_bytes());
    entry.push(0x03);
    write_leb(&mut entry, u64::from(index));
    entry
}

/// A vector section's payload with `extra` entries appended.
fn append_entries(payload: &[u8], extra: &[Vec<u8>]) -> Result<Vec<u8>, Error> {
    let (count, width) = read_leb(payload, 0)?;
    let mut out = Vec::with_capacity(payload.len() + 32);
    write_leb(&mut out, count + extra.len() as u64);
    out.extend_from_slice(&payload[width..]);
    for entry in extra {
        out.extend_from_slice(entry);
    }
    Ok(out)
}

/// The code section with every body counted.
fn code_section(
    wasm: &[u8],
    start: usize,
    end: usize,
    layout: &Layout,
    counters: Counters,
    functions: u32,
) -> Result<Vec<u8>, Error> {
    let mut bodies = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::CodeSectionEntry(body) = payload? {
            let range = body.range();
            if range.start >= start && range.end <= end {
                bodies.push(body);
            }
        }
    }
    let mut out = Vec::new();
    write_leb(&mut out, bodies.len() as u64);
    for (index, body) in bodies.iter().enumerate() {
        let params = layout
            .function_types
            .get(index)
            .and_then(|&ty| layout.type_params.get(ty as usize))
            .copied()
            .ok_or_else(|| {
                Error(format!(
                    "function {} has no type",
                    layout.imported_functions as usize + index
                ))
            })?;
        let own = counters
            .per_function
            .map(|first| (first + index as u32, first + functions + index as u32));
        let rewritten = counted_body(wasm, body, params, counters, own)?;
        write_leb(&mut out, rewritten.len() as u64);
        out.extend_from_slice(&rewritten);
    }
    Ok(out)
}

/// What an operator means for counting.
fn classify(op: &Operator) -> (u64, bool, bool) {
    use Operator as O;
    // (instructions, ends a segment, moves bulk bytes)
    match op {
        O::Block { .. } | O::Nop => (0, false, false),
        O::Loop { .. } | O::Else | O::End => (0, true, false),
        O::If { .. }
        | O::Br { .. }
        | O::BrIf { .. }
        | O::BrTable { .. }
        | O::Return
        | O::Unreachable
        | O::ReturnCall { .. }
        | O::ReturnCallIndirect { .. } => (1, true, false),
        O::MemoryCopy { .. } | O::MemoryFill { .. } | O::MemoryInit { .. } => (1, false, true),
        _ => (1, false, false),
    }
}

/// One function body with its segments counted.
fn counted_body(
    wasm: &[u8],
    body: &FunctionBody,
    params: u32,
    counters: Counters,
    own: Option<(u32, u32)>,
) -> Result<Vec<u8>, Error> {
    let targets: Vec<u32> = [Some(counters.instructions), own.map(|(count, _)| count)]
        .into_iter()
        .flatten()
        .collect();
    let range = body.range();
    let mut operators = body.get_operators_reader()?;
    let code_start = operators.original_position();
    let mut ops = Vec::new();
    while !operators.eof() {
        let (op, offset) = operators.read_with_offset()?;
        ops.push((classify(&op), offset));
    }
    let ends: Vec<usize> = ops
        .iter()
        .skip(1)
        .map(|(_, o)| *o)
        .chain([range.end])
        .collect();
    let has_bulk = ops.iter().any(|((_, _, bulk), _)| *bulk);

    let mut out = Vec::with_capacity(range.len() * 2);
    let locals = &wasm[range.start..code_start];
    let mut scratch = params;
    if has_bulk {
        let mut reader = body.get_locals_reader()?;
        for _ in 0..reader.get_count() {
            scratch += reader.read()?.0;
        }
        let (count, width) = read_leb(locals, 0)?;
        write_leb(&mut out, count + 1);
        out.extend_from_slice(&locals[width..]);
        out.extend_from_slice(&[0x01, 0x7f]);
    } else {
        out.extend_from_slice(locals);
    }

    let mut segment = Vec::new();
    let mut count = 0u64;
    for (((instructions, ends_segment, bulk), offset), end) in ops.iter().zip(&ends) {
        if *bulk {
            // The length is on top of the stack: keep it there, and add it up.
            segment.push(0x22);
            write_leb(&mut segment, u64::from(scratch));
            segment.push(0x23);
            write_leb(&mut segment, u64::from(counters.bulk));
            segment.push(0x20);
            write_leb(&mut segment, u64::from(scratch));
            segment.extend_from_slice(&[0xad, 0x7c, 0x24]);
            write_leb(&mut segment, u64::from(counters.bulk));
            // And one more operation: global.get, i64.const 1, i64.add, global.set.
            for ops in [Some(counters.bulk_ops), own.map(|(_, copies)| copies)]
                .into_iter()
                .flatten()
            {
                segment.push(0x23);
                write_leb(&mut segment, u64::from(ops));
                segment.extend_from_slice(&[0x42, 0x01, 0x7c, 0x24]);
                write_leb(&mut segment, u64::from(ops));
            }
        }
        segment.extend_from_slice(&wasm[*offset..*end]);
        count += instructions;
        if *ends_segment {
            flush(&mut out, &mut segment, &mut count, &targets);
        }
    }
    flush(&mut out, &mut segment, &mut count, &targets);
    Ok(out)
}

/// Emits a segment: its count added to each counter, then its code.
fn flush(out: &mut Vec<u8>, segment: &mut Vec<u8>, count: &mut u64, counters: &[u32]) {
    for &counter in counters.iter().filter(|_| *count > 0) {
        out.push(0x23);
        write_leb(out, u64::from(counter));
        out.push(0x42);
        write_sleb(out, *count as i64);
        out.push(0x7c);
        out.push(0x24);
        write_leb(out, u64::from(counter));
    }
    out.append(segment);
    *count = 0;
}

mod leb;

use leb::{read_leb, write_leb, write_sleb};

#[cfg(test)]
mod tests;
