//! libFuzzer's entry to `flowhost_fuzz::cel_source` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::cel_source(data));
