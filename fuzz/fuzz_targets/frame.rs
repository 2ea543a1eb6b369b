//! cargo-fuzz target `frame`: see [`rltp_fuzz::frame`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::frame(data));
