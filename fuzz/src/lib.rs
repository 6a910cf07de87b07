//! Fuzz targets for every parser that takes bytes from outside: one module per target,
//! each with a plain `run(&[u8])` body.
//!
//! The same body runs in two harnesses:
//! - libFuzzer (`make fuzz`, through cargo-fuzz): `fuzz_targets/<name>.rs` hands each
//!   generated input to `run`, for `FUZZ_SECONDS` per target;
//! - `cargo test` (`tests/replay.rs`, part of `make test`): every committed input of
//!   `corpus/<name>/` and `regressions/<name>/`, then a fixed batch of mutations of them,
//!   on stable Rust with no fuzzing tools, so a regression fails CI.
//!
//! A target fails by panicking (an `assert!` on what must hold whatever the input) or by
//! aborting; [`cap`] aborts on any single allocation over [`cap::LIMIT`] bytes in both
//! harnesses, since libFuzzer's own `-malloc_limit_mb` only works under a sanitizer.

#![warn(missing_docs)]

pub mod cap;
pub mod descriptors;
pub mod filter_config;
pub mod http2_frames;
pub mod input;
pub mod mutate;
pub mod rls_answer;
pub mod server_config;
pub mod server_request;
pub mod usage_stream;

/// A target's body: any bytes in, a panic or an abort on a finding.
pub type Body = fn(&[u8]);

/// Every target by name (its directory under `corpus/` and `regressions/`) and body.
pub const TARGETS: [(&str, Body); 7] = [
    ("filter_config", filter_config::run),
    ("rls_answer", rls_answer::run),
    ("descriptors", descriptors::run),
    ("server_config", server_config::run),
    ("server_request", server_request::run),
    ("usage_stream", usage_stream::run),
    ("http2_frames", http2_frames::run),
];

#[global_allocator]
static ALLOCATOR: cap::Capped = cap::Capped;
