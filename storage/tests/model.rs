//! Property: any sequence of store operations leaves `RedbStore` (tiny
//! segments, so rotation, reclamation and compaction happen; reopened at
//! random points) and `PgStore` (reconnected at random points) observably
//! equal to the `MemStore` reference after every operation of a
//! transaction and every commit, and their counters equal to what they
//! hold (their integrity checks).
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
use rltp_storage::postgres::{PgOptions, PgStore};
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
    /// The batch hint: every queue, and payload `p`'s id in queue `r`.
    Prefetch(usize, usize),
    /// A bounded read of the due index, inside the transaction.
    ReadDue(Ms, usize),
    /// A bounded page of queue `r` after a `seq`, inside the transaction.
    ReadDeposits(usize, Option<u64>, usize),
    Commit,
    Abort,
    Reopen,
    Compact(usize),
    /// Log store only (a no-op elsewhere): a snapshot now.
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
        2 => (r.clone(), 0..PAYLOADS).prop_map(|(r, p)| Op::Prefetch(r, p)),
        2 => (0u64..7, 1usize..4).prop_map(|(at, n)| Op::ReadDue(at, n)),
        2 => (r.clone(), prop::option::of(0u64..6), 1usize..4)
            .prop_map(|(r, after, n)| Op::ReadDeposits(r, after, n)),
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
        Op::Elastic(delta) => {
            // Never below 0, as the engine keeps them (a sum of
            // non-negative terms): a store many nodes share keeps them as
            // sharded deltas and does not saturate within a transaction.
            let held = i64::try_from(t.occupancy()?.elastic_bytes).unwrap_or(i64::MAX);
            format!("{:?}", t.add_elastic_bytes((*delta).max(-held))?)
        }
        Op::Declaration(revision, n) => format!(
            "{:?}",
            t.put_declaration(&DeclarationRecord {
                revision: *revision,
                document: vec![b'd'; *n],
            })?
        ),
        Op::Prefetch(r, i) => {
            let mut keys: Vec<_> = rk.iter().map(|q| (*q, None)).collect();
            keys.push((rk[*r], Some(DepositId::of(&p[*i]))));
            format!("{:?}", t.prefetch(&keys, false)?)
        }
        Op::ReadDue(upto, limit) => format!("{:?}", t.due(*upto, *limit)?),
        Op::ReadDeposits(r, after, limit) => format!("{:?}", t.deposits(&rk[*r], *after, *limit)?),
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

/// A store under test: the operations the model has no counterpart for.
trait Subject {
    type S: Store;
    fn store(&self) -> StoreResult<&Self::S>;
    /// Closes and opens it again on the same files or database.
    fn reopen(&mut self) -> StoreResult<()>;
    /// One step of background maintenance.
    fn compact(&self, steps: usize) -> StoreResult<()>;
    /// Its own integrity check, at the end.
    fn check(&mut self) -> StoreResult<()>;
    /// A snapshot now (the log store; nothing elsewhere).
    fn snapshot(&self) -> StoreResult<()> {
        Ok(())
    }
    /// One pass of background work (the log store; nothing elsewhere).
    fn housekeep(&self) -> StoreResult<()> {
        Ok(())
    }
    /// The power cut now, reopened on the crash image (the log store on
    /// its simulated disk; nothing elsewhere).
    fn crash(&mut self, _seed: u64) -> StoreResult<()> {
        Ok(())
    }
}

/// The log store on a simulated disk (`FaultFs`).
struct Log {
    disk: FaultFs,
    store: Option<LogStore>,
}

const LOG_DIR: &str = "/store";

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

impl Subject for Log {
    type S = LogStore;
    fn store(&self) -> StoreResult<&LogStore> {
        self.store.as_ref().ok_or(rltp_storage::StoreError::Closed)
    }
    fn reopen(&mut self) -> StoreResult<()> {
        drop(self.store.take());
        self.store = Some(LogStore::open_with(
            Path::new(LOG_DIR),
            log_options(&self.disk),
        )?);
        Ok(())
    }
    fn compact(&self, steps: usize) -> StoreResult<()> {
        self.store()?.compact_step(steps).map(drop)
    }
    fn check(&mut self) -> StoreResult<()> {
        let store = self
            .store
            .as_mut()
            .ok_or(rltp_storage::StoreError::Closed)?;
        let report = store.integrity_check()?;
        assert!(
            report.damaged.is_empty() && report.quarantined.is_empty(),
            "{report:?}"
        );
        Ok(())
    }
    fn snapshot(&self) -> StoreResult<()> {
        self.store()?.snapshot_now()
    }
    fn housekeep(&self) -> StoreResult<()> {
        self.store()?.housekeeping_step()
    }
    fn crash(&mut self, seed: u64) -> StoreResult<()> {
        let (image, _) = self.disk.crash(&mut Rng::new(seed));
        drop(self.store.take());
        self.disk = image;
        self.reopen()
    }
}

