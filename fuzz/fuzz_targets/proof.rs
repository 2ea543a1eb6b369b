//! cargo-fuzz target `proof`: see [`rltp_fuzz::proof`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::proof(data));
