//! libFuzzer's entry to `flowhost_fuzz::connect_token` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::connect_token(data));
