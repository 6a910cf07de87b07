//! The built `floodgate.wasm` exports exactly the callbacks floodgate uses, and nothing
//! Envoy would not need.
//!
//! Envoy looks up every `proxy_on_*` export when it loads a module and enters the VM for
//! each one it finds, whether the module does anything in it or not: about 0.5 µs of
//! worker CPU per callback per request (see `docs/decisions/raw-abi.md`). An export added
//! by accident (a `#[no_mangle]` left on a helper, a dependency that brings its own
//! callbacks) therefore costs every request, and one removed by accident silently turns a
//! feature off (no `proxy_on_tick`, no metrics flush; no `proxy_on_delete`, state that
//! is never freed). This test makes either change a deliberate one.

use floodgate_integration::paths;
use floodgate_integration::wasm_module::{self, ExportKind, Module};
use std::collections::BTreeSet;

fn built() -> Module {
    parsed(paths::wasm())
}

fn parsed(path: std::path::PathBuf) -> Module {
    let bytes = std::fs::read(&path).expect("read the built wasm");
    wasm_module::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the filter exports, each for a reason.
const EXPECTED: &[(&str, ExportKind)] = &[
    // The host reads and writes header values, shared data and configuration here.
    ("memory", ExportKind::Memory),
    // WASI reactor start: static constructors and the logger, once, before any callback.
    ("_initialize", ExportKind::Function),
    // Tells Envoy which ABI the module speaks.
    ("proxy_abi_version_0_2_1", ExportKind::Function),
    // Where the host puts every value it hands us.
    ("proxy_on_memory_allocate", ExportKind::Function),
    // Root contexts (one per plugin and thread) and HTTP contexts (one per request).
    ("proxy_on_context_create", ExportKind::Function),
    ("proxy_on_vm_start", ExportKind::Function),
    // Validates the plugin configuration; `false` makes Envoy refuse it.
    ("proxy_on_configure", ExportKind::Function),
    // Flushes metrics and refreshes state once per period.
    ("proxy_on_tick", ExportKind::Function),
    // The decision: allow, reject, or call the rate limit service.
    ("proxy_on_request_headers", ExportKind::Function),
    // The rate limit service's answer.
    ("proxy_on_http_call_response", ExportKind::Function),
    // `x-ratelimit-*` and the service's headers on allowed responses.
    ("proxy_on_response_headers", ExportKind::Function),
    // Frees a request's state (and forgets its call in flight).
    ("proxy_on_delete", ExportKind::Function),
];

#[test]
fn the_filter_exports_exactly_the_callbacks_it_uses() {
    let actual: BTreeSet<(String, ExportKind)> = built().exports.into_iter().collect();
    let expected: BTreeSet<(String, ExportKind)> = EXPECTED
        .iter()
        .map(|(name, kind)| (name.to_string(), *kind))
        .collect();
    let added: Vec<String> = actual
        .difference(&expected)
        .map(|(n, k)| format!("{n} ({k})"))
        .collect();
    let removed: Vec<String> = expected
        .difference(&actual)
        .map(|(n, k)| format!("{n} ({k})"))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "floodgate.wasm's exports changed: added {added:?}, removed {removed:?}.\n\
         Envoy enters the VM for every exported proxy_on_* callback on every request it \
         applies to (about 0.5 µs each), and never calls one that is not exported. If the \
         change is deliberate, measure it with `make bench`, then update EXPECTED in \
         tests/tests/wasm_exports.rs and docs/decisions/raw-abi.md."
    );
}

/// floodgate-llm.wasm exports the same, plus the two callbacks a response cost needs.
#[test]
fn the_llm_build_adds_only_the_response_body_and_trailers() {
    let actual: BTreeSet<(String, ExportKind)> =
        parsed(paths::llm_wasm()).exports.into_iter().collect();
    let expected: BTreeSet<(String, ExportKind)> = EXPECTED
        .iter()
        .chain(&[
            // Each chunk of a response, scanned for its usage and passed on at once.
            ("proxy_on_response_body", ExportKind::Function),
            // A usage header may come as a trailer, and trailers end the response.
            ("proxy_on_response_trailers", ExportKind::Function),
        ])
        .map(|(name, kind)| (name.to_string(), *kind))
        .collect();
    assert_eq!(actual, expected);
}

#[test]
fn the_release_module_carries_no_name_section() {
    let names: Vec<String> = built()
        .sections
        .into_iter()
        .filter_map(|s| s.custom_name)
        .collect();
    assert!(
        !names.iter().any(|n| n == "name"),
        "floodgate.wasm carries a `name` section (custom sections: {names:?}): about 40 KB \
         Envoy never reads. `make wasm` drops it twice: .cargo/config.toml links with \
         --strip-all, and wasm-opt leaves names out. A RUSTFLAGS setting replaces the \
         config's flags."
    );
}
