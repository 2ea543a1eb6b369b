//! Escrowed budgets and per-queue locks on one PostgreSQL database shared
//! by several nodes (`PROTOCOL.md` §13, `storage/src/postgres/escrow.rs`):
//! one node's verdicts are exactly the embedded store's, a node that is
//! gone leaves its budget to be taken back, and two nodes racing into
//! shared queues hand out every `seq` once, without a gap, never over
//! capacity. After every step the conservation holds: every byte and slot
//! of the limits is in the pool, in a lane, or held.

#![allow(clippy::panic, clippy::unwrap_used)]

mod common;

use common::*;
use rltp_storage::postgres::{HeldLimits, PgOptions, PgStore};
use rltp_storage::{Need, ReadTxn, Store, StoreError, WriteTxn};
use std::collections::BTreeMap;
use std::sync::Arc;

fn cluster() -> rltp_pgtest::Cluster {
    rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"))
}

fn open(pg: &rltp_pgtest::Cluster) -> PgStore {
    PgStore::open(PgOptions::new(pg.conninfo()))
        .unwrap_or_else(|e| panic!("open the postgres store: {e}"))
}

fn limits(capacity_bytes: u64, max_bindings: u64) -> HeldLimits {
    HeldLimits {
        capacity_bytes,
        max_bindings,
    }
}

fn need(bytes: u64, slots: u64) -> Need {
    Need { bytes, slots }
}

/// One node: its lane, the pool and nothing else cover what is not held,
/// so a decision's budget is exactly the carrier's free room (the embedded
/// store's verdicts); a limit lowered below what is held puts the carrier
/// over its limits (a return is then refused).
#[test]
fn one_node_refuses_exactly_at_capacity() {
    let pg = cluster();
    let a = open(&pg);
    let floor = 1_000;
    a.claim_limits(limits(10_000, 3), floor).unwrap();
    assert_eq!(a.audit_budgets(floor).unwrap(), Some((0, 0)));
    // Three arrivals, each spending a floor and a slot.
    for n in 1..=3u8 {
        let mut t = a.begin_write().unwrap();
        let e = t.escrow(need(floor, 1)).unwrap().expect("escrowed");
        assert!(e.bytes >= floor && e.slots >= 1, "{e:?}");
        t.put_binding(&rkid(n), &live(1, 0)).unwrap();
        t.add_reserved_bytes(1_000).unwrap();
        a.commit(t).unwrap();
        assert_eq!(a.audit_budgets(floor).unwrap(), Some((0, 0)), "after {n}");
    }
    let t = a.begin_write().unwrap();
    // A fourth arrival has no slot left.
    assert_eq!(t.escrow(need(floor, 1)).unwrap().unwrap().slots, 0);
    // 7,000 bytes above the floors remain, exactly.
    assert_eq!(t.escrow(need(7_001, 0)).unwrap().unwrap().bytes, 7_000);
    assert_eq!(t.over_limits().unwrap(), Some(false));
    drop(t);
    assert_eq!(a.audit_budgets(floor).unwrap(), Some((0, 0)));
    // Lowered below the 3,000 bytes the floors hold: over the limits.
    a.publish_limits(limits(2_000, 3), floor).unwrap();
    let t = a.begin_write().unwrap();
    assert_eq!(t.over_limits().unwrap(), Some(true));
    assert_eq!(t.escrow(need(1, 0)).unwrap().unwrap().bytes, 0);
    drop(t);
    assert_eq!(a.audit_budgets(floor).unwrap(), Some((0, 0)));
}

/// The pid of the backend holding the session lock of the lane that holds
/// `bytes` (the writer session of the node that took them).
fn writer_pid_of_lane_holding(pg: &rltp_pgtest::Cluster, bytes: u64) -> String {
    pg.psql(&format!(
        "SELECT l.pid FROM pg_locks l JOIN rltp_lanes n ON l.objid::bigint = n.lane \
         WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND n.bytes = {bytes}"
    ))
    .unwrap()
}

