//! The engine's transition counters (metrics, `engine::events`): every
//! wind-up, release, eviction, give-up and conclusion that became durable
//! is counted exactly once, including those applied late by a prelude,
//! over every embedded store. (That the shell's writer reports every batch
//! to its observer is the writer's: `carrier/tests/driver.rs`.)

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use rltp_engine::EventSnapshot;
use rltp_wire::verdict::{SubmitVerdict, Verdict};

fn counts_every_durable_transition<F: StoreFactory>(f: &F) {
    let mut c = constants();
    c.max_binding_tombstones = 1;
    let h = Harness::with(f.make(), c, unlimited());
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
        h.carrier.events(),
        EventSnapshot {
            concluded: 1,
            ..EventSnapshot::default()
        }
    );
    // Past both orphan horizons, the wind-up deadlines and the deposits'
    // own horizons, noticed late by one sweep: two wind-ups, two releases,
    // three give-ups (two of a, one of b), and one eviction (bound 1).
    h.advance(c.orphan_horizon_ms + c.give_up_horizon_ms + 1);
    h.carrier.sweep().unwrap();
    assert_eq!(
        h.carrier.events(),
        EventSnapshot {
            wind_ups: 2,
            releases: 2,
            evictions: 1,
            given_up: 3,
            concluded: 1,
            quarantined: 0,
        }
    );
}

on_both_stores!(thread_free: counts_every_durable_transition);
