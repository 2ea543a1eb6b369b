//! cargo-fuzz target `json`: see [`rltp_fuzz::json`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::json(data));
