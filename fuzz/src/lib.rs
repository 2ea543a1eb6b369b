//! The fuzz crate (issue 6): the target bodies ([`targets`]) over the
//! parsers of untrusted input.
//!
//! The wire codec comes from the `rltp-wire` crate directly: it has no
//! I/O, QUIC, TLS or storage dependency, so the instrumented build never
//! compiles the carrier's service stack.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod targets;

pub use targets::*;
