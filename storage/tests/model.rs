//! Property: any sequence of store operations leaves `RedbStore` (tiny
//! segments, so rotation, reclamation and compaction happen; reopened at
//! random points) observably equal to the `MemStore` reference after every
//! commit, and its counters equal to what it holds (`integrity_check`).
//!
//! The same for the log store, on a simulated disk (`FaultFs`), with
//! snapshots, housekeeping (spare segments, reclaiming), compaction,
//! reopens and **crash images** (the power cut right after a commit:
//! every unsynced write dropped, torn or kept at random) at random points:
//! every committed transaction is durable, so the recovered store must
//! equal the model exactly.

mod common;

use common::*;
use proptest::prelude::*;
use rltp_proofs::multikey::Rkid;
use rltp_storage::fault_fs::{FaultFs, Rng};
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::mem::MemStore;
use rltp_storage::redb_store::{RedbOptions, RedbStore};
use rltp_storage::{
    Binding, DeclarationRecord, Departure, DepartureRecord, DepositId, Due, Ms, ReadTxn, Store,
    StoreResult, Tombstone, WriteTxn,
};
use std::path::Path;
use std::sync::Arc;

const RKIDS: usize = 4;
const PAYLOADS: usize = 6;

fn rkids() -> Vec<Rkid> {
    vec![rkid2(1, 2), rkid2(1, 1), rkid2(0, 9), rkid2(7, 0)]
}

fn payloads() -> Vec<Vec<u8>> {
    (0..PAYLOADS)
        .map(|i| payload(i as u64, [0, 1, 40, 700, 1500, 3000][i]))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    PutBinding(usize, Binding),
    RemoveBinding(usize),
    PutTombstone(usize, Tombstone),
    RemoveTombstone(usize),
    /// Appends payload `p` unless the queue holds it now (the engine's s3).
    Append(usize, usize, Ms),
    RemoveDeposit(usize, u64),
    PutDeparture(usize, usize, bool, Ms),
    RemoveDeparture(usize, usize),
    Schedule(Ms, Due),
    Unschedule(Ms, Due),
    Elastic(i64),
    Declaration(u64, usize),
    Commit,
    Abort,
    Reopen,
    Compact(usize),
    /// Log store only (a no-op for redb): a snapshot now.
    Snapshot,
    /// Log store only: one pass of its background work.
    Housekeep,
    /// Log store only: the power cut now; the store reopens on the image.
    Crash(u64),
}

fn due_strategy() -> impl Strategy<Value = (Ms, Due)> {
    let at = 0u64..6;
    let r = 0..RKIDS;
    (at, r, 0u8..4, 0u64..4, 0..PAYLOADS).prop_map(|(at, r, kind, seq, p)| {
        let rkid = rkids()[r];
        let due = match kind {
            0 => Due::OrphanExpiry(rkid),
            1 => Due::Deadline(rkid),
            2 => Due::GiveUp(rkid, seq),
            _ => Due::Forget(rkid, DepositId::of(&payloads()[p])),
        };
        (at, due)
    })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let r = 0..RKIDS;
    prop_oneof![
        2 => (r.clone(), 1u64..5, prop::option::of(0u64..50), 0u64..50).prop_map(
            |(r, g, deadline, at)| Op::PutBinding(
                r,
                match deadline {
                    Some(d) => closing(g, d),
                    None => live(g, at),
                }
            )
        ),
        1 => r.clone().prop_map(Op::RemoveBinding),
        2 => (r.clone(), 1u64..5, 0u64..4).prop_map(|(r, g, at)| Op::PutTombstone(r, tomb(g, at))),
        1 => r.clone().prop_map(Op::RemoveTombstone),
        6 => (r.clone(), 0..PAYLOADS, 0u64..100).prop_map(|(r, p, at)| Op::Append(r, p, at)),
        4 => (r.clone(), 1u64..8).prop_map(|(r, s)| Op::RemoveDeposit(r, s)),
        1 => (r.clone(), 0..PAYLOADS, any::<bool>(), 0u64..9)
            .prop_map(|(r, p, g, f)| Op::PutDeparture(r, p, g, f)),
        1 => (r.clone(), 0..PAYLOADS).prop_map(|(r, p)| Op::RemoveDeparture(r, p)),
        2 => due_strategy().prop_map(|(at, d)| Op::Schedule(at, d)),
        1 => due_strategy().prop_map(|(at, d)| Op::Unschedule(at, d)),
        1 => (-2000i64..2000).prop_map(Op::Elastic),
        1 => (0u64..9, 0usize..40).prop_map(|(r, n)| Op::Declaration(r, n)),
        4 => Just(Op::Commit),
        1 => Just(Op::Abort),
        1 => Just(Op::Reopen),
        1 => (1usize..6).prop_map(Op::Compact),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Housekeep),
        1 => any::<u64>().prop_map(Op::Crash),
    ]
}

