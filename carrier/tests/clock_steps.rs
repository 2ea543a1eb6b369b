//! Wall-clock steps (`PROTOCOL.md` §11, issue 6): the engine on a
//! [`SteadyClock`] whose wall and monotonic sources are manual clocks.
//!
//! - A **forward** step of 30 days gives up nothing and winds up nothing;
//!   the horizons still fall at their instants measured on the monotonic
//!   clock, to the millisecond. (The same step on a raw clock gives up
//!   every deposit and releases every binding at once: shown as the
//!   hazard the steady clock removes.)
//! - A **backward** step of 30 days keeps nothing longer: the deposit is
//!   given up at its instant, and a challenge issued before the step still
//!   expires after its lifetime.
//! - A start with the wall clock behind the last recorded instant resumes
//!   from that instant.
//!
//! Every step is counted and reported (`SteadyClock::steps`, `offset_ms`).

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use rltp_engine::table::State;
use rltp_engine::{BudgetMeter, SessionError};
use rltp_proofs::proof::Purpose;
use rltp_server::clock::{Clock, ManualClock, STEP_TOLERANCE_MS, SteadyClock};
use rltp_server::driver::Driver;
use rltp_storage::DepositId;
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use std::sync::Arc;

const DAY: u64 = 86_400_000;
/// Where the wall clock starts (ms): late enough to step 30 days back.
const START: u64 = 100 * DAY;

/// A harness whose engine reads `clock`.
fn harness(clock: Arc<dyn Clock>) -> Harness<rltp_storage::mem::MemStore> {
    let meter = Arc::new(BudgetMeter::new());
    let engine = Driver::start(
        mem_store(),
        clock,
        carrier_id(),
        constants(),
        unlimited(),
        meter.clone(),
    )
    .unwrap();
    Harness {
        engine,
        clock: Arc::new(ManualClock::new(0)),
        meter,
    }
}

struct Steady {
    wall: Arc<ManualClock>,
    monotonic: Arc<ManualClock>,
    clock: Arc<SteadyClock>,
}

fn steady(floor: u64) -> Steady {
    let wall = Arc::new(ManualClock::new(START));
    let monotonic = Arc::new(ManualClock::new(5));
    let clock = Arc::new(SteadyClock::start(wall.clone(), monotonic.clone(), floor));
    Steady {
        wall,
        monotonic,
        clock,
    }
}

/// A live binding at `START` holding one deposit admitted then.
fn bound_with_deposit(h: &Harness<rltp_storage::mem::MemStore>) -> (RkidKey, Principal, DepositId) {
    let key = RkidKey::labelled("clock-steps/rkid");
    let principal = Principal::labelled("clock-steps/principal");
    assert_eq!(h.register(&key, &principal, 1), Verdict::Registered);
    let bytes = envelope(&key.rkid, 400, "clock-steps/deposit");
    assert_eq!(h.submit(&key.rkid, &bytes), SubmitVerdict::Admitted);
    (key, principal, DepositId::of(&bytes))
}

fn status(
    h: &Harness<rltp_storage::mem::MemStore>,
    key: &RkidKey,
    id: &DepositId,
) -> DepositStatus {
    h.engine.status(&key.rkid, id).unwrap()
}

#[test]
fn a_raw_forward_step_would_give_up_everything_at_once() {
    let clock = Arc::new(ManualClock::new(START));
    let h = harness(clock.clone());
    let (key, _, id) = bound_with_deposit(&h);
    clock.advance(30 * DAY);
    h.sweep();
    assert_eq!(h.state(&key.rkid), State::Released);
    assert!(h.held_ids(&key.rkid).is_empty());
    assert_eq!(h.engine.events().given_up, 1);
    assert_eq!(status(&h, &key, &id), DepositStatus::Unknown);
}

