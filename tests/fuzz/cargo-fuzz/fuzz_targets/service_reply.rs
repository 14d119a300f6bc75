//! libFuzzer's entry to `flowhost_fuzz::service_reply` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::service_reply(data));
