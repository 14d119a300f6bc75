//! libFuzzer's entry to `flowhost_fuzz::flow_v2_body` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::flow_v2_body(data));
