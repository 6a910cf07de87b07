//! Compiles the shared RLS v3 subset under `../proto` into Rust types and tonic stubs in
//! `OUT_DIR`. `protox` is a pure-Rust protobuf compiler, so no `protoc` is needed.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let file = "../proto/envoy/service/ratelimit/v3/rls.proto";
    println!("cargo:rerun-if-changed=../proto");
    let descriptors = protox::compile([file], ["../proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