#[test]
fn a_forward_step_moves_no_horizon() {
    let s = steady(0);
    let h = harness(s.clock.clone());
    let (key, principal, id) = bound_with_deposit(&h);
    let c = constants();

    s.wall.advance(30 * DAY);
    h.sweep();
    assert_eq!(s.clock.steps(), 1);
    assert_eq!(s.clock.offset_ms(), (30 * DAY) as i64);
    assert_eq!(h.now(), START, "the carrier's time did not jump");
    assert_eq!(h.state(&key.rkid), State::Live);
    assert_eq!(h.held_ids(&key.rkid), vec![id]);
    assert_eq!(status(&h, &key, &id), DepositStatus::Accepted);
    assert_eq!(h.engine.events().given_up, 0);
    // A collect still works (and restarts the orphan horizon).
    assert_eq!(h.collect(&key.rkid, &principal).unwrap().deposits.len(), 1);

    // The give-up horizon falls at its instant on the monotonic clock;
    // the wall clock keeps running too, so no further step is reported.
    let give_up = c.give_up_horizon_ms;
    s.monotonic.advance(give_up - 1);
    s.wall.advance(give_up - 1);
    h.sweep();
    assert_eq!(h.held_ids(&key.rkid), vec![id], "kept until its instant");
    s.monotonic.advance(1);
    s.wall.advance(1);
    h.sweep();
    assert!(h.held_ids(&key.rkid).is_empty(), "given up at its instant");
    assert_eq!(status(&h, &key, &id), DepositStatus::GivenUp);
    assert_eq!(h.engine.events().given_up, 1);
    assert_eq!(s.clock.steps(), 1);
}

#[test]
fn a_backward_step_keeps_nothing_longer() {
    let s = steady(0);
    let h = harness(s.clock.clone());
    let (key, principal, id) = bound_with_deposit(&h);
    let c = constants();
    // A challenge issued before the step.
    let proof = h
        .session_proof(Purpose::Collect, &key.rkid, &principal)
        .unwrap();

    s.wall.set(START - 30 * DAY);
    h.sweep();
    assert_eq!(s.clock.steps(), 1);
    assert_eq!(s.clock.offset_ms(), -((30 * DAY) as i64));
    assert_eq!(h.now(), START);

    // The challenge still expires after its lifetime.
    s.monotonic.advance(c.challenge_lifetime_ms);
    s.wall.advance(c.challenge_lifetime_ms);
    assert_eq!(
        spelling(&h.engine.collect(&proof, None, 10)),
        "refused(possession-failed)"
    );
    assert!(matches!(
        h.engine.collect(&proof, None, 10),
        Err(SessionError::Refused(Verdict::PossessionFailed))
    ));

    // The deposit is given up at admission + give-up-horizon, carrier time.
    s.monotonic
        .advance(c.give_up_horizon_ms - c.challenge_lifetime_ms - 1);
    s.wall
        .advance(c.give_up_horizon_ms - c.challenge_lifetime_ms - 1);
    h.sweep();
    assert_eq!(h.held_ids(&key.rkid), vec![id]);
    assert_eq!(h.now(), START + c.give_up_horizon_ms - 1);
    s.monotonic.advance(1);
    s.wall.advance(1);
    h.sweep();
    assert!(h.held_ids(&key.rkid).is_empty());
    assert_eq!(status(&h, &key, &id), DepositStatus::GivenUp);
    assert_eq!(s.clock.steps(), 1);
}

#[test]
fn drift_within_the_tolerance_is_not_a_step() {
    let s = steady(0);
    s.wall.advance(STEP_TOLERANCE_MS as u64);
    assert_eq!(s.clock.now(), START);
    assert_eq!(s.clock.steps(), 0);
    s.wall.advance(1);
    assert_eq!(s.clock.now(), START);
    assert_eq!(s.clock.steps(), 1);
    assert_eq!(s.clock.offset_ms(), STEP_TOLERANCE_MS + 1);
}

#[test]
fn a_start_behind_the_recorded_instant_resumes_from_it() {
    let s = steady(START + 7 * DAY);
    assert_eq!(s.clock.now(), START + 7 * DAY);
    assert_eq!(s.clock.steps(), 1);
    assert_eq!(s.clock.offset_ms(), -((7 * DAY) as i64));
    s.monotonic.advance(250);
    assert_eq!(s.clock.now(), START + 7 * DAY + 250);
    // A floor in the past changes nothing.
    let past = steady(START - 1);
    assert_eq!(past.clock.now(), START);
    assert_eq!(past.clock.steps(), 0);
}
