//! # rltp-sim: the carrier in a seeded deterministic simulation
//!
//! In the spirit of TigerBeetle's VOPR (`src/vopr.zig`,
//! `src/testing/storage.zig`) and FoundationDB's simulator: **one thread**,
//! a **simulated clock**, the **real engine** (`rltp-engine`) over the
//! **real log store** (`rltp_storage::log_store`) on a **simulated disk**
//! ([`rltp_storage::fault_fs::FaultFs`]: at a power cut every write not
//! covered by a completed `fdatasync` is dropped, torn or kept), and a
//! random workload drawn from **one seed**:
//! registrations, deposits (valid, invalid and resent), collects,
//! concludes, time passing (by milliseconds, and past horizons, so that
//! deposits are given up and bindings wind up and are released), sweeps,
//! snapshots, housekeeping, power cuts (between batches, and between a
//! batch's commit and its `fdatasync`) and clean restarts, each followed
//! by recovery.
//!
//! The shell's call sequence is mirrored without its threads
//! ([`world`]): outside the writer the challenge, r1–r3 and the s2
//! screen; then one batch — prefetch, prelude at `now`, the jobs,
//! commit, `fdatasync` — and only then the answers. The [`model`] records
//! what was acknowledged and checks the invariants after **every** step.
//!
//! One seed replays a run exactly: every draw comes from one `StdRng`
//! seeded with it (the workload, the keys, the engine's CSPRNG, the crash
//! images), nothing reads the OS clock, and every container iterated is
//! ordered. Each step appends one line to the trace, and the run's
//! [`Outcome::digest`] is the SHA-256 of the trace. A failure names its
//! seed, its step, the invariant, and the command that replays it:
//! `cargo run -p rltp-sim -- --seed N --steps K`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod model;
mod run;
pub mod workload;
pub mod world;

pub use run::{Failure, Outcome, run};

/// Steps of one run unless told otherwise.
pub const DEFAULT_STEPS: usize = 200;
