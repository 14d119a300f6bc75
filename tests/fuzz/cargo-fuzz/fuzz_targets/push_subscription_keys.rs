//! libFuzzer's entry to `flowhost_fuzz::push_subscription_keys` (tests/fuzz/src).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flowhost_fuzz::push_subscription_keys(data));
