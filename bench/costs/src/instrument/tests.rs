use super::*;
use wasmi::{Engine, Linker, Module, Store, Val};

/// A module written out byte by byte: `f(n)` counts `n` down in a loop and returns it;
/// `g()` fills 100 bytes of memory.
const MODULE: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // header
    0x01, 0x09, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00,
    0x00, // types: (i32)->i32, ()->()
    0x03, 0x03, 0x02, 0x00, 0x01, // functions
    0x05, 0x03, 0x01, 0x00, 0x01, // one page of memory
    0x06, 0x06, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b, // a mutable i32 global
    0x07, 0x09, 0x02, 0x01, b'f', 0x00, 0x00, 0x01, b'g', 0x00, 0x01, // exports f, g
    0x0a, 0x27, 0x02, // code: two bodies
    0x18, 0x00, // f: no locals
    0x02, 0x40, // block
    0x03, 0x40, //   loop
    0x20, 0x00, 0x45, 0x0d, 0x01, //     local.get 0; i32.eqz; br_if 1
    0x20, 0x00, 0x41, 0x01, 0x6b, 0x21,
    0x00, // local.get 0; i32.const 1; i32.sub; local.set 0
    0x0c, 0x00, //     br 0
    0x0b, 0x0b, //   end; end
    0x20, 0x00, 0x0b, // local.get 0; end
    0x0c, 0x00, // g: no locals
    0x41, 0x00, 0x41, 0x07, 0x41, 0xe4, 0x00, // i32.const 0; i32.const 7; i32.const 100
    0xfc, 0x0b, 0x00, 0x0b, // memory.fill; end
];

/// The call's counts: instructions, bulk bytes and bulk operations; and its results.
fn run(export: &str, args: &[Val], results: usize) -> ([i64; 3], Vec<Val>) {
    let engine = Engine::default();
    let module =
        Module::new(&engine, &instrument(MODULE).expect("instrumented")[..]).expect("valid");
    let mut store = Store::new(&engine, ());
    let instance = Linker::<()>::new(&engine)
        .instantiate(&mut store, &module)
        .and_then(|pre| pre.start(&mut store))
        .expect("instantiated");
    let mut out = vec![Val::I32(0); results];
    let func = instance.get_func(&store, export).expect("export");
    func.call(&mut store, args, &mut out).expect("ran");
    let read = |name| match instance
        .get_global(&store, name)
        .expect("counter")
        .get(&store)
    {
        Val::I64(n) => n,
        other => panic!("counter is {other:?}"),
    };
    ([read(INSTRUCTIONS), read(BULK_BYTES), read(BULK_OPS)], out)
}

#[test]
fn a_loop_counts_each_instruction_it_executes() {
    // Per turn: the test (3) and the decrement with its branch back (5); the last
    // test exits; then the final local.get.
    for n in [0, 1, 3, 10] {
        let ([instructions, bulk, bulk_ops], out) = run("f", &[Val::I32(n)], 1);
        assert_eq!(instructions, 8 * i64::from(n) + 4, "n = {n}");
        assert_eq!((bulk, bulk_ops), (0, 0));
        assert!(
            matches!(out[0], Val::I32(0)),
            "the module still works: {:?}",
            out[0]
        );
    }
}

#[test]
fn bulk_memory_counts_its_bytes_one_operation_and_one_instruction() {
    let ([instructions, bulk, bulk_ops], _) = run("g", &[], 0);
    assert_eq!((instructions, bulk, bulk_ops), (4, 100, 1));
}

#[test]
fn leb_numbers_round_trip() {
    for value in [0u64, 1, 127, 128, 300, 1 << 32, u64::MAX >> 1] {
        let mut out = Vec::new();
        write_leb(&mut out, value);
        assert_eq!(read_leb(&out, 0).expect("read"), (value, out.len()));
    }
    let mut out = Vec::new();
    write_sleb(&mut out, 100);
    assert_eq!(
        out,
        [0xe4, 0x00],
        "bit 6 set needs a second byte, or it reads as negative"
    );
}

#[test]
fn per_function_counters_tell_where_instructions_and_copies_are() {
    let engine = Engine::default();
    let wasm = instrument_with(MODULE, true).expect("instrumented");
    let module = Module::new(&engine, &wasm[..]).expect("valid");
    let mut store = Store::new(&engine, ());
    let instance = Linker::<()>::new(&engine)
        .instantiate(&mut store, &module)
        .and_then(|pre| pre.start(&mut store))
        .expect("instantiated");
    let g = instance.get_func(&store, "g").expect("export");
    g.call(&mut store, &[], &mut []).expect("ran");
    let read = |name: String| match instance
        .get_global(&store, &name)
        .expect("counter")
        .get(&store)
    {
        Val::I64(n) => n,
        other => panic!("counter is {other:?}"),
    };
    // f is function 0, g function 1 (no imports).
    let counts = |index: u32| {
        [
            read(format!("{FUNCTION_PREFIX}{index}")),
            read(format!("{FUNCTION_COPIES_PREFIX}{index}")),
        ]
    };
    assert_eq!(counts(0), [0, 0]);
    assert_eq!(counts(1), [4, 1]);
}
