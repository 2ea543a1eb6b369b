//! # rltp-testkit: what the engine's and the shell's tests share
//!
//! One home for the test support that `engine/tests/` (the engine alone,
//! one step at a time) and `carrier/tests/` (the shell's `Driver`, its
//! writer thread, clocks and meter) both need:
//!
//! | module | what it holds |
//! |---|---|
//! | [`vectors`] | the shipped vector files through the one resolver, JSON accessors, hex |
//! | [`keys`] | the vectors' carrier, control principals and address keys (labelled, derived, random) |
//! | [`envelopes`] | shape-valid sealed envelopes of an exact size |
//! | [`stores`] | fresh stores of every embedded backend and [`on_both_stores!`] |
//! | [`harness`] | the test constants and clock origin, and [`Drive`]: the exchanges a harness performs (challenge, open, sign, present) and what it reads back, written once over the calls each harness implements |
//!
//! It is a dev-only crate (`publish = false`, a dev-dependency only): it
//! depends on no shell crate, so the engine's tests keep a tree free of
//! the server, tokio and quinn. Its helpers panic on a failed
//! expectation, which is how a test fails.

#![allow(clippy::unwrap_used, clippy::panic)] // test support: a failed expectation fails the test

pub mod envelopes;
pub mod harness;
pub mod keys;
pub mod stores;
pub mod vectors;

pub use envelopes::*;
pub use harness::*;
pub use keys::*;
pub use stores::*;
pub use vectors::*;
