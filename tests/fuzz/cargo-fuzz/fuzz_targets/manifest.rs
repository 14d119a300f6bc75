//! libFuzzer's entry to `flowhost_fuzz::manifest` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::manifest(data));
