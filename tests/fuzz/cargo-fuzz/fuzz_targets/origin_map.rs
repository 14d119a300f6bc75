//! libFuzzer's entry to `flowhost_fuzz::origin_map` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::origin_map(data));