/// A node whose writer session ends (its connection cut here, as by a
/// crash or a partition) leaves its lane's budget behind; a node short of
/// budget takes it back, bumping the lane's epoch; the first node's next
/// transaction finds its lane gone and commits nothing through it, the one
/// after runs on a new lane; no byte or slot leaks or doubles.
#[test]
fn a_dead_nodes_budget_is_reclaimed_and_nothing_leaks() {
    let pg = cluster();
    let a = open(&pg);
    // A lane's target is 1/256 of each limit: 10,000 bytes and 10 slots.
    let (capacity, bindings) = (2_560_000, 2_560);
    a.claim_limits(limits(capacity, bindings), 0).unwrap();
    // B opens on a database that holds the limits (its refill target).
    let b = open(&pg);
    let t = a.begin_write().unwrap();
    assert_eq!(
        t.escrow(need(10_000, 10)).unwrap().unwrap(),
        rltp_storage::Escrow {
            bytes: 10_000,
            slots: 10
        }
    );
    a.commit(t).unwrap();
    // B cannot take what live A holds: only the pool.
    let t = b.begin_write().unwrap();
    assert_eq!(
        t.escrow(need(capacity, bindings)).unwrap().unwrap(),
        rltp_storage::Escrow {
            bytes: capacity - 10_000,
            slots: bindings - 10
        }
    );
    drop(t);
    let pid = writer_pid_of_lane_holding(&pg, 10_000);
    assert!(!pid.is_empty(), "A's writer holds its lane's lock");
    pg.psql(&format!("SELECT pg_terminate_backend({pid})"))
        .unwrap();
    // B, short, takes A's lane back, and spends some of it.
    let mut t = b.begin_write().unwrap();
    assert_eq!(
        t.escrow(need(capacity, bindings)).unwrap().unwrap(),
        rltp_storage::Escrow {
            bytes: capacity,
            slots: bindings
        }
    );
    t.append_deposit(&rkid(1), &payload(1, 4_000), 0, 0)
        .unwrap();
    t.add_elastic_bytes(4_000).unwrap();
    b.commit(t).unwrap();
    assert_eq!(a.audit_budgets(0).unwrap(), Some((0, 0)));
    assert_eq!(
        pg.psql("SELECT count(*) FROM rltp_lanes WHERE epoch = 2 AND bytes = 0 AND slots = 0")
            .unwrap(),
        "1"
    );
    // A comes back on a new lane, and finds nothing to spend.
    let mut attempts = Vec::new();
    let mut t = loop {
        match a.begin_write() {
            Ok(t) => break t,
            Err(e) => attempts.push(e.to_string()),
        }
        assert!(attempts.len() < 3, "{attempts:?}");
    };
    assert_eq!(
        t.escrow(need(capacity, 0)).unwrap().unwrap().bytes,
        capacity - 4_000 - 10_000,
        "the pool, without what B holds"
    );
    t.append_deposit(&rkid(2), &payload(2, 10), 0, 0).unwrap();
    t.add_elastic_bytes(10).unwrap();
    a.commit(t).unwrap();
    assert_eq!(a.audit_budgets(0).unwrap(), Some((0, 0)));
    assert_eq!(
        a.read().unwrap().occupancy().unwrap().total_bytes,
        4_010,
        "both nodes' shares of the counters"
    );
    assert_eq!(
        pg.psql("SELECT count(*) FROM rltp_lanes WHERE bytes <> 0 OR slots <> 0")
            .unwrap(),
        "2",
        "A's new lane and B's hold budgets"
    );
    // B stops (its store dropped, its session ended): the same without a
    // cut. A node's start (the limits claimed) empties the lanes of nodes
    // that are gone; A can now take everything not held.
    drop(b);
    a.claim_limits(limits(capacity, bindings), 0).unwrap();
    assert_eq!(
        pg.psql("SELECT count(*) FROM rltp_lanes WHERE bytes <> 0 OR slots <> 0")
            .unwrap(),
        "1",
        "only A's lane, the one live, holds a budget"
    );
    let t = a.begin_write().unwrap();
    assert_eq!(
        t.escrow(need(capacity, 0)).unwrap().unwrap().bytes,
        capacity - 4_010
    );
    drop(t);
    assert_eq!(a.audit_budgets(0).unwrap(), Some((0, 0)));
}

/// What one simulated writer did: the seqs it was handed per queue, and
/// how many deposits it was refused for capacity.
#[derive(Default)]
struct Outcome {
    seqs: BTreeMap<u8, Vec<u64>>,
    refused: u64,
    put_off: u64,
}

