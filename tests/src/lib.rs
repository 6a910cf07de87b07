//! Support for floodgate's end-to-end tests: real processes, real sockets.
//!
//! Every test starts what it needs and stops it when the handle drops: an [`Envoy`]
//! process loading the built `floodgate.wasm`, an in-process [`Upstream`] that counts
//! what reaches it, and the real `floodgate-server`. Everything listens on 127.0.0.1
//! port 0 and reports the port it got, so tests run in parallel without clashing.
//!
//! The binaries are found through `FLOODGATE_ENVOY`, `FLOODGATE_WASM` and
//! `FLOODGATE_SERVER` (the Makefile sets them), or at their default places in the
//! repository. A missing one fails the test with the command that builds it.

pub mod client;
pub mod configs;
pub mod envoy;
pub mod examples;
pub mod fake_rls;
pub mod holding_rls;
pub mod istio;
pub mod kube_validate;
pub mod lds;
pub mod llm_upstream;
pub mod manifests;
pub mod markdown;
pub mod oci;
pub mod paths;
pub mod raw_http;
pub mod registry;
pub mod server;
pub mod slow_upstream;
pub mod soak;
pub mod upstream;
pub mod wait;
pub mod wasm_module;

pub use client::{burst, client, grpc_client, Reply};
pub use envoy::Envoy;
pub use lds::DynamicEnvoy;
pub use llm_upstream::LlmUpstream;
pub use registry::Registry;
pub use server::Server;
pub use slow_upstream::SlowUpstream;
pub use upstream::Upstream;
