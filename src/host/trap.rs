//! A test-only fault: the module traps when a request carries [`HEADER`].
//!
//! Built only with the `trap-on-header` feature (`make wasm-trap`, into its own file under
//! `target/trap/`), never in the shipped `floodgate.wasm`. The end-to-end tests use it to
//! see what Envoy does with a module that crashes in the middle of a request under each
//! `failure_policy`: a panic is a trap on wasm32, the same as any bug that aborts.

use super::hostcalls;

/// The request header that makes the module trap.
pub const HEADER: &str = "x-floodgate-test-trap";

/// Traps if the current request carries [`HEADER`].
#[allow(
    clippy::panic,
    reason = "a test-only build whose whole point is to trap"
)]
pub fn on_request_headers() {
    if matches!(hostcalls::request_header(HEADER), Ok(Some(_))) {
        panic!("{HEADER}: trapping on purpose (test build)");
    }
}
