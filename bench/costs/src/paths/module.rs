//! The modules the paths load, and where each is built.

use std::path::PathBuf;

/// A module the paths load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// `floodgate.wasm` (`make wasm`).
    Floodgate,
    /// `floodgate-llm.wasm`, the build that reads responses (`make wasm`).
    FloodgateLlm,
    /// `bench/raw-noop`: reads one header, exports only that callback (`make bench-wasm`).
    RawNoop,
    /// `bench/noop-filter`: the same on the proxy-wasm SDK (`make bench-wasm`).
    SdkNoop,
    /// `bench/call-floor`: the least a wasm filter does for one call (`make bench-wasm`).
    CallFloor,
    /// `bench/host-calls`: the host-call calibration and the reject floor, its plan named
    /// by a configuration string (`make bench-wasm`).
    HostCalls,
    /// `bench/callback-floor`: the same plans, exporting floodgate's per-request callbacks
    /// too (`make bench-wasm`).
    CallbackFloor,
}

impl Module {
    /// Where it is: the `FLOODGATE_*` variable the tests use, or its place under
    /// `target/`; and the make target that builds it.
    pub fn file(self) -> (PathBuf, &'static str) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let release = root.join("target/wasm32-wasip1/release");
        let from_env = |var: &str| std::env::var_os(var).map(PathBuf::from);
        match self {
            Module::Floodgate => (
                from_env("FLOODGATE_WASM").unwrap_or(release.join("floodgate.wasm")),
                "make wasm",
            ),
            Module::FloodgateLlm => (
                from_env("FLOODGATE_LLM_WASM")
                    .unwrap_or(root.join("target/llm/wasm32-wasip1/release/floodgate-llm.wasm")),
                "make wasm",
            ),
            Module::RawNoop => (release.join("floodgate_raw_noop.wasm"), "make bench-wasm"),
            Module::SdkNoop => (
                release.join("floodgate_noop_filter.wasm"),
                "make bench-wasm",
            ),
            Module::CallFloor => (release.join("floodgate_call_floor.wasm"), "make bench-wasm"),
            Module::HostCalls => (release.join("floodgate_host_calls.wasm"), "make bench-wasm"),
            Module::CallbackFloor => (
                release.join("floodgate_callback_floor.wasm"),
                "make bench-wasm",
            ),
        }
    }
}