fn apply(t: &mut impl WriteTxn, op: &Op) -> StoreResult<String> {
    let rk = rkids();
    let p = payloads();
    Ok(match op {
        Op::PutBinding(r, b) => format!("{:?}", t.put_binding(&rk[*r], b)?),
        Op::RemoveBinding(r) => format!("{:?}", t.remove_binding(&rk[*r])?),
        Op::PutTombstone(r, x) => format!("{:?}", t.put_tombstone(&rk[*r], x)?),
        Op::RemoveTombstone(r) => format!("{:?}", t.remove_tombstone(&rk[*r])?),
        Op::Append(r, i, at) => {
            if t.deposit_by_id(&rk[*r], &DepositId::of(&p[*i]))?.is_some() {
                "duplicate".into()
            } else {
                format!("{:?}", t.append_deposit(&rk[*r], &p[*i], *at, at + 10)?)
            }
        }
        Op::RemoveDeposit(r, s) => format!("{:?}", t.remove_deposit(&rk[*r], *s)?),
        Op::PutDeparture(r, i, given_up, forget_at) => {
            let record = DepartureRecord {
                departure: if *given_up {
                    Departure::GivenUp
                } else {
                    Departure::Concluded
                },
                forget_at: *forget_at,
            };
            format!(
                "{:?}",
                t.put_departure(&rk[*r], &DepositId::of(&p[*i]), &record)?
            )
        }
        Op::RemoveDeparture(r, i) => {
            format!("{:?}", t.remove_departure(&rk[*r], &DepositId::of(&p[*i]))?)
        }
        Op::Schedule(at, d) => format!("{:?}", t.schedule(*at, d)?),
        Op::Unschedule(at, d) => format!("{:?}", t.unschedule(*at, d)?),
        Op::Elastic(delta) => format!("{:?}", t.add_elastic_bytes(*delta)?),
        Op::Declaration(revision, n) => format!(
            "{:?}",
            t.put_declaration(&DeclarationRecord {
                revision: *revision,
                document: vec![b'd'; *n],
            })?
        ),
        Op::Commit
        | Op::Abort
        | Op::Reopen
        | Op::Compact(_)
        | Op::Snapshot
        | Op::Housekeep
        | Op::Crash(_) => String::new(),
    })
}

fn state(r: &impl ReadTxn) -> StoreResult<Dump> {
    let ids: Vec<DepositId> = payloads().iter().map(|p| DepositId::of(p)).collect();
    dump(r, &rkids(), &ids)
}

fn options() -> RedbOptions {
    RedbOptions {
        segment_bytes: 2048,
        compact_below_percent: 60,
        ..RedbOptions::default()
    }
}

