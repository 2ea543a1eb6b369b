//! The engine's transition counters (metrics, `engine::events`): every
//! wind-up, release, eviction, give-up and conclusion that became durable
//! is counted exactly once, including those applied late by a prelude,
//! over both stores; the committer's batch observer sees every batch.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use rltp_engine::EventSnapshot;
use rltp_server::writer::BatchReport;
use rltp_wire::verdict::{SubmitVerdict, Verdict};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

fn counts_every_durable_transition<F: StoreFactory>(f: &F) {
    let mut c = constants();
    c.max_binding_tombstones = 1;
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
    let (a, b) = (RkidKey::random(), RkidKey::random());
    assert_eq!(h.register(&a, &p, 1), Verdict::Registered);
    assert_eq!(h.register(&b, &p, 4), Verdict::Registered);
    let ids: Vec<_> = (0..3)
        .map(|i| {
            let e = envelope(&a.rkid, 500, &format!("a{i}"));
            assert_eq!(h.submit(&a.rkid, &e), SubmitVerdict::Admitted);
            rltp_storage::DepositId::of(&e)
        })
        .collect();
    let e = envelope(&b.rkid, 500, "b");
    assert_eq!(h.submit(&b.rkid, &e), SubmitVerdict::Admitted);
    // One conclusion (a second naming of the same deposit removes nothing).
    assert_eq!(h.conclude(&a.rkid, &p, &ids[..1]).unwrap().removed, 1);
    assert_eq!(h.conclude(&a.rkid, &p, &ids[..1]).unwrap().removed, 0);
    assert_eq!(
        h.engine.events(),
        EventSnapshot {
            concluded: 1,
            ..EventSnapshot::default()
        }
    );
    // Past both orphan horizons, the wind-up deadlines and the deposits'
    // own horizons, noticed late by one sweep: two wind-ups, two releases,
    // three give-ups (two of a, one of b), and one eviction (bound 1).
    h.advance(c.orphan_horizon_ms + c.give_up_horizon_ms + 1);
    h.engine.sweep().unwrap();
    assert_eq!(
        h.engine.events(),
        EventSnapshot {
            wind_ups: 2,
            releases: 2,
            evictions: 1,
            given_up: 3,
            concluded: 1,
            quarantined: 0,
        }
    );
    let stats = h.engine.commit_stats();
    assert_eq!(
        batches.load(Ordering::Relaxed),
        stats.batches.load(Ordering::Relaxed)
    );
    assert_eq!(
        operations.load(Ordering::Relaxed),
        stats.operations.load(Ordering::Relaxed)
    );
}

on_both_stores!(counts_every_durable_transition);
