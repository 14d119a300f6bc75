//! libFuzzer's entry to `flowhost_fuzz::presence_envelope` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::presence_envelope(data));
