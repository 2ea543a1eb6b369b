//! cargo-fuzz target `declaration`: see [`rltp_fuzz::declaration`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::declaration(data));
