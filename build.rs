//! Compiles our RLS v3 subset under `proto/` into Rust types in `OUT_DIR`.
//! `protox` is a pure-Rust protobuf compiler, so no `protoc` binary is needed.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let file = "proto/envoy/service/ratelimit/v3/rls.proto";
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile([file], ["proto"])?;
    // The response's dynamic metadata (a google.protobuf.Struct) means nothing to the
    // filter: decode it as an empty message, which skips its bytes, so prost's Struct and
    // Value decoders stay out of the module.
    prost_build::Config::new()
        .extern_path(".google.protobuf.Struct", "crate::wire::proto::Skipped")
        .compile_fds(descriptors)?;
    Ok(())
}