struct Redb {
    dir: tempfile::TempDir,
    store: Option<RedbStore>,
}

impl Subject for Redb {
    type S = RedbStore;
    fn store(&self) -> StoreResult<&RedbStore> {
        self.store.as_ref().ok_or(rltp_storage::StoreError::Closed)
    }
    fn reopen(&mut self) -> StoreResult<()> {
        drop(self.store.take());
        self.store = Some(RedbStore::open_with(self.dir.path(), options())?);
        Ok(())
    }
    fn compact(&self, steps: usize) -> StoreResult<()> {
        self.store()?.compact_step(steps).map(drop)
    }
    fn check(&mut self) -> StoreResult<()> {
        let store = self
            .store
            .as_mut()
            .ok_or(rltp_storage::StoreError::Closed)?;
        let report = store.integrity_check()?;
        assert!(
            report.damaged.is_empty() && report.quarantined.is_empty(),
            "{report:?}"
        );
        Ok(())
    }
}

struct Postgres<'a> {
    cluster: &'a rltp_pgtest::Cluster,
    store: Option<PgStore>,
}

impl Postgres<'_> {
    fn open(&self) -> StoreResult<PgStore> {
        let mut options = PgOptions::new(self.cluster.conninfo());
        // A window of two due entries: reads past its end are exercised.
        options.due_read_ahead = 2;
        Ok(PgStore::open(options)?)
    }
}

impl Subject for Postgres<'_> {
    type S = PgStore;
    fn store(&self) -> StoreResult<&PgStore> {
        self.store.as_ref().ok_or(rltp_storage::StoreError::Closed)
    }
    fn reopen(&mut self) -> StoreResult<()> {
        drop(self.store.take());
        self.store = Some(self.open()?);
        Ok(())
    }
    fn compact(&self, _steps: usize) -> StoreResult<()> {
        Ok(())
    }
    fn check(&mut self) -> StoreResult<()> {
        let report = self.store()?.integrity_check()?;
        assert!(report.problems.is_empty(), "{report:?}");
        Ok(())
    }
}

