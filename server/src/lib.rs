//! # rltp-server: the carrier's server shell
//!
//! The RLTP carrier (Delivery Contract 0.80, §4.4 carrier role, §5a) as a
//! service: the thin shell around the sans-IO rules of [`rltp_engine`]. It
//! owns everything that touches the operating system — threads, clocks,
//! the CSPRNG, sockets, files — and decides nothing itself.
//!
//! | module | what |
//! |---|---|
//! | [`writer`] | the group-commit writer thread and its syncer: one typed job per operation, one clock reading per batch, the engine's prelude, one fsync per group, answers only after durability |
//! | [`driver`] | [`driver::Driver`]: one call per operation over the engine, the store, the clock, the RNG and the writer |
//! | [`clock`] | the OS clocks (`SystemClock`, `MonotonicClock`, `SteadyClock`) and the test `ManualClock` |
//! | [`meter`] | the governor rate meter behind the engine's `Meter` trait |
//! | [`service`] | the QUIC service, the operator's HTTP endpoint, the control socket, the declaration, the data dir's lineage |
//! | [`tls`] | the server's certificate (generated or CA-issued) and config |
//! | [`config`], [`defaults`], [`data_dir`] | `carrier.toml`, every operational constant with its reason, the data-dir layout |
//! | [`admin`] | backup, restore, counts and renewals for operators (no cross-principal answers, §5a.1) |
//!
//! The layers below it, by distance from the OS: `rltp-proofs` (bytes in,
//! typed values out), `rltp-wire` (the wire profile's codecs and the frame
//! decoder), `rltp-engine` (the rules, sans-IO), `rltp-storage` (the
//! `Store` trait and its backends) and `rltp-quic` (the QUIC and TLS
//! plumbing the server shares with the client library). What this crate
//! does **not** do: it holds no protocol rule (a verdict comes from the
//! engine alone), no codec (the wire crate's) and no client: it does not
//! depend on `rltp-client`. The command line is `rltp-cli`'s and the
//! `rltp-carrier` binary's; the conformance runner is `rltp-conformance`.

pub mod admin;
pub mod clock;
pub mod config;
pub mod data_dir;
pub mod defaults;
pub mod driver;
pub mod meter;
pub mod service;
pub mod tls;
pub mod writer;
