//! Compiles our RLS v3 subset under `proto/` into Rust types in `OUT_DIR`.
//! `protox` is a pure-Rust protobuf compiler, so no `protoc` binary is needed.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let file = "proto/envoy/service/ratelimit/v3/rls.proto";
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile([file], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
