//! # rltp-carrier
//!
//! The RLTP carrier (Delivery Contract 0.80, §4.4 carrier role, §5a).
//!
//! - [`engine`]: the sans-IO rules — the binding state table, r1–r5,
//!   s1–s6, metering and horizons — over a store and a clock.
//! - [`server`], [`client`]: the QUIC service and its client library.
//! - [`cli`]: the `rltp-carrier` subcommands.
//! - [`conformance`]: the black-box conformance runner (any carrier, from
//!   the wire).
//! - [`admin`]: backup, restore and counts for operators (no
//!   cross-principal answers, §5a.1).

pub mod admin;
pub mod cli;
pub mod client;
pub mod config;
pub mod conformance;
pub mod engine;
pub mod net;
pub mod server;
pub mod tls;
