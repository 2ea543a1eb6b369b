//! Group commit over a real store: concurrent producers share batches (fewer
//! commits than operations), and every reply comes after the commit of its
//! batch returned; one operation on damaged data fails alone. Run over
//! `MemStore` and `RedbStore`. An online backup (`rltp-backup/1`) taken
//! while the writer keeps appending holds every append acknowledged before
//! it began, as a gapless prefix of each queue.

#![allow(clippy::panic, clippy::unwrap_used)]

#[path = "../../storage/tests/common/mod.rs"]
mod store;

use rltp_server::clock::{Clock as _, ManualClock, SystemClock};
use rltp_server::defaults::MAX_BATCH;
use rltp_server::writer::{Job, Ticket, Writer};
use rltp_storage::backup;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::mem::MemStore;
use rltp_storage::redb_store::{RedbOptions, RedbStore};
use rltp_storage::{DepositId, Ms, ReadTxn, Store, StoreResult, WriteTxn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::*;

/// A store that counts the commits that have returned.
struct Counting<S> {
    inner: S,
    commits: AtomicU64,
}

impl<S: Store> Store for Counting<S> {
    type Read<'a> = S::Read<'a>;
    type Write<'a> = S::Write<'a>;
    fn read(&self) -> StoreResult<S::Read<'_>> {
        self.inner.read()
    }
    fn begin_write(&self) -> StoreResult<S::Write<'_>> {
        self.inner.begin_write()
    }
    fn commit(&self, txn: S::Write<'_>) -> StoreResult<()> {
        self.inner.commit(txn)?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn challenges(&self) -> &rltp_storage::ChallengeTable {
        self.inner.challenges()
    }
}

const THREADS: u64 = 16;
const PER_THREAD: u64 = 40;

