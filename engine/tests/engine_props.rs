//! Property tests: random operation sequences (submit, register/rebind,
//! collect, conclude, clock advances, sweeps) never break the engine's
//! invariants, against the in-memory and the redb store:
//!
//! - no `rkid` holds both a binding and a tombstone; the tombstone store
//!   stays within `max-binding-tombstones`;
//! - occupancy equals the bytes held (per queue and globally), the
//!   elastic bytes equal Σ max(0, queue − floor), counts match;
//! - a recorded generation never goes down (only eviction forgets it);
//! - nothing admitted disappears except by conclusion, or by give-up at or
//!   after its effective horizon (and the sender then reads `given-up`);
//! - reads outside the writer agree with a sweep: the state and every
//!   status evaluated before a late sweep equal those after it.
//!
//! Also: arbitrary bytes into every operation never panic and always get
//! an answer from the closed sets.

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use common::*;
use proptest::prelude::*;
use rltp_engine::horizon::state_at;
use rltp_engine::table::State;
use rltp_engine::{EngineConfig, EngineConstants};
use rltp_proofs::proof::Purpose;
use rltp_storage::{Binding, DepositId, Phase, ReadTxn, Store, Tombstone};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Submit {
        queue: usize,
        salt: u8,
        size: usize,
    },
    Register {
        queue: usize,
        principal: usize,
        generation: u64,
        rebind: bool,
    },
    Collect {
        queue: usize,
        principal: usize,
    },
    Conclude {
        queue: usize,
        principal: usize,
        how_many: usize,
    },
    Advance(u64),
    Sweep,
}

const SIZES: [usize; 4] = [177, 400, 1_000, 2_502];
const STEPS: [u64; 7] = [0, 1, 999, 5_000, 10_000, 25_000, 100_000];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..6u8, 0..SIZES.len())
            .prop_map(|(queue, salt, s)| Op::Submit { queue, salt, size: SIZES[s] }),
        3 => (0..3usize, 0..2usize, 1..5u64, any::<bool>()).prop_map(
            |(queue, principal, generation, rebind)| Op::Register { queue, principal, generation, rebind }
        ),
        2 => (0..3usize, 0..2usize).prop_map(|(queue, principal)| Op::Collect { queue, principal }),
        2 => (0..3usize, 0..2usize, 0..4usize)
            .prop_map(|(queue, principal, how_many)| Op::Conclude { queue, principal, how_many }),
        3 => (0..STEPS.len()).prop_map(|i| Op::Advance(STEPS[i])),
        1 => Just(Op::Sweep),
    ]
}

fn small_constants() -> EngineConstants {
    EngineConstants {
        orphan_horizon_ms: 10_000,
        give_up_horizon_ms: 20_000,
        challenge_lifetime_ms: 60_000,
        queue_floor: 2_000,
        max_queue_bytes: 5_000,
        max_binding_tombstones: 2,
        status_horizon_ms: 30_000,
    }
}

/// One admitted deposit as the test saw it.
#[derive(Debug, Clone)]
struct Tracked {
    queue: usize,
    id: DepositId,
    seq: u64,
    admitted_at: u64,
    own_give_up: u64,
    /// The earliest instant it may be given up: its own horizon, or the
    /// deadline of the wind-up it was admitted into.
    earliest: u64,
    concluded_at: Option<u64>,
    gone: bool,
}

/// A recorded generation and the record it came from.
type Recorded = (u64, Option<Binding>, Option<Tombstone>);

struct Model {
    keys: Vec<RkidKey>,
    principals: Vec<Principal>,
    tracked: Vec<Tracked>,
    /// The last recorded generation and the record it came from.
    generations: Vec<Option<Recorded>>,
}

fn run<S: Store>(store: Arc<S>, ops: &[Op]) {
    let c = small_constants();
    let h = Harness::with(store, c, EngineConfig::new(3 * 2_000 + 3_000, 2));
    let mut m = Model {
        keys: (0..3)
            .map(|i| RkidKey::labelled(&format!("prop/rkid/{i}")))
            .collect(),
        principals: (0..2)
            .map(|i| Principal::labelled(&format!("prop/p/{i}")))
            .collect(),
        tracked: Vec::new(),
        generations: vec![None; 3],
    };
    for (n, op) in ops.iter().enumerate() {
        let before = if matches!(op, Op::Sweep) {
            Some(read_view(&h, &m, &c))
        } else {
            None
        };
        apply(&h, &mut m, op, &c);
        if let Some(before) = before {
            let after = read_view(&h, &m, &c);
            for (q, (b, a)) in before.states.iter().zip(&after.states).enumerate() {
                // Eviction of a tombstone is applied in the transaction that
                // exceeds the bound, which a sweep may run: released → unbound.
                assert!(
                    b == a || (*b == State::Released && *a == State::Unbound),
                    "op {n}: queue {q} read {b:?} before the sweep, {a:?} after"
                );
            }
            assert_eq!(
                before.statuses, after.statuses,
                "op {n}: a late sweep is visible"
            );
        }
        check(&h, &mut m, &c, n);
    }
}