fn run(subject: &mut impl Subject, ops: &[Op]) -> StoreResult<()> {
    let model = MemStore::new();
    let mut pending: Vec<&Op> = Vec::new();
    for op in ops.iter().chain(std::iter::once(&Op::Commit)) {
        match op {
            Op::Commit | Op::Abort => {
                let store = subject.store()?;
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
            Op::Reopen => subject.reopen()?,
            Op::Compact(n) => subject.compact(*n)?,
            Op::Snapshot => subject.snapshot()?,
            Op::Housekeep => subject.housekeep()?,
            Op::Crash(seed) => subject.crash(*seed)?,
            other => {
                pending.push(other);
                continue;
            }
        }
        assert_eq!(
            state(&model.read()?)?,
            state(&subject.store()?.read()?)?,
            "after {op:?}"
        );
    }
    subject.check()
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn log_store_matches_the_reference_model_through_snapshots_reopens_and_crashes(
        ops in prop::collection::vec(op_strategy(), 1..80)
    ) {
        let disk = FaultFs::new();
        let store = LogStore::open_with(Path::new(LOG_DIR), log_options(&disk)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut subject = Log { disk, store: Some(store) };
        run(&mut subject, &ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn redb_store_matches_the_reference_model(ops in prop::collection::vec(op_strategy(), 1..80)) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let store = RedbStore::open_with(dir.path(), options()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut subject = Redb { dir, store: Some(store) };
        run(&mut subject, &ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// The same property for the PostgreSQL store: one throwaway cluster, its
/// schema dropped and made again for every case.
#[test]
fn postgres_store_matches_the_reference_model() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(24),
        ..ProptestConfig::default()
    });
    let result = runner.run(&prop::collection::vec(op_strategy(), 1..60), |ops| {
        cluster
            .psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut subject = Postgres {
            cluster: &cluster,
            store: None,
        };
        subject
            .reopen()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        run(&mut subject, &ops).map_err(|e| TestCaseError::fail(e.to_string()))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// One step of a prelude-like loop inside one write transaction.
#[derive(Debug, Clone)]
enum DueOp {
    Schedule(Ms, Due),
    Unschedule(Ms, Due),
    /// `due(upto, limit)`, then (like the prelude) unschedule the first.
    Pop(Ms, usize),
    /// `deposits(r, after, limit)` after appending or removing.
    Append(usize, usize),
    Remove(usize, u64),
    Page(usize, Option<u64>, usize),
}

fn due_op_strategy() -> impl Strategy<Value = DueOp> {
    prop_oneof![
        3 => due_strategy().prop_map(|(at, d)| DueOp::Schedule(at, d)),
        1 => due_strategy().prop_map(|(at, d)| DueOp::Unschedule(at, d)),
        4 => (0u64..7, 1usize..4).prop_map(|(at, n)| DueOp::Pop(at, n)),
        2 => (0..RKIDS, 0..PAYLOADS).prop_map(|(r, p)| DueOp::Append(r, p)),
        1 => (0..RKIDS, 1u64..8).prop_map(|(r, s)| DueOp::Remove(r, s)),
        2 => (0..RKIDS, prop::option::of(0u64..6), 1usize..4)
            .prop_map(|(r, after, n)| DueOp::Page(r, after, n)),
    ]
}

fn apply_due_op(t: &mut impl WriteTxn, op: &DueOp) -> StoreResult<String> {
    let rk = rkids();
    let p = payloads();
    Ok(match op {
        DueOp::Schedule(at, d) => format!("{:?}", t.schedule(*at, d)?),
        DueOp::Unschedule(at, d) => format!("{:?}", t.unschedule(*at, d)?),
        DueOp::Pop(upto, limit) => {
            let found = t.due(*upto, *limit)?;
            if let Some((at, due)) = found.first() {
                t.unschedule(*at, due)?;
            }
            format!("{found:?}")
        }
        DueOp::Append(r, i) => {
            if t.deposit_by_id(&rk[*r], &DepositId::of(&p[*i]))?.is_some() {
                "duplicate".into()
            } else {
                format!("{:?}", t.append_deposit(&rk[*r], &p[*i], 1, 11)?)
            }
        }
        DueOp::Remove(r, s) => format!("{:?}", t.remove_deposit(&rk[*r], *s)?),
        DueOp::Page(r, after, limit) => format!("{:?}", t.deposits(&rk[*r], *after, *limit)?),
    })
}

/// The PostgreSQL store's read-ahead of the due index and its merged
/// queue pages (no flush before a range read) answer every bounded read of
/// a transaction as the reference model does, with no full-state read in
/// between to refresh them: a prelude-like loop of pops, schedules
/// (earlier than, inside and past the window) and page reads after
/// appends and removals, in two transactions (the first committed).
#[test]
fn postgres_reads_ahead_as_the_reference_model_reads() {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(24),
        ..ProptestConfig::default()
    });
    let ops = (
        prop::collection::vec(due_op_strategy(), 0..40),
        prop::collection::vec(due_op_strategy(), 1..60),
    );
    let result = runner.run(&ops, |(first, second)| {
        cluster
            .psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let subject = Postgres {
            cluster: &cluster,
            store: None,
        };
        let store = subject
            .open()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let model = MemStore::new();
        let fail = |e: rltp_storage::StoreError| TestCaseError::fail(e.to_string());
        for (ops, commit) in [(&first, true), (&second, false)] {
            let mut m = model.begin_write().map_err(fail)?;
            let mut d = store.begin_write().map_err(fail)?;
            for op in ops {
                prop_assert_eq!(
                    apply_due_op(&mut m, op).map_err(fail)?,
                    apply_due_op(&mut d, op).map_err(fail)?,
                    "{:?}",
                    op
                );
            }
            prop_assert_eq!(state(&m).map_err(fail)?, state(&d).map_err(fail)?);
            if commit {
                model.commit(m).map_err(fail)?;
                store.commit(d).map_err(fail)?;
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
