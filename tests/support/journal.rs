//! The journal model shared by the store crash tests
//! (`carrier/tests/store_crash.rs`: SIGKILL of a child process;
//! `carrier/tests/power_loss.rs`: simulated power loss), both driving the
//! store through the group-commit writer: workers own
//! queues, journal an *intent* line before each operation and an
//! *acknowledgement* line after its commit returned, and after a crash the
//! recovered store is checked against what was acknowledged.
//!
//! Journal lines (`q` a queue number):
//! `ia q seed` / `a q seq seed` — an admission (append) in flight / acknowledged;
//! `ir q seq` / `r q seq` — a conclusion (removal + departure record);
//! `ib q g` / `b q g` — a registration at generation `g` (tombstone consumed);
//! `it q g` / `t q g` — a release (binding removed, tombstone `g` put);
//! `open` — a life began.

#![allow(dead_code, clippy::panic)]

use crate::store::{live, payload, rkid2, tomb};
use rltp_proofs::multikey::Rkid;
use rltp_server::writer::{CommitError, Job, Writer};
use rltp_storage::{
    Binding, Departure, DepartureRecord, DepositId, ReadTxn, Store, StoreResult, WriteTxn,
};
use std::collections::BTreeMap;

/// Queues of the workload.
pub const QUEUES: usize = 12;

/// The rkid of queue `i`.
pub fn queue(i: usize) -> Rkid {
    rkid2((i as u8).wrapping_mul(37), i as u8)
}

/// The envelope bytes of journal seed `seed` (1–1200 bytes).
pub fn envelope(seed: u64) -> Vec<u8> {
    let len = 1 + (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize % 1200;
    payload(seed, len)
}

/// One step of a xorshift generator.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A queue's binding state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Never bound.
    Unbound,
    /// Bound at this generation.
    Bound(u64),
    /// Released with a tombstone at this generation.
    Released(u64),
}

/// The binding state of `rkid`, and whether it has both a binding and a
/// tombstone.
///
/// # Errors
/// Store errors.
pub fn bind_state(r: &impl ReadTxn, rkid: &Rkid) -> StoreResult<(Bind, bool)> {
    let binding = r.binding(rkid)?;
    let tombstone = r.tombstone(rkid)?;
    let state = match (binding, tombstone) {
        (Some(b), _) => Bind::Bound(b.generation),
        (None, Some(t)) => Bind::Released(t.generation),
        (None, None) => Bind::Unbound,
    };
    Ok((state, binding.is_some() && tombstone.is_some()))
}

/// The departure record an acknowledged conclusion leaves.
pub const CONCLUDED: DepartureRecord = DepartureRecord {
    departure: Departure::Concluded,
    forget_at: u64::MAX,
};

/// Why a worker stopped.
pub type WorkerError = String;

