//! libFuzzer entry point; the body is [`floodgate_fuzz::http2_frames::run`], which `cargo test` replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| floodgate_fuzz::http2_frames::run(data));
