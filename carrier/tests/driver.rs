//! What the shell adds around the engine, driven through its `Driver`:
//! the group-commit writer reports every committed batch to its observer
//! before answering, and the production meter (`GovernorMeter`) keeps no
//! per-key state it does not need. The engine's own rules are tested
//! without the shell, in `engine/tests/`.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use rltp_engine::{MeterQuotas, Rate};
use rltp_proofs::proof::Purpose;
use rltp_server::meter::GovernorMeter;
use rltp_server::writer::BatchReport;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every committed batch is reported to the observer (only the first one
/// installed), and the reports agree with the writer's statistics.
fn the_batch_observer_sees_every_committed_batch<F: StoreFactory>(f: &F) {
    let c = constants();
    let h = Harness::with(f.make(), c, unlimited());
    let batches = Arc::new(AtomicU64::new(0));
    let operations = Arc::new(AtomicU64::new(0));
    {
        let (b, o) = (Arc::clone(&batches), Arc::clone(&operations));
        assert!(h.engine.observe_batches(Arc::new(move |r: &BatchReport| {
            assert!(r.committed);
            b.fetch_add(1, Ordering::Relaxed);
            o.fetch_add(r.operations as u64, Ordering::Relaxed);
        })));
        assert!(!h.engine.observe_batches(Arc::new(|_: &BatchReport| {})));
    }
    let p = Principal::labelled("p");
    let a = RkidKey::random();
    assert_eq!(h.register(&a, &p, 1), Verdict::Registered);
    for i in 0..3 {
        let e = envelope(&a.rkid, 500, &format!("a{i}"));
        assert_eq!(h.submit(&a.rkid, &e), SubmitVerdict::Admitted);
    }
    h.advance(c.orphan_horizon_ms + c.give_up_horizon_ms + 1);
    h.engine.sweep().unwrap();
    let stats = h.engine.commit_stats();
    assert_eq!(stats.batches.load(Ordering::Relaxed), 5);
    assert_eq!(
        batches.load(Ordering::Relaxed),
        stats.batches.load(Ordering::Relaxed)
    );
    assert_eq!(
        operations.load(Ordering::Relaxed),
        stats.operations.load(Ordering::Relaxed)
    );
}

/// Keyed meter state exists only for held rkids and does not leak:
/// unknown-address traffic creates none; idle keys are dropped by the
/// first sweep at which their budgets are full again, on the engine's
/// clock (no sleep: the harness's manual clock is the meter's time).
fn governor_meter_keeps_no_per_key_state<F: StoreFactory>(f: &F) {
    let meter = Arc::new(GovernorMeter::new(MeterQuotas {
        unknown_address: Rate::new(1_000_000, 1_000_000),
        held_binding: Rate::new(1_000, 5),
        queue: Rate::new(1_000, 5),
        shared_submission: Rate::new(1_000_000, 1_000_000),
    }));
    let h = Harness::with_meter(f.make(), constants(), unlimited(), meter.clone());
    let entries = || rltp_engine::Meter::keyed_entries(&*meter);
    for _ in 0..200 {
        let _ = h
            .engine
            .challenge(&RkidKey::random().rkid, Purpose::Register);
        let stranger = RkidKey::random().rkid;
        assert_eq!(
            h.submit(&stranger, &envelope(&stranger, 300, "s")),
            SubmitVerdict::NoSuchQueue
        );
    }
    assert_eq!(entries(), 0, "unknown addresses get no key");
    let p = Principal::labelled("p");
    let key = RkidKey::random();
    assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
    assert_eq!(
        h.submit(&key.rkid, &envelope(&key.rkid, 300, "held")),
        SubmitVerdict::Admitted
    );
    assert_eq!(
        entries(),
        1,
        "the registration itself named an unknown address"
    );
    h.collect(&key.rkid, &p).unwrap();
    assert_eq!(entries(), 2, "one key per held binding and per held queue");
    // The meter's time is the engine's `now` (the harness's manual clock):
    // every charge above was at T0. A sweep drops a key one emission
    // interval after its theoretical arrival time: the queue key (1 000/s,
    // one charge) at T0 + 2 ms, the collection key (2 000/s, a challenge
    // and a proof) at T0 + 1.5 ms. A sweep before that keeps both.
    h.sweep();
    assert_eq!(entries(), 2, "a sweep at the charging instant keeps both");
    h.advance(1);
    h.sweep();
    assert_eq!(entries(), 2, "1 ms later both are kept");
    h.advance(1);
    h.sweep();
    assert_eq!(
        entries(),
        0,
        "idle keys are dropped once their budgets are full"
    );
}

on_both_stores!(
    the_batch_observer_sees_every_committed_batch,
    governor_meter_keeps_no_per_key_state,
);
