//! libFuzzer entry point; the body is [`floodgate_fuzz::usage_stream::run`], which `cargo test` replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| floodgate_fuzz::usage_stream::run(data));
