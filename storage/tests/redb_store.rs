//! What only the durable store has: persistence across reopen, segment
//! rotation and whole-segment reclamation, recovery that ignores
//! unreferenced tail bytes, corruption detection, compaction.

mod common;

use common::*;
use rltp_storage::redb_store::{RedbOptions, RedbStore};
use rltp_storage::{
    DeclarationRecord, Departure, DepartureRecord, DepositId, Due, ReadTxn, Store, StoreError,
    StoreResult, WriteTxn,
};
use std::path::Path;

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("segments"))
        .expect("segments directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn everything_survives_reopen() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let rkids = [rkid(1), rkid(2), rkid(3)];
    let ids: Vec<DepositId> = (0..4).map(|i| DepositId::of(&payload(i, 900))).collect();
    let before = {
        let store = RedbStore::open_with(dir.path(), small_segments())?;
        write(&store, |t| {
            t.put_binding(&rkids[0], &live(4, 40))?;
            t.put_binding(&rkids[1], &closing(2, 77))?;
            t.put_tombstone(&rkids[2], &tomb(9, 33))?;
            for i in 0..4 {
                let d = t.append_deposit(&rkids[(i % 2) as usize], &payload(i, 900), i, 100 + i)?;
                t.schedule(d.give_up_at, &Due::GiveUp(rkids[(i % 2) as usize], d.seq))?;
            }
            t.put_departure(
                &rkids[0],
                &ids[3],
                &DepartureRecord {
                    departure: Departure::GivenUp,
                    forget_at: 500,
                },
            )?;
            t.add_elastic_bytes(123)?;
            t.put_declaration(&DeclarationRecord {
                revision: 3,
                document: b"doc".to_vec(),
            })
        })?;
        write(&store, |t| t.remove_deposit(&rkids[0], 1).map(drop))?;
        dump(&store.read()?, &rkids, &ids)?
    };
    assert_eq!(before.deposits[0].len(), 1);
    assert_eq!(before.deposits[1].len(), 2);
    let mut store = RedbStore::open_with(dir.path(), small_segments())?;
    assert_eq!(dump(&store.read()?, &rkids, &ids)?, before);
    // Sequence numbers continue after a reopen.
    let next = write(&store, |t| t.append_deposit(&rkids[0], b"later", 0, 0))?;
    assert_eq!(next.seq, 3);
    let report = store.integrity_check()?;
    assert_eq!(
        (report.bindings, report.tombstones, report.deposits),
        (2, 1, 4)
    );
    assert_eq!(report.bytes, 3 * 900 + 5);
    Ok(())
}