struct View {
    states: Vec<State>,
    statuses: Vec<DepositStatus>,
}

/// The state of every queue and the status of every tracked deposit, as
/// reads outside the writer see them at the clock's now.
fn read_view<S: Store>(h: &Harness<S>, m: &Model, c: &EngineConstants) -> View {
    let read = h.carrier.store().read().unwrap();
    let now = h.now();
    View {
        states: m
            .keys
            .iter()
            .map(|k| {
                let b = read.binding(&k.rkid).unwrap();
                let t = read.tombstone(&k.rkid).unwrap();
                state_at(b.as_ref(), t.as_ref(), now, c)
            })
            .collect(),
        statuses: m
            .tracked
            .iter()
            .map(|t| h.carrier.status(&m.keys[t.queue].rkid, &t.id).unwrap())
            .collect(),
    }
}

fn apply<S: Store>(h: &Harness<S>, m: &mut Model, op: &Op, c: &EngineConstants) {
    match *op {
        Op::Submit { queue, salt, size } => {
            let rkid = m.keys[queue].rkid;
            let bytes = envelope(&rkid, size, &format!("{queue}/{salt}/{size}"));
            let verdict = h.submit(&rkid, &bytes);
            if verdict == SubmitVerdict::Admitted {
                let read = h.carrier.store().read().unwrap();
                let id = DepositId::of(&bytes);
                let d = read.deposit_by_id(&rkid, &id).unwrap().unwrap();
                let earliest = match read.binding(&rkid).unwrap().unwrap().phase {
                    Phase::Closing { deadline } => deadline.min(d.give_up_at),
                    Phase::Live => d.give_up_at,
                };
                assert_eq!(d.admitted_at, h.now());
                assert_eq!(d.give_up_at, h.now() + c.give_up_horizon_ms);
                m.tracked.push(Tracked {
                    queue,
                    id,
                    seq: d.seq,
                    admitted_at: d.admitted_at,
                    own_give_up: d.give_up_at,
                    earliest,
                    concluded_at: None,
                    gone: false,
                });
            }
        }
        Op::Register {
            queue,
            principal,
            generation,
            rebind,
        } => {
            let purpose = if rebind {
                Purpose::Rebind
            } else {
                Purpose::Register
            };
            let verdict = h.present(
                purpose,
                &m.keys[queue],
                &m.principals[principal],
                generation,
            );
            if matches!(
                verdict,
                Verdict::Registered | Verdict::Rebound | Verdict::RegisteredIdempotent
            ) {
                let b = h.binding(&m.keys[queue].rkid).unwrap();
                assert_eq!((b.generation, b.last_collection_at), (generation, h.now()));
                assert_eq!(b.phase, Phase::Live);
            }
        }
        Op::Collect { queue, principal } => {
            let rkid = m.keys[queue].rkid;
            if let Ok(collected) = h.collect(&rkid, &m.principals[principal]) {
                let held: Vec<u64> = h
                    .carrier
                    .store()
                    .read()
                    .unwrap()
                    .deposits(&rkid, None, usize::MAX)
                    .unwrap()
                    .iter()
                    .map(|d| d.seq)
                    .collect();
                let got: Vec<u64> = collected.deposits.iter().map(|d| d.seq).collect();
                assert_eq!(got, held[..got.len()], "admission order");
            }
        }
        Op::Conclude {
            queue,
            principal,
            how_many,
        } => {
            let rkid = m.keys[queue].rkid;
            let named: Vec<DepositId> = h.held_ids(&rkid).into_iter().take(how_many).collect();
            // Stored but past their horizon: the conclusion's prelude gives
            // them up first, so only those still accepted are concluded.
            let held: Vec<DepositId> = named
                .iter()
                .copied()
                .filter(|id| h.carrier.status(&rkid, id).unwrap() == DepositStatus::Accepted)
                .collect();
            let mut ids = named.clone();
            ids.push(DepositId::of(b"not held"));
            if let Ok(done) = h.conclude(&rkid, &m.principals[principal], &ids) {
                assert_eq!(done.removed, held.len());
                let now = h.now();
                for t in m.tracked.iter_mut() {
                    if t.queue == queue
                        && !t.gone
                        && t.concluded_at.is_none()
                        && held.contains(&t.id)
                    {
                        t.concluded_at = Some(now);
                    }
                }
            }
        }
        Op::Advance(ms) => h.advance(ms),
        Op::Sweep => h.sweep(),
    }
}

