//! Compiles the shared RLS v3 subset and the xDS subset under `../proto` into Rust types
//! and tonic stubs in `OUT_DIR`. `protox` is a pure-Rust protobuf compiler, so no
//! `protoc` is needed.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let files = [
        "../proto/envoy/service/ratelimit/v3/rls.proto",
        // The xDS configuration source: ADS and the reference's RateLimitConfig.
        "../proto/envoy/service/discovery/v3/discovery.proto",
        "../proto/ratelimit/config/ratelimit/v3/rls_conf.proto",
    ];
    println!("cargo:rerun-if-changed=../proto");
    let descriptors = protox::compile(files, ["../proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
