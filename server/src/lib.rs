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
//! ## One deposit, end to end
//! Each step is one file, read top to bottom; the answer travels back as a
//! value (a [`writer::Ticket`]), not through a callback:
//!
//! 1. `service/endpoint.rs`: the accept loop takes the QUIC connection;
//!    `service/stream.rs` spawns a task per bidirectional stream.
//! 2. `service/stream.rs` `read_request`: chunks of the stream go into
//!    `rltp_wire`'s sans-IO `FrameDecoder` (`wire/src/decoder.rs`, through
//!    `rltp_quic`'s thin `FrameReader`): the prefix under the frozen
//!    limits, the header (`Request::from_header`), `size` against the
//!    prefix, the body under its bound, then the end of the stream.
//! 3. `service/ops/mod.rs` routes `submit` to `service/ops/submit.rs`.
//! 4. `driver.rs` `submit_async` / `submit_burst`: `Engine::screen`
//!    (`engine/src/submit.rs`: s2 and the deposit id) on the caller's task,
//!    then the one way into the writer: `Writer::submit(Job::submit(…))`
//!    (`writer/job.rs`), which returns the ticket.
//! 5. `writer/mod.rs` `run_batch`, on the writer thread: one clock
//!    reading for the batch, the batch's hints prefetched
//!    (`WriteTxn::prefetch`), the engine's prelude (`Engine::prelude`: the
//!    transitions due now), then each job's arm of `Job::run`
//!    (`writer/job.rs`) — for this one `Engine::submit`
//!    (`engine/src/submit.rs`: s1–s6 and the append) — and one
//!    `commit_deferred`.
//! 6. `writer/mod.rs` `syncer_loop`: one `Store::sync` (one fdatasync
//!    for every batch waiting), the batch's events published, then
//!    `Job::settle` sends each held verdict into its ticket.
//! 7. `service/ops/submit.rs` `answered`: the verdict counted, the queue's
//!    watch sessions woken (`service/watch.rs`), the answer encoded
//!    (`wire/src/response.rs`) and written once.
//!
//! Two hand-offs are still calls upward: the writer tells the metrics
//! about each batch through a `BatchObserver`, and the engine asks the
//! shell's meter (`meter.rs`) through `dyn Meter` at r2 and s4.
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
