//! libFuzzer's entry to `flowhost_fuzz::component` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::component(data));