fn concurrent_appends<S: Store>(inner: S) -> StoreResult<()> {
    let store = Arc::new(Counting {
        inner,
        commits: AtomicU64::new(0),
    });
    let committer = Writer::start(
        Arc::clone(&store),
        Arc::new(ManualClock::new(1_000)),
        None,
        MAX_BATCH,
    )?;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let committer = committer.clone();
            let store = Arc::clone(&store);
            std::thread::spawn(move || -> StoreResult<()> {
                let queue = rkid(t as u8);
                for i in 0..PER_THREAD {
                    let bytes = payload(t * 1000 + i, 50 + i as usize);
                    let counter = Arc::clone(&store);
                    let (deposit, commits_seen) = committer
                        .submit(Job::harness(move |txn, now, _| {
                            let seen = counter.commits.load(Ordering::SeqCst);
                            Ok((txn.append_deposit(&queue, &bytes, now, now + 1)?, seen))
                        }))
                        .wait()
                        .map_err(|e| rltp_storage::StoreError::Io(std::io::Error::other(e)))?;
                    // The commit of this operation's batch has returned…
                    assert!(store.commits.load(Ordering::SeqCst) > commits_seen);
                    // …so its effect is visible to a fresh snapshot.
                    assert_eq!(
                        store.read()?.deposit_by_id(&queue, &deposit.id)?,
                        Some(deposit)
                    );
                    assert_eq!(deposit.seq, i + 1);
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("producer thread")?;
    }
    let stats = committer.stats();
    let batches = stats.batches.load(Ordering::Relaxed);
    let operations = stats.operations.load(Ordering::Relaxed);
    assert_eq!(operations, THREADS * PER_THREAD);
    assert_eq!(stats.failed_batches.load(Ordering::Relaxed), 0);
    assert!(
        batches < operations,
        "{batches} batches for {operations} operations: no grouping"
    );
    assert_eq!(store.commits.load(Ordering::SeqCst), batches);
    assert_eq!(store.read()?.occupancy()?.deposits, THREADS * PER_THREAD);
    println!("{operations} operations in {batches} batches");
    Ok(())
}

#[test]
fn batches_group_concurrent_operations_mem() -> StoreResult<()> {
    concurrent_appends(MemStore::new())
}

#[test]
fn batches_group_concurrent_operations_redb() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    concurrent_appends(RedbStore::open_with(dir.path(), small_segments())?)?;
    let mut store = RedbStore::open(dir.path())?;
    let report = store.integrity_check()?;
    assert_eq!(report.deposits, THREADS * PER_THREAD);
    Ok(())
}

/// One operation that meets damaged data ([`StoreError::Corrupt`]) is
/// refused alone: the others of its batch run again without it and are
/// committed (issue 13: a collect of a damaged deposit used to fail its
/// whole batch, and submissions to other queues far below their floor
/// were answered `refused(capacity)`). An operation failing otherwise
/// still fails its batch.
fn damaged_data_fails_one_operation_not_its_batch<S: Store>(store: S) -> StoreResult<()> {
    use rltp_server::writer::CommitError;
    use rltp_storage::StoreError;
    let store = Arc::new(store);
    let committer = Writer::start(
        Arc::clone(&store),
        Arc::new(ManualClock::new(1_000)),
        None,
        MAX_BATCH,
    )?;
    // Hold the writer inside a first batch while the others queue up (they
    // may join that batch or form the next one).
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let first = committer.submit(Job::harness(move |_: &mut dyn WriteTxn, _, _| {
        let _ = wait.lock().map(|w| w.recv());
        Ok(())
    }));
    let runs = Arc::new(AtomicU64::new(0));
    let appends = |n: u8, runs: Arc<AtomicU64>| {
        committer.submit(Job::harness(move |t: &mut dyn WriteTxn, now, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            t.append_deposit(&rkid(n), &payload(u64::from(n), 64), now, now)
        }))
    };
    let a = appends(1, Arc::clone(&runs));
    let damaged = committer.submit(Job::harness(
        |t: &mut dyn WriteTxn, now, _| -> StoreResult<()> {
            t.append_deposit(&rkid(2), &payload(2, 64), now, now)?;
            Err(StoreError::Corrupt("bytes do not match their id".into()))
        },
    ));
    let c = appends(3, Arc::new(AtomicU64::new(0)));
    let failing = committer.submit(Job::harness(
        |_: &mut dyn WriteTxn, _, _| -> StoreResult<()> {
            Err(StoreError::Corrupt("another damaged record".into()))
        },
    ));
    // (A run again after the release finds the channel closed.)
    release.send(()).ok();
    drop(release);
    fn block<R>(r: Ticket<R>) -> Result<R, CommitError> {
        r.wait()
    }
    let fail = |e: CommitError| StoreError::Io(std::io::Error::other(e));
    block(first).map_err(fail)?;
    let a = block(a).map_err(fail)?;
    let c = block(c).map_err(fail)?;
    for refused in [block(damaged), block(failing)] {
        match refused {
            Err(CommitError::Store(e)) => assert!(matches!(*e, StoreError::Corrupt(_)), "{e}"),
            other => panic!("expected the damaged-data error, got {other:?}"),
        }
    }
    // The operation before the damaged one ran again without it.
    assert_eq!(runs.load(Ordering::SeqCst), 3, "ran, re-run twice");
    let r = store.read()?;
    assert_eq!(r.deposits(&rkid(1), None, 10)?, [a]);
    assert_eq!(r.deposits(&rkid(3), None, 10)?, [c]);
    assert!(r.deposits(&rkid(2), None, 10)?.is_empty());
    let stats = committer.stats();
    assert_eq!(stats.isolated_operations.load(Ordering::SeqCst), 2);
    assert_eq!(stats.failed_batches.load(Ordering::SeqCst), 0);
    // Any other failure still fails the whole batch.
    let other = committer
        .submit(Job::harness(
            |_: &mut dyn WriteTxn, _, _| -> StoreResult<()> {
                Err(StoreError::Io(std::io::Error::other(
                    "not about one record",
                )))
            },
        ))
        .wait();
    assert!(matches!(other, Err(CommitError::Store(_))));
    assert_eq!(stats.failed_batches.load(Ordering::SeqCst), 1);
    Ok(())
}

#[test]
fn damaged_data_fails_one_operation_not_its_batch_mem() -> StoreResult<()> {
    damaged_data_fails_one_operation_not_its_batch(MemStore::new())
}

#[test]
fn damaged_data_fails_one_operation_not_its_batch_redb() -> StoreResult<()> {
    let (_dir, store) = redb(small_segments());
    damaged_data_fails_one_operation_not_its_batch(store)
}

fn now_ms() -> Ms {
    SystemClock.now()
}

/// An embedded store an online backup is taken of, opened with segments
/// large enough for a backup under load.
trait Backed: Store + backup::BackupSource + Sized {
    fn larger(dir: &std::path::Path) -> Self;
}

impl Backed for RedbStore {
    fn larger(dir: &std::path::Path) -> Self {
        let options = RedbOptions {
            segment_bytes: 64 << 10,
            ..RedbOptions::default()
        };
        RedbStore::open_with(dir, options).unwrap()
    }
}

