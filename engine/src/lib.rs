//! # rltp-engine: the carrier's rules as a sans-IO core
//!
//! The §5a.3 binding state table, r1–r5, s1–s6, admission metering and
//! the §5a.8/§5a.9 horizons, as functions of (store transaction, input,
//! `now`). Every operation returns its verdict, and records the
//! transitions it realizes (wind-ups, releases, evictions, give-ups,
//! conclusions, quarantines) into the caller's [`Tally`] — events are
//! data, published by the caller once its transaction is durable.
//!
//! | module | rule |
//! |---|---|
//! | [`table`] | the §5a.3 state table, as data |
//! | [`register`] | §5a.3 r1–r5, one named function each |
//! | [`submit`] | §5a.5 s1–s6, one named function each |
//! | [`session`] | §5a.7/§5a.8 collect and conclude, the watch page, sender status |
//! | [`revision`] | §4.4 declaration revisions, applied prospectively |
//! | [`horizon`] | §5a.8/§5a.9 transitions at their normative instants; status |
//! | [`capacity`] | s5, s6 and r4 under guarantees 4, 5 and the return priority |
//! | [`meter`] | admission metering keys, per queue and globally (§5a.5, guarantees 4, 5) |
//! | [`challenge`] | challenges, consumption before verification, guarantee-3 counters |
//! | [`config`] | published constants and private limits (§4.4) |
//! | [`events`] | the [`Tally`] of transitions and the counters of durable ones |
//! | [`outcome`] | payloads and the errors that are not verdicts |
//!
//! What this crate does **not** do: it reads no clock (every instant is
//! an argument, `now`), starts no thread, draws from no global RNG (a
//! challenge is given its CSPRNG), keeps no thread-local state, and has no
//! async runtime, network or file I/O. The store is reached only through
//! the `rltp-storage` traits it is handed. Sequencing the operations into
//! one write transaction per batch, making it durable and answering after
//! that is the shell's (`rltp-carrier`: the group-commit writer, the
//! clocks, the rate meter, QUIC). So every rule runs in a unit test with
//! an injected instant, and days of horizons pass in microseconds
//! (`engine/tests/horizons.rs`). The rule tests (`engine/tests/engine_*.rs`:
//! every engine section of the shipped vectors, the rules beyond them,
//! property tests, the event counts) drive the engine one step at a time on
//! a thread-free harness (`engine/tests/common/mod.rs`), and the `rltp-sim`
//! crate runs it over the log store on a simulated disk from one seed.
//!
//! Errors: a store failure is never a verdict; the caller answers it as
//! the retriable transport-level `unavailable` (`PROTOCOL.md` §6), never
//! as `refused(capacity)` or `registration-refused(capacity)`, which say
//! something about the carrier's occupancy (§4.4 guarantee 5 forbids the
//! former to a queue below its floor). A held deposit whose stored bytes
//! fail their check, met by collect, s3 or a watch page, is quarantined:
//! its quarantine record is written and it is given up at once, so its
//! sender's status answers `given-up` and a byte-identical resubmission is
//! admitted afresh. Nothing here panics on input.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod binding;
pub mod capacity;
pub mod challenge;
pub mod config;
pub mod events;
pub mod horizon;
pub mod meter;
pub mod outcome;
mod queue;
pub mod register;
pub mod revision;
pub mod session;
mod state;
pub mod submit;
pub mod table;

pub use binding::state_of;
pub use challenge::{CounterSnapshot, IssuedChallenge};
pub use config::{EngineConfig, EngineConstants, Limits};
pub use events::{Event, EventCounters, EventSnapshot, Tally};
pub use meter::{BudgetMeter, Meter, MeterKey, MeterQuotas, Rate, Unmetered};
pub use outcome::{CollectPage, Collected, CollectedDeposit, Concluded, EngineError, SessionError};
pub use register::{Authorized, Operation};
pub use session::WatchPage;
pub use state::Engine;
pub use submit::Submission;
