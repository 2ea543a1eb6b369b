//! Shared test harness for the shell's tests of the engine's `Driver`
//! (the writer, the clocks, the meter): a driver over any `Store` read
//! from a manual clock. The vectors, keys, envelopes, store factories and
//! the exchanges every harness drives are `rltp-testkit`'s, shared with
//! the engine's own rule tests (which run without the shell, on the
//! thread-free harness in `engine/tests/common/mod.rs`).

#![allow(dead_code, clippy::unwrap_used, clippy::panic, missing_docs)]

use rltp_engine::{BudgetMeter, EngineConfig, EngineConstants, Meter};
use rltp_server::clock::ManualClock;
use rltp_server::driver::Driver;
use rltp_storage::Store;
use std::sync::Arc;

pub use rltp_testkit::*;

pub struct Harness<S: Store> {
    pub engine: Driver<S>,
    pub clock: Arc<ManualClock>,
    pub meter: Arc<BudgetMeter>,
}

impl<S: Store> Harness<S> {
    pub fn new(store: Arc<S>) -> Harness<S> {
        Harness::with(store, constants(), unlimited())
    }

    pub fn with(store: Arc<S>, constants: EngineConstants, config: EngineConfig) -> Harness<S> {
        let meter = Arc::new(BudgetMeter::new());
        let mut h = Harness::with_meter(store, constants, config, meter.clone());
        h.meter = meter;
        h
    }

    /// An engine metered by `meter` (`self.meter` is then a detached
    /// budget meter the engine does not use).
    pub fn with_meter(
        store: Arc<S>,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Harness<S> {
        let clock = Arc::new(ManualClock::new(T0));
        let engine =
            Driver::start(store, clock.clone(), carrier_id(), constants, config, meter).unwrap();
        Harness {
            engine,
            clock,
            meter: Arc::new(BudgetMeter::new()),
        }
    }
}

// The shell's `Driver`: each call through its writer thread.
drive_through!(Harness.engine, set: |h, now| h.clock.set(now));
