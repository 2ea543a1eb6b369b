//! The fuzz crate (issue 6): the target bodies ([`targets`]) and the
//! carrier's wire codec they fuzz.
//!
//! The codec is compiled here **from the carrier's own source files**
//! (`carrier/src/wire/`, and the verdict sets it reads,
//! `carrier/src/engine/verdict.rs`) rather than through the `rltp-carrier`
//! crate, which would pull its whole service stack (QUIC, TLS, HTTP, CLI)
//! into the instrumented build: that halves the CI fuzz build. The codec
//! depends only on `rltp-proofs`, `rltp-storage` (`DepositId`) and
//! `thiserror`; should it ever reach further into the carrier, this build
//! fails and says so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../../carrier/src/engine/verdict.rs"]
pub mod verdict;

/// `crate::engine::verdict`, as the wire codec names it.
pub mod engine {
    pub use super::verdict;
}

#[path = "../../carrier/src/wire/mod.rs"]
pub mod wire;

pub mod targets;

pub use targets::*;
