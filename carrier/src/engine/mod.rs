//! The sans-IO carrier engine: the §5a.3 state table, r1–r5, s1–s6,
//! metering and the §5a.9 horizons, over a [`rltp_storage::Store`] and a
//! [`clock::Clock`].
//!
//! | module | rule |
//! |---|---|
//! | [`table`] | the §5a.3 state table, as data |
//! | [`clock`] | injected time |
//! | [`config`] | published constants and private limits (§4.4) |
//! | [`meter`] | admission metering keyed per queue and globally (§5a.5, guarantees 4, 5) |
//! | [`capacity`] | s5, s6 and r4 under guarantees 4, 5 and the return priority |
//! | [`challenge`] | challenges, consumption before verification, guarantee-3 counters |
//! | [`horizon`] | §5a.8/§5a.9 transitions at their normative instants; status |
//! | [`events`] | counts of durable transitions (metrics) |
//! | [`ops`] | the [`Engine`] and its operations |
//! | [`outcome`] | payloads and non-verdict errors |

mod binding;
pub mod capacity;
pub mod challenge;
pub mod clock;
pub mod config;
pub mod events;
pub mod horizon;
pub mod meter;
pub mod ops;
pub mod outcome;
mod queue;
pub mod table;

pub use challenge::{CounterSnapshot, IssuedChallenge};
pub use config::{EngineConfig, EngineConstants, Limits};
pub use events::EventSnapshot;
pub use meter::{BudgetMeter, GovernorMeter, Meter, MeterKey, MeterQuotas, Rate};
pub use ops::Engine;
pub use outcome::{Collected, CollectedDeposit, Concluded, EngineError, SessionError};