impl Backed for LogStore {
    fn larger(dir: &std::path::Path) -> Self {
        let options = LogOptions {
            segment_bytes: 64 << 10,
            snapshot_log_bytes: 128 << 10,
            ..LogOptions::default()
        };
        LogStore::open_with(dir, options).unwrap()
    }
}

#[test]
fn an_online_backup_of_the_log_store_holds_every_acknowledged_append_as_a_gapless_prefix() {
    an_online_backup_holds_every_acknowledged_append_as_a_gapless_prefix::<LogStore>();
}

#[test]
fn an_online_backup_of_the_redb_store_holds_every_acknowledged_append_as_a_gapless_prefix() {
    an_online_backup_holds_every_acknowledged_append_as_a_gapless_prefix::<RedbStore>();
}

/// While the writer keeps appending, a backup holds every append
/// acknowledged before it began, as a gapless prefix of each queue; the
/// restored store (always the log store: a redb archive is upgraded as it
/// is restored) holds exactly what the manifest counts.
fn an_online_backup_holds_every_acknowledged_append_as_a_gapless_prefix<S: Backed>() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(S::larger(&dir.path().join("store")));
    let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, 256).unwrap();
    let rkids: Vec<_> = (1..=4).map(rkid).collect();
    // Acknowledged appends: (rkid index, seq, id, acknowledged at).
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4usize)
        .map(|w| {
            let (committer, acked, stop) =
                (committer.clone(), Arc::clone(&acked), Arc::clone(&stop));
            let r = rkids[w];
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let bytes = payload(w as u64 * 1_000_000 + n, 512 + (n % 300) as usize);
                    let id = DepositId::of(&bytes);
                    let d = committer
                        .submit(Job::harness(move |t, now, _| {
                            t.append_deposit(&r, &bytes, now, now + 1)
                        }))
                        .wait()
                        .unwrap();
                    acked
                        .lock()
                        .unwrap()
                        .push((w, d.seq, id, std::time::Instant::now()));
                    n += 1;
                }
            })
        })
        .collect();
    while acked.lock().unwrap().len() < 400 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let began = std::time::Instant::now();
    let mut archive = Vec::new();
    let written = backup::write_backup(&*store, &now_ms, "test", &[], &mut archive).unwrap();
    let ended = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let during = acked.iter().filter(|a| a.3 > began && a.3 < ended).count();
    let after = acked.iter().filter(|a| a.3 > ended).count();
    assert!(after > 0, "appends went on after the backup");
    eprintln!(
        "backup: {} B, {} deposits, {:?}; {during} appends acknowledged during it",
        archive.len(),
        written.manifest.occupancy.deposits,
        ended - began
    );

    let restored = dir.path().join("restored");
    let read = backup::unpack(&archive[..], &restored).unwrap();
    backup::check_unpacked(&restored, &read.manifest).unwrap();
    let copy = LogStore::open(restored.join("store")).unwrap();
    let snapshot = copy.read().unwrap();
    let mut held_total = 0;
    for (w, r) in rkids.iter().enumerate() {
        let held = snapshot.deposits(r, None, usize::MAX).unwrap();
        // A gapless prefix of the queue's admission order.
        for (i, d) in held.iter().enumerate() {
            assert_eq!(d.seq, i as u64 + 1);
        }
        for a in acked.iter().filter(|a| a.0 == w && a.3 < began) {
            let found = held.get(a.1 as usize - 1).map(|d| d.id);
            assert_eq!(
                found,
                Some(a.2),
                "acknowledged append {} of queue {w} lost",
                a.1
            );
        }
        held_total += held.len() as u64;
    }
    assert_eq!(held_total, written.manifest.occupancy.deposits);
}