/// One worker: runs the workload on the queues `q % workers == w` until
/// `more()` says stop, journaling through `say`. Reads the starting state
/// from `store`. Returns the error that stopped it, if any.
pub fn worker<S: Store>(
    committer: &Writer,
    store: &S,
    seed: u64,
    w: usize,
    workers: usize,
    say: &dyn Fn(String),
    more: &dyn Fn() -> bool,
) -> Result<(), WorkerError> {
    let mut rng = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (w as u64 + 1) | 1;
    let mine: Vec<usize> = (0..QUEUES).filter(|q| q % workers == w).collect();
    let mut held: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut binds: BTreeMap<usize, Bind> = BTreeMap::new();
    {
        let r = store.read().map_err(|e| e.to_string())?;
        for &q in &mine {
            let deposits = r
                .deposits(&queue(q), None, usize::MAX)
                .map_err(|e| e.to_string())?;
            held.insert(q, deposits.iter().map(|d| d.seq).collect());
            binds.insert(q, bind_state(&r, &queue(q)).map_err(|e| e.to_string())?.0);
        }
    }
    let mut counter = 0u64;
    let fail = |e: CommitError| e.to_string();
    while more() {
        let q = mine[xorshift(&mut rng) as usize % mine.len()];
        let rkid = queue(q);
        let roll = xorshift(&mut rng) % 100;
        let seqs = held.entry(q).or_default();
        // Queues stay short (at most 40 deposits), so that checks stay cheap.
        let roll = if seqs.len() >= 40 && roll < 50 {
            50
        } else {
            roll
        };
        if roll < 50 || (roll < 85 && seqs.is_empty()) {
            counter += 1;
            let seed = (seed << 32) | ((w as u64) << 24) | counter;
            say(format!("ia {q} {seed}"));
            let d = committer
                .submit(Job::harness(move |t: &mut dyn WriteTxn, now, _| {
                    t.append_deposit(&rkid, &envelope(seed), now, now + 1)
                }))
                .wait()
                .map_err(fail)?;
            seqs.push(d.seq);
            say(format!("a {q} {} {seed}", d.seq));
        } else if roll < 85 {
            let seq = seqs.remove(xorshift(&mut rng) as usize % seqs.len());
            say(format!("ir {q} {seq}"));
            let gone = committer
                .submit(Job::harness(move |t: &mut dyn WriteTxn, _, _| {
                    let gone = t.remove_deposit(&rkid, seq)?;
                    if let Some(d) = &gone {
                        t.put_departure(&rkid, &d.id, &CONCLUDED)?;
                    }
                    Ok(gone)
                }))
                .wait()
                .map_err(fail)?;
            if gone.is_none() {
                return Err(format!("deposit {q}/{seq} was not held"));
            }
            say(format!("r {q} {seq}"));
        } else {
            let state = binds.get(&q).copied().unwrap_or(Bind::Unbound);
            let next = match state {
                Bind::Bound(g) => {
                    say(format!("it {q} {g}"));
                    committer
                        .submit(Job::harness(move |t: &mut dyn WriteTxn, now, _| {
                            t.remove_binding(&rkid)?;
                            t.put_tombstone(&rkid, &tomb(g, now))
                        }))
                        .wait()
                        .map_err(fail)?;
                    say(format!("t {q} {g}"));
                    Bind::Released(g)
                }
                Bind::Unbound | Bind::Released(_) => {
                    let g = match state {
                        Bind::Released(t) => t + 1,
                        _ => 1,
                    };
                    say(format!("ib {q} {g}"));
                    committer
                        .submit(Job::harness(move |t: &mut dyn WriteTxn, now, _| {
                            t.remove_tombstone(&rkid)?;
                            t.put_binding(&rkid, &live(g, now))
                        }))
                        .wait()
                        .map_err(fail)?;
                    say(format!("b {q} {g}"));
                    Bind::Bound(g)
                }
            };
            binds.insert(q, next);
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Append(u64),
    Remove(u64),
    Bind(Bind),
}

/// What the journal says about one queue.
#[derive(Debug, Default)]
pub struct Queue {
    /// Held deposits: seq → journal seed.
    deposits: BTreeMap<u64, u64>,
    /// Every seq ever acknowledged or adopted (none is handed out twice).
    highest_seq: u64,
    bind: Option<Bind>,
    in_flight: Option<InFlight>,
    /// Conclusions acknowledged since the last check: seq → deposit id.
    removed: Vec<(u64, DepositId)>,
}

/// The model: one [`Queue`] per queue.
pub fn model() -> Vec<Queue> {
    (0..QUEUES).map(|_| Queue::default()).collect()
}

/// What the checks counted.
#[derive(Debug, Default)]
pub struct Counts {
    /// Acknowledged admissions.
    pub acknowledged_appends: u64,
    /// Acknowledged conclusions.
    pub acknowledged_removals: u64,
    /// Acknowledged registrations and releases.
    pub acknowledged_bindings: u64,
    /// Checks that an acknowledged admission is present with its bytes.
    pub appends_verified: u64,
    /// Checks that an acknowledged conclusion is absent, its departure
    /// recorded.
    pub removals_verified: u64,
    /// Checks that an acknowledged registration or release holds.
    pub bindings_verified: u64,
    /// Operations in flight at a crash whose outcome was adopted.
    pub in_flight_resolved: u64,
}

/// Applies journal `lines` to the model.
pub fn apply_journal(model: &mut [Queue], lines: &[String], counts: &mut Counts) {
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| -> u64 {
            f.get(i)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("bad journal line {line:?}"))
        };
        if f.first() == Some(&"open") {
            continue;
        }
        let q = &mut model[num(1) as usize];
        match f.first().copied() {
            Some("ia") => q.in_flight = Some(InFlight::Append(num(2))),
            Some("a") => {
                assert_eq!(q.in_flight, Some(InFlight::Append(num(3))), "{line}");
                assert!(num(2) > q.highest_seq, "{line}: seq handed out twice");
                q.highest_seq = num(2);
                assert!(q.deposits.insert(num(2), num(3)).is_none(), "{line}");
                q.in_flight = None;
                counts.acknowledged_appends += 1;
            }
            Some("ir") => q.in_flight = Some(InFlight::Remove(num(2))),
            Some("r") => {
                let seed = q.deposits.remove(&num(2));
                let seed = seed.unwrap_or_else(|| panic!("{line}: not held"));
                q.removed.push((num(2), DepositId::of(&envelope(seed))));
                q.in_flight = None;
                counts.acknowledged_removals += 1;
            }
            Some("ib") => q.in_flight = Some(InFlight::Bind(Bind::Bound(num(2)))),
            Some("it") => q.in_flight = Some(InFlight::Bind(Bind::Released(num(2)))),
            Some("b") => {
                q.bind = Some(Bind::Bound(num(2)));
                q.in_flight = None;
                counts.acknowledged_bindings += 1;
            }
            Some("t") => {
                q.bind = Some(Bind::Released(num(2)));
                q.in_flight = None;
                counts.acknowledged_bindings += 1;
            }
            _ => panic!("bad journal line {line:?}"),
        }
    }
}