/// A node's writer, reduced to what the race needs: batches of deposits
/// into a hot queue and random others, their queues locked first (put off
/// when another node holds them, waited for after three rounds), each
/// deposit judged against the node's budget (s6 with a floor of 0: every
/// byte is growth), as the carrier's writer and engine do.
fn race(store: &PgStore, node: u64, batches: u64) -> Outcome {
    let mut out = Outcome::default();
    let mut rng = rltp_storage::fault_fs::Rng::new(node);
    let mut put_off: Vec<u8> = Vec::new();
    let mut rounds = 0;
    for _ in 0..batches {
        let mut queues: Vec<u8> = std::mem::take(&mut put_off);
        queues.push(1);
        for _ in 0..6 {
            queues.push(2 + rng.below(12) as u8);
        }
        let mut t = store.begin_write().unwrap();
        let keys: Vec<_> = queues.iter().map(|&q| (rkid(q), None)).collect();
        let busy = t.prefetch(&keys, rounds >= 3).unwrap();
        let (now, later): (Vec<u8>, Vec<u8>) =
            queues.into_iter().partition(|q| !busy.contains(&rkid(*q)));
        rounds = if later.is_empty() { 0 } else { rounds + 1 };
        out.put_off += later.len() as u64;
        put_off = later;
        let mut admitted = Vec::new();
        for q in now {
            let len = 500 + rng.below(1_500);
            if t.escrow(need(len, 0)).unwrap().unwrap().bytes < len {
                out.refused += 1;
                continue;
            }
            let d = t
                .append_deposit(
                    &rkid(q),
                    &payload(node << 32 | rng.next_u64() >> 32, len as usize),
                    0,
                    0,
                )
                .unwrap();
            t.add_elastic_bytes(len as i64).unwrap();
            admitted.push((q, d.seq));
        }
        match store.commit(t) {
            Ok(()) => {
                for (q, seq) in admitted {
                    out.seqs.entry(q).or_default().push(seq);
                }
            }
            Err(StoreError::Conflict(_)) => {}
            Err(e) => panic!("node {node}: {e}"),
        }
    }
    out
}

/// Two nodes, two writers each, admit into one hot queue and a dozen
/// others at once: every queue's seqs are 1..n, each handed out once;
/// what is held never exceeds capacity and equals what was admitted; the
/// budgets account for every byte; and some deposits were refused for
/// capacity (the race ran into the limit).
#[test]
fn two_nodes_admit_into_shared_queues_without_a_gap_or_a_reuse() {
    let pg = cluster();
    let capacity = 400_000;
    let nodes: Vec<Arc<PgStore>> = (0..2).map(|_| Arc::new(open(&pg))).collect();
    nodes[0].claim_limits(limits(capacity, 100), 0).unwrap();
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let store = Arc::clone(&nodes[(w % 2) as usize]);
            std::thread::spawn(move || race(&store, w + 1, 60))
        })
        .collect();
    let outcomes: Vec<Outcome> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut per_queue: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for o in &outcomes {
        for (q, seqs) in &o.seqs {
            per_queue.entry(*q).or_default().extend(seqs);
        }
    }
    let r = nodes[1].read().unwrap();
    let mut held_bytes = 0;
    for (q, seqs) in &mut per_queue {
        seqs.sort_unstable();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(
            *seqs, expected,
            "queue {q}: a gap or a seq handed out twice"
        );
        let held = r.deposits(&rkid(*q), None, usize::MAX).unwrap();
        assert_eq!(held.iter().map(|d| d.seq).collect::<Vec<_>>(), expected);
        held_bytes += r.queue_bytes(&rkid(*q)).unwrap();
    }
    assert!(held_bytes <= capacity, "{held_bytes} held over {capacity}");
    assert_eq!(r.occupancy().unwrap().total_bytes, held_bytes);
    assert_eq!(r.occupancy().unwrap().elastic_bytes, held_bytes);
    drop(r);
    assert_eq!(nodes[0].audit_budgets(0).unwrap(), Some((0, 0)));
    let refused: u64 = outcomes.iter().map(|o| o.refused).sum();
    assert!(refused > 0, "the race never reached capacity");
    assert!(
        per_queue[&1].len() > 20,
        "the hot queue: {}",
        per_queue[&1].len()
    );
    let report = nodes[0].integrity_check().unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}
