//! cargo-fuzz target `shape`: see [`rltp_fuzz::shape`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::shape(data));