fn check<S: Store>(h: &Harness<S>, m: &mut Model, c: &EngineConstants, n: usize) {
    let read = h.carrier.store().read().unwrap();
    let occ = read.occupancy().unwrap();
    let now = h.now();
    let (mut total, mut deposits, mut bindings, mut tombstones, mut elastic) = (0, 0, 0, 0, 0);
    for (q, key) in m.keys.iter().enumerate() {
        let b = read.binding(&key.rkid).unwrap();
        let t = read.tombstone(&key.rkid).unwrap();
        assert!(b.is_none() || t.is_none(), "op {n}: queue {q} holds both");
        let held = read.deposits(&key.rkid, None, usize::MAX).unwrap();
        let bytes: u64 = held.iter().map(|d| u64::from(d.len)).sum();
        assert_eq!(
            read.queue_bytes(&key.rkid).unwrap(),
            bytes,
            "op {n}: queue {q}"
        );
        if b.is_none() {
            assert_eq!(bytes, 0, "op {n}: a queue without a binding holds nothing");
        }
        assert!(bytes <= c.max_queue_bytes);
        total += bytes;
        deposits += held.len() as u64;
        elastic += bytes.saturating_sub(c.queue_floor);
        bindings += u64::from(b.is_some());
        tombstones += u64::from(t.is_some());
        // A recorded generation only goes down through eviction, which
        // needs the previous record to be released by now (a tombstone,
        // or a binding whose deadline has passed) — the eviction and a
        // re-registration may share one batch.
        let recorded = b.map(|b| b.generation).or(t.map(|t| t.generation));
        if let (Some((before, prev_b, prev_t)), Some(now_g)) = (m.generations[q], recorded) {
            let evictable = state_at(prev_b.as_ref(), prev_t.as_ref(), now, c) == State::Released;
            assert!(
                now_g >= before || evictable,
                "op {n}: queue {q} generation {before} → {now_g}"
            );
        }
        m.generations[q] = recorded.map(|g| (g, b, t));
    }
    assert_eq!(
        (
            occ.total_bytes,
            occ.deposits,
            occ.bindings,
            occ.tombstones,
            occ.elastic_bytes
        ),
        (total, deposits, bindings, tombstones, elastic),
        "op {n}: occupancy"
    );
    assert!(occ.tombstones <= c.max_binding_tombstones);
    assert!(occ.bindings <= 2, "the private binding limit holds");

    let snapshot = m.tracked.clone();
    for (i, t) in m.tracked.iter_mut().enumerate() {
        if t.gone {
            continue;
        }
        let rkid = m.keys[t.queue].rkid;
        let held = read
            .deposits(&rkid, t.seq.checked_sub(1), 1)
            .unwrap()
            .first()
            .is_some_and(|d| d.seq == t.seq);
        // Another admission of the same bytes later shares the id.
        let shadowed = snapshot[i + 1..]
            .iter()
            .any(|o| o.queue == t.queue && o.id == t.id);
        let status = h.carrier.status(&rkid, &t.id).unwrap();
        if held {
            if status != DepositStatus::Accepted && !shadowed {
                assert!(now >= t.earliest, "op {n}: {t:?} reads {status} early");
            }
            continue;
        }
        t.gone = true;
        match t.concluded_at {
            Some(_) => {
                if !shadowed && now < t.own_give_up {
                    assert_eq!(status, DepositStatus::Accepted, "op {n}: concluded {t:?}");
                }
            }
            None => {
                assert!(
                    now >= t.earliest,
                    "op {n}: {t:?} vanished before its horizon"
                );
                assert!(t.earliest > t.admitted_at, "op {n}: {t:?} had no life");
                if !shadowed && now < t.earliest + c.give_up_horizon_ms {
                    assert_eq!(status, DepositStatus::GivenUp, "op {n}: given-up {t:?}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_mem(ops in prop::collection::vec(op(), 1..60)) {
        run(mem_store(), &ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_redb(ops in prop::collection::vec(op(), 1..40)) {
        let factory = RedbFactory::default();
        run(factory.make(), &ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic and always get a closed-set answer.
    #[test]
    fn arbitrary_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600), pick in 0..4u8) {
        let h = Harness::new(mem_store());
        let p = Principal::labelled("p");
        let key = RkidKey::labelled("prop/rkid/0");
        prop_assert_eq!(h.register(&key, &p, 1), Verdict::Registered);
        match pick {
            0 => {
                let v = h.carrier.register(&bytes).unwrap();
                prop_assert_eq!(v, Verdict::Malformed);
            }
            1 => {
                let e = h.carrier.collect(&bytes, None, 10).unwrap_err();
                prop_assert_eq!(e.verdict(), Some(Verdict::Malformed));
            }
            2 => {
                let e = h.carrier.conclude(&bytes, &[DepositId::of(&bytes)]).unwrap_err();
                prop_assert_eq!(e.verdict(), Some(Verdict::Malformed));
            }
            _ => {
                let v = h.submit(&key.rkid, &bytes);
                prop_assert_eq!(v, SubmitVerdict::Bounds);
            }
        }
    }
}
