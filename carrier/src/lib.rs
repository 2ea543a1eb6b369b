//! # rltp-carrier
//!
//! The RLTP carrier (Delivery Contract 0.80, §4.4 carrier role, §5a).
//!
//! - [`server`], [`client`]: the QUIC service and its client library.
//! - [`cli`]: the `rltp-carrier` subcommands.
//! - [`conformance`]: the black-box conformance runner (any carrier, from
//!   the wire).
//! - [`admin`]: backup, restore and counts for operators (no
//!   cross-principal answers, §5a.1).

pub mod admin;
pub mod cli;
pub mod clock;
pub mod config;
pub mod conformance;
pub mod data_dir;
pub mod defaults;
pub mod driver;
pub mod meter;
pub mod server;
pub mod tls;
pub mod writer;
