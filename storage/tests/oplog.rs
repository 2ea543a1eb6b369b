//! The operation log (`src/oplog.rs`): a commit is durable through its log
//! record, redb commits non-durably between checkpoints, and opening
//! replays what redb's durable state does not hold.
//!
//! A *crash image* is a copy of the store directory taken while the store
//! is open: redb's file then holds its last durable commit only (its
//! non-durable commits live in the process), exactly what a `SIGKILL`
//! leaves (`tests/crash.rs` does that for real, in a child process).

mod common;

use common::*;
use rltp_proofs::multikey::Rkid;
use rltp_storage::redb_store::{RedbOptions, RedbStore, ReplayReport};
use rltp_storage::{
    DeclarationRecord, Departure, DepartureRecord, DepositId, Due, ReadTxn, Store, StoreResult,
    WriteTxn,
};
use std::path::Path;

fn write<R>(
    store: &RedbStore,
    f: impl FnOnce(&mut <RedbStore as Store>::Write<'_>) -> StoreResult<R>,
) -> StoreResult<R> {
    let mut txn = store.begin_write()?;
    let out = f(&mut txn)?;
    store.commit(txn)?;
    Ok(out)
}

/// Checkpoints only at open and rotation (so every batch is replayed).
fn no_checkpoints() -> RedbOptions {
    RedbOptions {
        checkpoint_ops: u64::MAX,
        checkpoint_bytes: u64::MAX,
        ..RedbOptions::default()
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to.join("segments"))?;
    std::fs::copy(from.join("carrier.redb"), to.join("carrier.redb"))?;
    for entry in std::fs::read_dir(from.join("segments"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join("segments").join(entry.file_name()))?;
    }
    Ok(())
}

fn the_active_segment(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("segments"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    names.sort();
    names
        .pop()
        .ok_or_else(|| std::io::Error::other("no segment"))
}

const RKIDS: [u8; 3] = [1, 2, 3];

fn rkids() -> Vec<Rkid> {
    RKIDS.iter().map(|&n| rkid(n)).collect()
}

fn ids() -> Vec<DepositId> {
    (0..30).map(|i| DepositId::of(&payload(i, 700))).collect()
}

/// Thirty batches touching every operation of the log.
fn traffic(store: &RedbStore) -> StoreResult<()> {
    let r = rkids();
    write(store, |t| {
        t.put_binding(&r[0], &live(1, 10))?;
        t.put_binding(&r[1], &closing(2, 99))?;
        t.put_tombstone(&r[2], &tomb(5, 7))?;
        t.put_declaration(&DeclarationRecord {
            revision: 4,
            document: b"{\"d\":1}".to_vec(),
        })
    })?;
    for i in 0..30u64 {
        write(store, |t| {
            let q = &r[(i % 2) as usize];
            let d = t.append_deposit(q, &payload(i, 700), 100 + i, 1_000 + i)?;
            t.schedule(d.give_up_at, &Due::GiveUp(*q, d.seq))?;
            if i % 3 == 2 {
                // Conclude the one before: removal, unschedule, departure.
                let held = t.deposits(q, None, 1)?;
                if let Some(first) = held.first() {
                    t.remove_deposit(q, first.seq)?;
                    t.unschedule(first.give_up_at, &Due::GiveUp(*q, first.seq))?;
                    t.put_departure(
                        q,
                        &first.id,
                        &DepartureRecord {
                            departure: Departure::Concluded,
                            forget_at: 5_000 + i,
                        },
                    )?;
                }
            }
            if i == 20 {
                t.remove_tombstone(&r[2])?;
                t.put_binding(&r[2], &live(6, 20))?;
                t.remove_binding(&r[1])?;
                t.put_tombstone(&r[1], &tomb(2, 21))?;
                t.add_elastic_bytes(-5)?;
                t.remove_departure(&r[0], &DepositId::of(&payload(0, 700)))?;
            }
            t.add_elastic_bytes(10)
        })?;
    }
    Ok(())
}

#[test]
fn a_crash_image_replays_every_acknowledged_batch() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let store = RedbStore::open_with(dir.path(), no_checkpoints())?;
    traffic(&store)?;
    let before = dump(&store.read()?, &rkids(), &ids())?;
    copy_dir(dir.path(), image.path())?;
    drop(store);

    let mut crashed = RedbStore::open_with(image.path(), no_checkpoints())?;
    let replay = crashed.last_replay();
    // 31 batches; 1 + 30×3 + 10×3 + 6 operations.
    assert_eq!((replay.records, replay.ops), (31, 4 + 90 + 30 + 6));
    assert_eq!(dump(&crashed.read()?, &rkids(), &ids())?, before);
    assert_eq!(before.occupancy.deposits, 20);
    assert_eq!(before.occupancy.elastic_bytes, 295);
    assert!(crashed.integrity_check()?.is_clean());
    // Sequence numbers continue where the replayed state left them.
    let next = write(&crashed, |t| t.append_deposit(&rkid(1), b"later", 0, 0))?;
    assert_eq!(next.seq, 16);
    // A clean close leaves nothing to replay.
    drop(crashed);
    let reopened = RedbStore::open_with(image.path(), no_checkpoints())?;
    assert_eq!(reopened.last_replay(), ReplayReport::default());
    Ok(())
}

#[test]
fn a_torn_record_at_the_tail_is_not_applied() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let store = RedbStore::open_with(dir.path(), no_checkpoints())?;
    traffic(&store)?;
    let before = dump(&store.read()?, &rkids(), &ids())?;
    let segment = the_active_segment(dir.path())?;
    let committed = std::fs::metadata(&segment)?.len();
    // One more batch, whose record the "crash" tears in half.
    write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(99, 700), 0, 0)
            .map(drop)
    })?;
    copy_dir(dir.path(), image.path())?;
    drop(store);
    let full = std::fs::metadata(&segment)?.len();
    let torn = image
        .path()
        .join("segments")
        .join(segment.file_name().unwrap_or_default());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&torn)?
        .set_len(committed + (full - committed) / 2)?;

    let mut crashed = RedbStore::open_with(image.path(), no_checkpoints())?;
    assert_eq!(crashed.last_replay().records, 31);
    assert_eq!(dump(&crashed.read()?, &rkids(), &ids())?, before);
    assert!(crashed.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn a_flipped_bit_ends_the_log_there() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let store = RedbStore::open_with(dir.path(), no_checkpoints())?;
    let a = rkid(1);
    write(&store, |t| t.put_binding(&a, &live(1, 1)))?;
    write(&store, |t| {
        t.append_deposit(&a, &payload(1, 300), 0, 0).map(drop)
    })?;
    let segment = the_active_segment(dir.path())?;
    let second = std::fs::metadata(&segment)?.len();
    write(&store, |t| {
        t.append_deposit(&a, &payload(2, 300), 0, 0).map(drop)
    })?;
    copy_dir(dir.path(), image.path())?;
    drop(store);
    let copy = image
        .path()
        .join("segments")
        .join(segment.file_name().unwrap_or_default());
    let mut bytes = std::fs::read(&copy)?;
    let at = usize::try_from(second).unwrap_or(usize::MAX) + 100;
    bytes[at] ^= 0x01;
    std::fs::write(&copy, &bytes)?;

    let mut crashed = RedbStore::open_with(image.path(), no_checkpoints())?;
    assert_eq!(crashed.last_replay().records, 2);
    let held = crashed.read()?.deposits(&a, None, 10)?;
    assert_eq!(held.len(), 1);
    assert_eq!(
        crashed.read()?.deposit_bytes(&a, &held[0])?,
        payload(1, 300)
    );
    assert!(crashed.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn an_abandoned_record_that_reached_the_file_is_voided_and_stepped_over() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let store = RedbStore::open_with(dir.path(), no_checkpoints())?;
    let a = rkid(1);
    write(&store, |t| {
        t.append_deposit(&a, &payload(1, 500), 0, 0).map(drop)
    })?;
    {
        // More than the spill threshold: part of it reaches the file.
        let mut t = store.begin_write()?;
        for i in 0..40 {
            t.append_deposit(&a, &payload(100 + i, 60_000), 0, 0)?;
        }
    }
    write(&store, |t| {
        t.append_deposit(&a, &payload(2, 500), 0, 0).map(drop)
    })?;
    let before = store.read()?.deposits(&a, None, 100)?;
    copy_dir(dir.path(), image.path())?;
    drop(store);

    let mut crashed = RedbStore::open_with(image.path(), no_checkpoints())?;
    // The first batch, the void, the last batch.
    assert_eq!(
        (crashed.last_replay().records, crashed.last_replay().ops),
        (3, 2)
    );
    let after = crashed.read()?.deposits(&a, None, 100)?;
    assert_eq!(after, before);
    assert_eq!(after.iter().map(|d| d.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(
        crashed.read()?.deposit_bytes(&a, &after[1])?,
        payload(2, 500)
    );
    assert!(crashed.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn checkpoints_bound_what_an_open_replays() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let options = RedbOptions {
        checkpoint_ops: 10,
        ..no_checkpoints()
    };
    let store = RedbStore::open_with(dir.path(), options.clone())?;
    let a = rkid(1);
    for i in 0..25 {
        write(&store, |t| {
            t.append_deposit(&a, &payload(i, 100), 0, 0).map(drop)
        })?;
    }
    copy_dir(dir.path(), image.path())?;
    drop(store);
    // Commits 10 and 20 were durable: five batches remain to replay.
    let mut crashed = RedbStore::open_with(image.path(), options)?;
    assert_eq!(
        (crashed.last_replay().records, crashed.last_replay().ops),
        (5, 5)
    );
    assert_eq!(crashed.read()?.deposits(&a, None, 100)?.len(), 25);
    assert!(crashed.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn compaction_moves_are_replayed() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let image = tempfile::tempdir()?;
    let options = RedbOptions {
        segment_bytes: 8192,
        compact_below_percent: 50,
        ..no_checkpoints()
    };
    let store = RedbStore::open_with(dir.path(), options.clone())?;
    let a = rkid(1);
    let mut held = Vec::new();
    for i in 0..12 {
        held.push(write(&store, |t| {
            t.append_deposit(&a, &payload(i, 1500), 0, 0)
        })?);
    }
    // Leave one deposit in each of the early segments, then compact.
    for d in held.iter().filter(|d| d.seq % 4 != 1) {
        write(&store, |t| t.remove_deposit(&a, d.seq).map(drop))?;
    }
    let mut moved = 0;
    loop {
        let step = store.compact_step(64)?;
        moved += step.moved;
        if step.pass_complete {
            break;
        }
    }
    assert!(moved >= 2, "moved {moved}");
    let before = dump(&store.read()?, &[a], &[])?;
    copy_dir(dir.path(), image.path())?;
    drop(store);
    let mut crashed = RedbStore::open_with(image.path(), options)?;
    assert_eq!(dump(&crashed.read()?, &[a], &[])?, before);
    assert!(crashed.integrity_check()?.is_clean());
    Ok(())
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

#[test]
fn a_format_1_store_is_upgraded_in_place() -> StoreResult<()> {
    use redb::{ReadableDatabase, TableDefinition};
    const META: TableDefinition<&[u8], &[u8]> = TableDefinition::new("meta");
    let dir = tempfile::tempdir()?;
    let a = rkid(1);
    {
        let store = RedbStore::open(dir.path())?;
        write(&store, |t| {
            t.append_deposit(&a, &payload(1, 400), 0, 0).map(drop)
        })?;
    }
    // What a format-1 store lacks: the format number 2 and `applied`.
    {
        let db = redb::Database::create(dir.path().join("carrier.redb")).map_err(io)?;
        let txn = db.begin_write().map_err(io)?;
        {
            let mut meta = txn.open_table(META).map_err(io)?;
            meta.insert(&b"format"[..], &1u32.to_be_bytes()[..])
                .map_err(io)?;
            meta.remove(&b"applied"[..]).map_err(io)?;
        }
        txn.commit().map_err(io)?;
    }
    let mut store = RedbStore::open(dir.path())?;
    assert_eq!(store.last_replay(), ReplayReport::default());
    let held = store.read()?.deposits(&a, None, 10)?;
    assert_eq!(store.read()?.deposit_bytes(&a, &held[0])?, payload(1, 400));
    write(&store, |t| {
        t.append_deposit(&a, &payload(2, 400), 0, 0).map(drop)
    })?;
    assert!(store.integrity_check()?.is_clean());
    drop(store);
    let db = redb::Database::create(dir.path().join("carrier.redb")).map_err(io)?;
    let read = db.begin_read().map_err(io)?;
    let meta = read.open_table(META).map_err(io)?;
    let format = meta
        .get(&b"format"[..])
        .map_err(io)?
        .map(|v| v.value().to_vec());
    assert_eq!(format, Some(2u32.to_be_bytes().to_vec()));
    assert!(meta.get(&b"applied"[..]).map_err(io)?.is_some());
    Ok(())
}
