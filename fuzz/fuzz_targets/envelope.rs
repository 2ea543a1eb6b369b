//! cargo-fuzz target `envelope`: see [`rltp_fuzz::envelope`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rltp_fuzz::envelope(data));