/// A declaration revision whose batch is run again (another operation of
/// the batch met damaged data) applies in full on the re-run: the engine's
/// constants are put back with the dropped attempt, so the re-run still
/// sees the old `queue-floor` and re-derives the elastic occupancy (it
/// used to see the new floor already in force and skip the re-derivation).
#[test]
fn a_revision_run_again_after_damaged_data_applies_in_full() -> StoreResult<()> {
    use rltp_engine::{BudgetMeter, Engine, EngineConfig, EngineConstants};
    use rltp_server::writer::CommitError;
    use rltp_storage::{Binding, Due, Phase, StoreError};
    let constants = EngineConstants {
        orphan_horizon_ms: 30 * 86_400_000,
        give_up_horizon_ms: 14 * 86_400_000,
        challenge_lifetime_ms: 60_000,
        queue_floor: 100,
        max_queue_bytes: 1 << 20,
        max_binding_tombstones: 10,
        status_horizon_ms: 30_000,
    };
    let engine = Arc::new(Engine::new(
        "did:web:carrier.example".parse().unwrap(),
        constants,
        EngineConfig::new(1 << 30, 10),
        Arc::new(BudgetMeter::new()),
    ));
    let store = Arc::new(MemStore::new());
    let writer = Writer::start(
        Arc::clone(&store),
        Arc::new(ManualClock::new(1_000)),
        Some(Arc::clone(&engine)),
        MAX_BATCH,
    )?;
    let fail = |e: CommitError| StoreError::Io(std::io::Error::other(e));
    // A live binding whose queue holds 300 bytes: 200 above the floor.
    writer
        .submit(Job::harness(|t: &mut dyn WriteTxn, now, _| {
            let r = rkid(1);
            t.put_binding(
                &r,
                &Binding {
                    phase: Phase::Live,
                    generation: 1,
                    principal: [1; 32],
                    last_collection_at: now,
                },
            )?;
            t.schedule(now + 30 * 86_400_000, &Due::OrphanExpiry(r))?;
            t.append_deposit(&r, &payload(1, 300), now, now + 14 * 86_400_000)?;
            t.add_elastic_bytes(200)
        }))
        .wait()
        .map_err(fail)?;
    // Hold the writer so that the revision and a damaged operation share
    // the next batch.
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let first = writer.submit(Job::harness(move |_: &mut dyn WriteTxn, _, _| {
        let _ = wait.lock().map(|w| w.recv());
        Ok(())
    }));
    let revised = EngineConstants {
        queue_floor: 50,
        ..constants
    };
    let engine_in_job = Arc::clone(&engine);
    let revision = writer.submit(Job::harness(move |t: &mut dyn WriteTxn, now, events| {
        engine_in_job.apply_constants(t, revised, None, now, events)
    }));
    let damaged = writer.submit(Job::harness(
        |_: &mut dyn WriteTxn, _, _| -> StoreResult<()> {
            Err(StoreError::Corrupt("a damaged record".into()))
        },
    ));
    release.send(()).ok();
    drop(release);
    fn block<R>(r: Ticket<R>) -> Result<R, CommitError> {
        r.wait()
    }
    block(first).map_err(fail)?;
    assert!(matches!(block(damaged), Err(CommitError::Store(_))));
    block(revision).map_err(fail)?.unwrap();
    assert_eq!(engine.constants().queue_floor, 50);
    assert_eq!(
        store.read()?.occupancy()?.elastic_bytes,
        250,
        "300 bytes above a floor of 50"
    );
    Ok(())
}

/// A batch the database aborted as a conflict (a serialization failure or
/// a deadlock: nothing written) runs again, whole, a bounded number of
/// times: two conflicts and then success answer every caller as if none
/// happened; a conflict every time is refused after
/// `1 + CONFLICT_RETRIES` attempts, with the conflict.
#[test]
fn a_conflict_runs_the_batch_again_a_bounded_number_of_times() -> StoreResult<()> {
    use rltp_server::writer::{CONFLICT_RETRIES, CommitError};
    use rltp_storage::StoreError;
    let store = Arc::new(MemStore::new());
    let committer = Writer::start(Arc::clone(&store), Arc::new(SystemClock), None, 256).unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&runs);
    let appended = committer
        .submit(Job::harness(move |t: &mut dyn WriteTxn, now, _| {
            let deposit = t.append_deposit(&rkid(1), &payload(1, 64), now, now + 1)?;
            if counted.fetch_add(1, Ordering::SeqCst) < 2 {
                return Err(StoreError::Conflict("could not serialize access".into()));
            }
            Ok(deposit)
        }))
        .wait()
        .map_err(|e| StoreError::Io(std::io::Error::other(e)))?;
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // The aborted attempts wrote nothing: one deposit, seq 1.
    assert_eq!(appended.seq, 1);
    assert_eq!(store.read()?.deposits(&rkid(1), None, 10)?, [appended]);

    let runs = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&runs);
    let refused = committer
        .submit(Job::harness(
            move |_: &mut dyn WriteTxn, _, _| -> StoreResult<()> {
                counted.fetch_add(1, Ordering::SeqCst);
                Err(StoreError::Conflict("deadlock detected".into()))
            },
        ))
        .wait();
    match refused {
        Err(CommitError::Store(e)) => assert!(matches!(*e, StoreError::Conflict(_)), "{e}"),
        other => panic!("expected the conflict, got {other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), u64::from(1 + CONFLICT_RETRIES));
    assert_eq!(committer.stats().failed_batches.load(Ordering::SeqCst), 1);
    Ok(())
}