#[test]
fn drained_segments_are_deleted_whole() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let mut store = RedbStore::open_with(dir.path(), small_segments())?;
    let a = rkid(1);
    // 24 deposits of 1000 B in 4 KiB segments: several rotations.
    let mut held = Vec::new();
    for i in 0..24 {
        held.push(write(&store, |t| {
            t.append_deposit(&a, &payload(i, 1000), 0, 0)
        })?);
    }
    let grown = segment_files(dir.path()).len();
    assert!(grown >= 4, "{grown} segment files");
    // Keep the last one; conclude the rest.
    for d in &held[..23] {
        write(&store, |t| t.remove_deposit(&a, d.seq).map(drop))?;
    }
    // Drained segments are unlinked after the next durable commit.
    store.checkpoint()?;
    write(&store, |t| t.add_elastic_bytes(0))?;
    let left = segment_files(dir.path()).len();
    assert!(
        left <= 2,
        "{left} segment files left: {:?}",
        segment_files(dir.path())
    );
    assert_eq!(
        store.read()?.deposit_bytes(&a, &held[23])?,
        payload(23, 1000)
    );
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn reopen_starts_a_new_segment_and_ignores_tail_garbage() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let a = rkid(1);
    let d = {
        let store = RedbStore::open(dir.path())?;
        let d = write(&store, |t| t.append_deposit(&a, &payload(1, 500), 0, 0))?;
        // A batch that never committed leaves bytes past the extent.
        {
            let mut t = store.begin_write()?;
            t.append_deposit(&a, &payload(2, 2_000_000), 0, 0)?;
        }
        d
    };
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 1);
    // Simulate a torn write after the committed extent.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("segments").join(&files[0]))?;
        f.write_all(&[0xee; 333])?;
    }
    let mut store = RedbStore::open(dir.path())?;
    let after = segment_files(dir.path());
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[0], files[0]);
    assert_eq!(store.read()?.deposit_bytes(&a, &d)?, payload(1, 500));
    let e = write(&store, |t| t.append_deposit(&a, &payload(3, 10), 0, 0))?;
    assert_eq!(e.seq, 2);
    assert!(store.integrity_check()?.is_clean());
    drop(store);
    // Once its deposit leaves, the old segment goes away; an empty active
    // segment is dropped at the next open.
    let store = RedbStore::open(dir.path())?;
    write(&store, |t| t.remove_deposit(&a, d.seq).map(drop))?;
    write(&store, |t| t.remove_deposit(&a, e.seq).map(drop))?;
    drop(store);
    let mut store = RedbStore::open(dir.path())?;
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn corrupted_bytes_are_reported_never_served() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let a = rkid(1);
    let d = {
        let store = RedbStore::open(dir.path())?;
        write(&store, |t| t.append_deposit(&a, &payload(7, 64), 0, 0))?
    };
    let file = dir
        .path()
        .join("segments")
        .join(&segment_files(dir.path())[0]);
    let mut bytes = std::fs::read(&file)?;
    // The deposit's bytes end its batch's log record, the last in the file.
    let at = bytes.len() - 10;
    bytes[at] ^= 1;
    std::fs::write(&file, bytes)?;
    let mut store = RedbStore::open(dir.path())?;
    let result = store.read()?.deposit_bytes(&a, &d);
    assert!(
        matches!(&result, Err(StoreError::Corrupt(m)) if m.contains("do not match their id")),
        "expected Corrupt, got {result:?}"
    );
    // The integrity check names it.
    let report = store.integrity_check()?;
    assert!(!report.is_clean());
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    assert!(
        report.damaged[0].contains(&format!("deposit {}", d.seq))
            && report.damaged[0].contains("do not match their id"),
        "{report:?}"
    );
    Ok(())
}

#[test]
fn compaction_moves_stragglers_and_frees_sparse_segments() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let options = RedbOptions {
        segment_bytes: 8192,
        compact_below_percent: 50,
        ..RedbOptions::default()
    };
    let mut store = RedbStore::open_with(dir.path(), options)?;
    let (a, b) = (rkid(1), rkid(2));
    let mut kept = Vec::new();
    for i in 0..60u64 {
        let queue = if i % 3 == 0 { b } else { a };
        let d = write(&store, |t| t.append_deposit(&queue, &payload(i, 700), i, i))?;
        if i % 10 == 0 {
            kept.push((queue, d, i));
        } else {
            write(&store, |t| t.remove_deposit(&queue, d.seq).map(drop))?;
        }
    }
    // Interleave removals so that every segment keeps a straggler.
    let before = segment_files(dir.path()).len();
    let snapshot = dump(&store.read()?, &[a, b], &[])?;
    let mut steps = 0;
    let mut moved = 0;
    loop {
        let step = store.compact_step(4)?;
        steps += 1;
        moved += step.moved;
        if step.pass_complete {
            break;
        }
        assert!(steps < 100, "compaction does not finish");
    }
    // Drained segments are unlinked after the next durable commit.
    store.checkpoint()?;
    write(&store, |t| t.add_elastic_bytes(0))?;
    let after = segment_files(dir.path()).len();
    assert!(moved > 0, "nothing moved");
    assert!(steps > 1, "one step scanned everything");
    assert!(after < before, "{before} -> {after} segment files");
    // Same observable state, bytes included; seqs and order unchanged.
    assert_eq!(dump(&store.read()?, &[a, b], &[])?, snapshot);
    for (queue, d, i) in &kept {
        assert_eq!(store.read()?.deposit_bytes(queue, d)?, payload(*i, 700));
    }
    assert!(store.integrity_check()?.is_clean());
    // A second pass finds nothing sparse to move.
    let again = store.compact_step(1000)?;
    assert_eq!((again.moved, again.pass_complete), (0, true));
    Ok(())
}