/// Checks the recovered state `r` against the model — nothing
/// acknowledged lost, nothing concluded or released resurrected, nothing
/// else present but the outcome of an operation in flight, no seq reused —
/// and adopts the in-flight outcomes it holds. Returns the deposits held.
///
/// # Errors
/// Store errors; a failed check panics, naming the queue.
pub fn check(r: &impl ReadTxn, model: &mut [Queue], counts: &mut Counts) -> StoreResult<u64> {
    let mut held_total = 0;
    for (i, q) in model.iter_mut().enumerate() {
        let rkid = queue(i);
        let held = r.deposits(&rkid, None, usize::MAX)?;
        held_total += held.len() as u64;
        let mut actual = BTreeMap::new();
        for d in &held {
            let bytes = r.deposit_bytes(&rkid, d)?;
            assert_eq!(DepositId::of(&bytes), d.id, "queue {i} seq {}", d.seq);
            actual.insert(d.seq, bytes);
        }
        for (seq, seed) in &q.deposits {
            match actual.get(seq) {
                Some(bytes) => {
                    assert_eq!(*bytes, envelope(*seed), "queue {i} seq {seq}: bytes differ");
                    counts.appends_verified += 1;
                }
                None => assert_eq!(
                    q.in_flight,
                    Some(InFlight::Remove(*seq)),
                    "queue {i}: acknowledged deposit {seq} (seed {seed}) LOST"
                ),
            }
        }
        for (seq, id) in q.removed.drain(..) {
            assert!(
                !actual.contains_key(&seq),
                "queue {i}: acknowledged conclusion of {seq} RESURRECTED"
            );
            assert_eq!(
                r.departure(&rkid, &id)?,
                Some(CONCLUDED),
                "queue {i}: the departure of concluded {seq} is lost"
            );
            counts.removals_verified += 1;
        }
        let mut adopted = BTreeMap::new();
        for (seq, bytes) in &actual {
            let seed = match q.deposits.get(seq) {
                Some(seed) => *seed,
                None => match q.in_flight {
                    Some(InFlight::Append(seed)) if *bytes == envelope(seed) => {
                        assert!(*seq > q.highest_seq, "queue {i}: seq {seq} reused");
                        counts.in_flight_resolved += 1;
                        seed
                    }
                    other => panic!("queue {i}: phantom deposit {seq} (in flight: {other:?})"),
                },
            };
            q.highest_seq = q.highest_seq.max(*seq);
            adopted.insert(*seq, seed);
        }
        if matches!(q.in_flight, Some(InFlight::Remove(seq)) if !actual.contains_key(&seq)) {
            counts.in_flight_resolved += 1;
        }
        q.deposits = adopted;

        let (state, both) = bind_state(r, &rkid)?;
        assert!(!both, "queue {i}: binding AND tombstone");
        let acknowledged = q.bind.unwrap_or(Bind::Unbound);
        let in_flight = match q.in_flight {
            Some(InFlight::Bind(b)) => Some(b),
            _ => None,
        };
        assert!(
            state == acknowledged || Some(state) == in_flight,
            "queue {i}: binding state {state:?}, acknowledged {acknowledged:?}, in flight {in_flight:?}"
        );
        if q.bind.is_some() {
            counts.bindings_verified += 1;
        }
        if state != acknowledged {
            counts.in_flight_resolved += 1;
        }
        if let Bind::Bound(g) = state {
            let b: Option<Binding> = r.binding(&rkid)?;
            assert_eq!(b.map(|b| b.generation), Some(g));
        }
        q.bind = Some(state);
        q.in_flight = None;
    }
    Ok(held_total)
}