fn run(ops: &[Op]) -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let model = MemStore::new();
    let mut redb = Some(RedbStore::open_with(dir.path(), options())?);
    let mut pending: Vec<&Op> = Vec::new();
    for op in ops.iter().chain(std::iter::once(&Op::Commit)) {
        let store = redb.as_ref().ok_or(rltp_storage::StoreError::Closed)?;
        match op {
            Op::Commit | Op::Abort => {
                let mut m = model.begin_write()?;
                let mut d = store.begin_write()?;
                for op in &pending {
                    // Every call answers the same on both stores, inside
                    // the transaction too.
                    assert_eq!(apply(&mut m, op)?, apply(&mut d, op)?, "{op:?}");
                    assert_eq!(state(&m)?, state(&d)?, "in-transaction state after {op:?}");
                }
                pending.clear();
                if matches!(op, Op::Commit) {
                    model.commit(m)?;
                    store.commit(d)?;
                }
            }
            Op::Reopen => {
                drop(redb.take());
                redb = Some(RedbStore::open_with(dir.path(), options())?);
            }
            Op::Compact(n) => {
                store.compact_step(*n)?;
            }
            Op::Snapshot | Op::Housekeep | Op::Crash(_) => continue,
            other => {
                pending.push(other);
                continue;
            }
        }
        let store = redb.as_ref().ok_or(rltp_storage::StoreError::Closed)?;
        assert_eq!(
            state(&model.read()?)?,
            state(&store.read()?)?,
            "after {op:?}"
        );
    }
    let mut store = redb.take().ok_or(rltp_storage::StoreError::Closed)?;
    let report = store.integrity_check()?;
    assert!(
        report.damaged.is_empty() && report.quarantined.is_empty(),
        "{report:?}"
    );
    Ok(())
}

fn log_options(fs: &FaultFs) -> LogOptions {
    LogOptions {
        segment_bytes: 2048,
        snapshot_log_bytes: 4096,
        redb_checkpoint_ops: 8,
        compact_below_percent: 60,
        background: false,
        fs: Arc::new(fs.clone()),
        ..LogOptions::default()
    }
}

fn run_log(ops: &[Op]) -> StoreResult<()> {
    let dir = Path::new("/store");
    let mut disk = FaultFs::new();
    let model = MemStore::new();
    let mut log = Some(LogStore::open_with(dir, log_options(&disk))?);
    let mut pending: Vec<&Op> = Vec::new();
    for op in ops.iter().chain(std::iter::once(&Op::Commit)) {
        let store = log.as_ref().ok_or(rltp_storage::StoreError::Closed)?;
        match op {
            Op::Commit | Op::Abort => {
                let mut m = model.begin_write()?;
                let mut d = store.begin_write()?;
                for op in &pending {
                    assert_eq!(apply(&mut m, op)?, apply(&mut d, op)?, "{op:?}");
                    assert_eq!(state(&m)?, state(&d)?, "in-transaction state after {op:?}");
                }
                pending.clear();
                if matches!(op, Op::Commit) {
                    model.commit(m)?;
                    store.commit(d)?;
                }
            }
            Op::Reopen => {
                drop(log.take());
                log = Some(LogStore::open_with(dir, log_options(&disk))?);
            }
            Op::Crash(seed) => {
                let (image, _) = disk.crash(&mut Rng::new(*seed));
                drop(log.take());
                disk = image;
                log = Some(LogStore::open_with(dir, log_options(&disk))?);
            }
            Op::Compact(n) => {
                store.compact_step(*n)?;
            }
            Op::Snapshot => store.snapshot_now()?,
            Op::Housekeep => store.housekeeping_step()?,
            other => {
                pending.push(other);
                continue;
            }
        }
        let store = log.as_ref().ok_or(rltp_storage::StoreError::Closed)?;
        assert_eq!(
            state(&model.read()?)?,
            state(&store.read()?)?,
            "after {op:?}"
        );
    }
    let mut store = log.take().ok_or(rltp_storage::StoreError::Closed)?;
    let report = store.integrity_check()?;
    assert!(
        report.damaged.is_empty() && report.quarantined.is_empty(),
        "{report:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn log_store_matches_the_reference_model_through_snapshots_reopens_and_crashes(
        ops in prop::collection::vec(op_strategy(), 1..80)
    ) {
        run_log(&ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn redb_store_matches_the_reference_model(ops in prop::collection::vec(op_strategy(), 1..80)) {
        run(&ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}
