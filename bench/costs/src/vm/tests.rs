use super::*;

const HEADER: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
/// One mutable i32 global (the counters need a global section to join).
const GLOBALS: &[u8] = &[0x06, 0x06, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b];

fn import(name: &str) -> Vec<u8> {
    let mut payload = vec![0x01, 0x03, b'e', b'n', b'v', name.len() as u8];
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(&[0x00, 0x00]);
    let mut section = vec![0x02, payload.len() as u8];
    section.extend(payload);
    section
}

#[test]
fn an_import_outside_the_abi_fails_the_load_by_name() {
    let module = [
        HEADER,
        &[0x01, 0x04, 0x01, 0x60, 0x00, 0x00],
        &import("proxy_nonexistent"),
        GLOBALS,
    ]
    .concat();
    let error = Vm::load(&module).err().expect("refused").to_string();
    assert!(error.contains("env.proxy_nonexistent"), "{error}");
}

#[test]
fn an_abi_call_the_host_does_not_carry_out_fails_the_run_by_name() {
    // run() calls proxy_grpc_call(0, ..., 0) and drops its result.
    let mut grpc_call = vec![0x60, 0x0c];
    grpc_call.extend([0x7f; 12]);
    grpc_call.extend([0x01, 0x7f]);
    let types = [&[0x01, 0x14, 0x02][..], &grpc_call, &[0x60, 0x00, 0x00]].concat();
    let mut body = vec![0x00];
    body.extend([0x41, 0x00].repeat(12));
    body.extend([0x10, 0x00, 0x1a, 0x0b]);
    let code = [
        &[0x0a, body.len() as u8 + 2, 0x01, body.len() as u8][..],
        &body,
    ]
    .concat();
    let module = [
        HEADER,
        &types,
        &import("proxy_grpc_call"),
        &[0x03, 0x02, 0x01, 0x01],
        GLOBALS,
        &[0x07, 0x07, 0x01, 0x03, b'r', b'u', b'n', 0x00, 0x01],
        &code,
    ]
    .concat();
    let mut vm = Vm::load(&module).expect("a known ABI import links");
    let error = vm.call("run", 0, &[]).expect_err("trapped").to_string();
    assert!(error.contains("proxy_grpc_call"), "{error}");
    assert_eq!(vm.cost().entries.get("run"), Some(&1));
}
