//! Torture tests (issue 6): the real `rltp-carrier` binary under crashes,
//! floods and resource faults, on loopback QUIC.
//!
//! Built as the `torture` test of the `rltp-carrier` package
//! (`carrier/Cargo.toml`, `[[test]] path = "../tests/torture/main.rs"`),
//! like `e2e`, so cargo builds the binary in the same invocation and
//! passes its path in `CARGO_BIN_EXE_rltp-carrier`. The short forms run in
//! the README's test command; environment knobs select the long forms
//! (see `tests/README.md`).

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod crash;
mod failover;
mod faults;
mod floods;
mod harness;
mod hygiene;
#[path = "../support/carrier.rs"]
mod support;
