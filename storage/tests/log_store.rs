//! The log store knows its own files (issue 13's rules, issue 15's layout):
//! what opening does with a store directory that lost, damaged or mixed up
//! some of them — each refused with `OpenError::Damaged` naming what is
//! wrong, every file left as it was — and the upgrade from the redb store's
//! layout, crash images of it included. Also: restart from a snapshot plus
//! the log tail, the seq floor, the store id, quarantine, reclaiming.

#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_storage::fault_fs::{FaultFs, Rng};
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::redb_store::{RedbStore, StoreId};
use rltp_storage::{
    Departure, DepartureRecord, DepositId, Due, OpenError, OpenResult, ReadTxn, Store, StoreError,
    StoreResult, WriteTxn,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Every file of the log and the snapshots with the SHA-256 of its bytes
/// (not redb's file: opening redb writes its header).
fn files(dir: &Path) -> BTreeMap<String, DepositId> {
    let mut out = BTreeMap::new();
    for sub in ["log", "snap"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                let name = format!("{sub}/{}", entry.file_name().to_string_lossy());
                out.insert(
                    name,
                    DepositId::of(&std::fs::read(entry.path()).expect("read")),
                );
            }
        }
    }
    out
}

fn quiet() -> LogOptions {
    LogOptions {
        background: false,
        snapshot_at_close: false,
        ..small_log()
    }
}

/// A closed store: deposits across several segments, a binding, a
/// tombstone, a departure, due entries, and a snapshot taken midway.
fn populated(dir: &Path) -> StoreResult<StoreId> {
    let store = LogStore::open_with(dir, quiet())?;
    for seed in 0..3 {
        write(&store, |t| {
            let d = t.append_deposit(&rkid(1), &payload(seed, 3000), 10, 20)?;
            t.schedule(20, &Due::GiveUp(rkid(1), d.seq))
        })?;
    }
    store.snapshot_now()?;
    write(&store, |t| {
        t.put_binding(&rkid(1), &live(1, 0))?;
        t.put_tombstone(&rkid(2), &tomb(3, 4))?;
        t.append_deposit(&rkid(2), &payload(9, 2000), 0, 0)?;
        t.put_departure(
            &rkid(1),
            &DepositId([5; 32]),
            &DepartureRecord {
                departure: Departure::Concluded,
                forget_at: 99,
            },
        )?;
        t.schedule(99, &Due::Forget(rkid(1), DepositId([5; 32])))
    })?;
    Ok(store.store_id())
}

fn everything(r: &impl ReadTxn) -> StoreResult<Dump> {
    dump(r, &[rkid(1), rkid(2)], &[DepositId([5; 32])])
}

fn damaged(result: OpenResult<LogStore>) -> String {
    match result {
        Err(OpenError::Damaged(message)) => message,
        Err(other) => panic!("expected Damaged, got {other}"),
        Ok(_) => panic!("expected Damaged, the store opened"),
    }
}

#[test]
fn a_restart_loads_the_snapshot_and_replays_only_the_log_after_it() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    let before = everything(&LogStore::open_with(dir.path(), quiet())?.read()?)?;
    let store = LogStore::open_with(dir.path(), quiet())?;
    let opened = store.opened();
    assert!(opened.snapshot.is_some(), "{opened:?}");
    // The snapshot holds the first three transactions; the log after it,
    // one (and nothing else: the previous open replayed the same).
    assert_eq!(opened.records, 1, "{opened:?}");
    assert_eq!(everything(&store.read()?)?, before);
    assert_eq!(before.deposits[0].len(), 3);
    assert_eq!(before.due.len(), 4);
    let mut store = store;
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn a_missing_or_empty_index_is_refused_while_the_log_holds_records() -> StoreResult<()> {
    for empty in [false, true] {
        let dir = tempfile::tempdir()?;
        populated(dir.path())?;
        let index = dir.path().join("carrier.redb");
        if empty {
            std::fs::write(&index, b"")?;
        } else {
            std::fs::remove_file(&index)?;
        }
        let before = files(dir.path());
        let message = damaged(LogStore::open_with(dir.path(), quiet()));
        let state = if empty { "is empty" } else { "is missing" };
        assert!(
            message.contains(state) && message.contains("the operation log holds records"),
            "{message}"
        );
        assert_eq!(files(dir.path()), before, "nothing was touched");
    }
    Ok(())
}

#[test]
fn an_expected_store_is_never_replaced_by_a_fresh_one() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let id = populated(dir.path())?;
    let expecting = |id| LogOptions {
        expect_store_id: Some(id),
        ..quiet()
    };
    drop(LogStore::open_with(dir.path(), expecting(id))?);
    let other = StoreId([9; 16]);
    // A refused start changes nothing, byte for byte: redb's file included
    // (issue 27: the check comes before redb is opened for writing).
    let index = dir.path().join("carrier.redb");
    let (index_before, files_before) = (std::fs::read(&index)?, files(dir.path()));
    let message = damaged(LogStore::open_with(dir.path(), expecting(other)));
    assert!(message.contains(&id.to_string()) && message.contains(&other.to_string()));
    assert!(
        std::fs::read(&index)? == index_before,
        "the refused start rewrote carrier.redb"
    );
    assert_eq!(files(dir.path()), files_before);
    let gone = tempfile::tempdir()?;
    let message = damaged(LogStore::open_with(gone.path(), expecting(id)));
    assert!(message.contains("is missing"), "{message}");
    assert!(!gone.path().join("carrier.redb").exists());
    Ok(())
}

#[test]
fn a_missing_snapshot_whose_log_was_reclaimed_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    {
        let store = LogStore::open_with(dir.path(), quiet())?;
        for seed in 0..6 {
            write(&store, |t| {
                t.append_deposit(&rkid(1), &payload(seed, 3000), 0, 0)
                    .map(drop)
            })?;
        }
        // Every deposit gone, a snapshot: the segments before it go.
        write(&store, |t| {
            for seq in 1..=6 {
                t.remove_deposit(&rkid(1), seq)?;
            }
            Ok(())
        })?;
        write(&store, |t| t.put_binding(&rkid(3), &live(1, 0)))?;
        store.snapshot_now()?;
        // A second snapshot: the log before the first goes.
        write(&store, |t| t.put_binding(&rkid(4), &live(1, 0)))?;
        store.snapshot_now()?;
    }
    let snapshots: Vec<_> = files(dir.path())
        .into_keys()
        .filter(|n| n.starts_with("snap/"))
        .collect();
    assert_eq!(snapshots.len(), 2);
    for snapshot in &snapshots {
        std::fs::remove_file(dir.path().join(snapshot))?;
    }
    let before = files(dir.path());
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(
        message.contains("holds no whole snapshot") && message.contains("cannot be rebuilt"),
        "{message}"
    );
    assert_eq!(files(dir.path()), before);
    Ok(())
}

#[test]
fn a_torn_snapshot_is_passed_over_and_a_damaged_one_replaced_by_the_log() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    let before = everything(&LogStore::open_with(dir.path(), quiet())?.read()?)?;
    let (name, _) = files(dir.path())
        .into_iter()
        .find(|(n, _)| n.starts_with("snap/"))
        .expect("a snapshot");
    let path = dir.path().join(&name);
    let whole = std::fs::read(&path)?;
    // A crash while a later snapshot was written: a torn file at a later
    // position. It is passed over and removed.
    let torn = dir
        .path()
        .join("snap/0000000000000fff-0000000000000040.snap");
    std::fs::write(&torn, &whole[..whole.len() / 2])?;
    let store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!(everything(&store.read()?)?, before);
    drop(store);
    assert!(!torn.exists());
    // The only snapshot damaged: the log from the store's first segment,
    // kept while there is no snapshot before it, rebuilds everything.
    let mut bytes = whole;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, bytes)?;
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!(store.opened().snapshot, None);
    assert_eq!(everything(&store.read()?)?, before);
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

/// A closed store holding two snapshots, the log before the older one
/// reclaimed (its deposits removed), and log records after each: the
/// positions of both snapshots, older first, and the state.
fn two_snapshots(dir: &Path) -> StoreResult<([String; 2], Dump)> {
    let store = LogStore::open_with(dir, quiet())?;
    for seed in 0..6 {
        write(&store, |t| {
            let d = t.append_deposit(&rkid(1), &payload(seed, 3000), 10, 20)?;
            t.schedule(20, &Due::GiveUp(rkid(1), d.seq))
        })?;
    }
    write(&store, |t| {
        for seq in 1..=3 {
            t.remove_deposit(&rkid(1), seq)?;
            t.unschedule(20, &Due::GiveUp(rkid(1), seq))?;
        }
        Ok(())
    })?;
    store.snapshot_now()?;
    write(&store, |t| {
        t.put_binding(&rkid(1), &live(1, 0))?;
        t.append_deposit(&rkid(2), &payload(7, 2000), 0, 0)
            .map(drop)
    })?;
    store.snapshot_now()?;
    write(&store, |t| {
        t.put_tombstone(&rkid(2), &tomb(3, 4))?;
        t.append_deposit(&rkid(2), &payload(8, 2000), 0, 0)
            .map(drop)
    })?;
    let state = everything(&store.read()?)?;
    drop(store);
    let snapshots: Vec<String> = files(dir)
        .into_keys()
        .filter(|n| n.starts_with("snap/"))
        .collect();
    let snapshots: [String; 2] = snapshots
        .try_into()
        .unwrap_or_else(|s| panic!("two snapshots expected, found {s:?}"));
    Ok((snapshots, state))
}

/// `name`'s position, as its file name says.
fn position(name: &str) -> (u64, u64) {
    let stem = name.trim_start_matches("snap/").trim_end_matches(".snap");
    let (seg, off) = stem.split_once('-').expect("a snapshot name");
    (
        u64::from_str_radix(seg, 16).expect("hex"),
        u64::from_str_radix(off, 16).expect("hex"),
    )
}

fn flip_a_bit(path: &Path) -> StoreResult<()> {
    let mut bytes = std::fs::read(path)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(path, bytes)?;
    Ok(())
}

/// Issue 27 item 3: one snapshot is not a single point of failure. A bit
/// flipped in the latest snapshot (whose log before it was reclaimed past
/// the older one): the store opens from the snapshot before it and the
/// log, every deposit intact.
#[test]
fn a_bit_flip_in_the_latest_snapshot_is_recovered_from_the_previous_one() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let ([older, latest], before) = two_snapshots(dir.path())?;
    // The log before the older snapshot was reclaimed.
    let first_kept = files(dir.path())
        .into_keys()
        .filter_map(|n| n.strip_prefix("log/").map(str::to_owned))
        .min()
        .expect("a segment");
    assert!(
        first_kept > format!("{:016x}", 1),
        "nothing was reclaimed: {first_kept}"
    );
    flip_a_bit(&dir.path().join(&latest))?;
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!(store.opened().snapshot, Some(position(&older)));
    assert_eq!(everything(&store.read()?)?, before);
    assert_eq!(before.deposits[0].len(), 3);
    assert_eq!(before.deposits[1].len(), 2);
    assert!(store.integrity_check()?.is_clean());
    drop(store);
    // The damaged file went; the store goes on from the older one.
    assert!(!dir.path().join(&latest).exists());
    let store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!(everything(&store.read()?)?, before);
    Ok(())
}

#[test]
fn both_snapshots_damaged_with_the_log_before_them_reclaimed_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let ([older, latest], _) = two_snapshots(dir.path())?;
    flip_a_bit(&dir.path().join(&older))?;
    flip_a_bit(&dir.path().join(&latest))?;
    let before = files(dir.path());
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(
        message.contains("each one is damaged") && message.contains("cannot be rebuilt"),
        "{message}"
    );
    assert_eq!(files(dir.path()), before);
    Ok(())
}

#[test]
fn a_missing_segment_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    {
        let store = LogStore::open_with(dir.path(), quiet())?;
        for seed in 0..6 {
            write(&store, |t| {
                t.append_deposit(&rkid(1), &payload(seed, 3000), 0, 0)
                    .map(drop)
            })?;
        }
    }
    let segments: Vec<String> = files(dir.path())
        .into_keys()
        .filter(|n| n.starts_with("log/"))
        .collect();
    assert!(segments.len() >= 3, "{segments:?}");
    // One in the middle of the log.
    std::fs::remove_file(dir.path().join(&segments[1]))?;
    let before = files(dir.path());
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(message.contains("missing"), "{message}");
    assert_eq!(files(dir.path()), before);
    Ok(())
}

#[test]
fn an_index_older_than_its_log_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let index = dir.path().join("carrier.redb");
    let old_index = {
        let store = LogStore::open_with(dir.path(), quiet())?;
        write(&store, |t| t.put_binding(&rkid(1), &live(1, 0)))?;
        drop(store);
        std::fs::read(&index)?
    };
    {
        // Enough traffic and snapshots that the log the old index needs
        // is reclaimed.
        let store = LogStore::open_with(dir.path(), quiet())?;
        for seed in 0..8 {
            write(&store, |t| {
                let d = t.append_deposit(&rkid(2), &payload(seed, 3000), 0, 0)?;
                t.remove_deposit(&rkid(2), d.seq).map(drop)
            })?;
            store.snapshot_now()?;
        }
    }
    std::fs::write(&index, &old_index)?;
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(message.contains("is older than its log"), "{message}");
    Ok(())
}

#[test]
fn stray_or_foreign_files_are_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    std::fs::write(dir.path().join("log/notes.txt"), b"x")?;
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(message.contains("notes.txt"), "{message}");
    std::fs::remove_file(dir.path().join("log/notes.txt"))?;
    // Another store's segment after the end of the log.
    let other = tempfile::tempdir()?;
    populated(other.path())?;
    let theirs = files(other.path())
        .into_keys()
        .rfind(|n| n.starts_with("log/"))
        .expect("a segment");
    std::fs::copy(
        other.path().join(&theirs),
        dir.path().join("log/00000000000000ff.log"),
    )?;
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(message.contains("belongs to another store"), "{message}");
    Ok(())
}

#[test]
fn a_fresh_store_numbers_its_log_after_every_file_present() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("log"))?;
    // What an interrupted first open can leave: a segment holding no record.
    std::fs::write(dir.path().join("log/0000000000000007.log"), [0u8; 64])?;
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(1, 10), 0, 0).map(drop)
    })?;
    let names: Vec<String> = files(dir.path())
        .into_keys()
        .filter(|n| n.starts_with("log/"))
        .collect();
    assert_eq!(
        names,
        ["log/0000000000000008.log", "log/0000000000000009.log"]
    );
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn a_damaged_deposit_is_named_and_quarantined() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let d = {
        let store = LogStore::open_with(dir.path(), quiet())?;
        let d = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(1, 500), 0, 0)
        })?;
        // Its record is before the snapshot: no replay reads it again, only
        // a read of the deposit does (and checks it).
        store.snapshot_now()?;
        d
    };
    let bytes = payload(1, 500);
    for (name, _) in files(dir.path()) {
        let path = dir.path().join(&name);
        let mut held = std::fs::read(&path)?;
        if let Some(at) = held.windows(bytes.len()).position(|w| w == bytes) {
            held[at + 7] ^= 1;
            std::fs::write(&path, held)?;
        }
    }
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    let read = store.read()?.deposit_bytes(&rkid(1), &d);
    assert!(
        matches!(&read, Err(StoreError::Corrupt(m)) if m.contains("do not match their id")),
        "{read:?}"
    );
    let deferred = store.read()?.deposit_bytes_deferred(&rkid(1), &d).read();
    assert!(
        matches!(deferred, Err(StoreError::Corrupt(_))),
        "{deferred:?}"
    );
    assert_eq!(store.integrity_check()?.damaged.len(), 1);
    write(&store, |t| {
        t.quarantine(&rkid(1), &d, 77, "bytes do not match")
    })?;
    let store2 = store;
    assert_eq!(store2.read()?.quarantined()?, 1);
    drop(store2);
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!(store.read()?.quarantined()?, 1);
    let report = store.integrity_check()?;
    assert!(
        report.quarantined[0].contains("quarantined at 77 ms: bytes do not match"),
        "{report:?}"
    );
    Ok(())
}

#[test]
fn a_record_that_no_longer_reads_back_in_the_middle_of_the_log_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    {
        let store = LogStore::open_with(dir.path(), quiet())?;
        write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(1, 500), 0, 0)
        })?;
    }
    // The next open began another segment after it: the log went on.
    drop(LogStore::open_with(dir.path(), quiet())?);
    let bytes = payload(1, 500);
    for (name, _) in files(dir.path()) {
        let path = dir.path().join(&name);
        let mut held = std::fs::read(&path)?;
        if let Some(at) = held.windows(bytes.len()).position(|w| w == bytes) {
            held[at + 7] ^= 1;
            std::fs::write(&path, held)?;
        }
    }
    let before = files(dir.path());
    let message = damaged(LogStore::open_with(dir.path(), quiet()));
    assert!(
        message.contains("is damaged") && message.contains("no longer reads back"),
        "{message}"
    );
    assert_eq!(files(dir.path()), before);
    Ok(())
}

#[test]
fn a_raised_seq_floor_survives_reopen_and_numbers_every_queue_above_it() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let id = {
        let store = LogStore::open_with(dir.path(), quiet())?;
        let d = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(1, 10), 0, 0)
        })?;
        assert_eq!(d.seq, 1);
        store.raise_seq_floor(1_000)?;
        store.raise_seq_floor(10)?;
        store.store_id()
    };
    let store = LogStore::open_with(dir.path(), quiet())?;
    assert_eq!((store.seq_floor(), store.store_id()), (1_000, id));
    let a = write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(2, 10), 0, 0)
    })?;
    let b = write(&store, |t| {
        t.append_deposit(&rkid(2), &payload(3, 10), 0, 0)
    })?;
    let c = write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(4, 10), 0, 0)
    })?;
    assert_eq!((a.seq, b.seq, c.seq), (1_001, 1_001, 1_002));
    Ok(())
}

#[test]
fn segments_nothing_needs_are_reclaimed_after_a_snapshot() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let store = LogStore::open_with(dir.path(), quiet())?;
    for seed in 0..10 {
        write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(seed, 3000), 0, 0)
                .map(drop)
        })?;
    }
    let grown = files(dir.path()).len();
    write(&store, |t| {
        for seq in 1..=10 {
            t.remove_deposit(&rkid(1), seq)?;
        }
        Ok(())
    })?;
    // The log is kept from the snapshot before the latest.
    store.snapshot_now()?;
    write(&store, |t| t.put_binding(&rkid(3), &live(1, 0)))?;
    store.snapshot_now()?;
    let segments = files(dir.path())
        .into_keys()
        .filter(|n| n.starts_with("log/"))
        .count();
    assert!(segments <= 2, "{segments} segments left of {grown} files");
    let mut store = store;
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

// ---------------------------------------------------------------------------
// The upgrade from the redb store's layout
// ---------------------------------------------------------------------------

/// A redb store with every kind of state, closed.
fn redb_populated(dir: &Path, fs: Option<&FaultFs>) -> StoreResult<(Dump, StoreId)> {
    let mut options = small_segments();
    if let Some(fs) = fs {
        options.fs = Arc::new(fs.clone());
    }
    let store = RedbStore::open_with(dir, options)?;
    for seed in 0..5 {
        write(&store, |t| {
            let d = t.append_deposit(&rkid(1), &payload(seed, 1500), seed, 1000 + seed)?;
            t.schedule(d.give_up_at, &Due::GiveUp(rkid(1), d.seq))
        })?;
    }
    write(&store, |t| {
        t.remove_deposit(&rkid(1), 2)?;
        t.put_departure(
            &rkid(1),
            &DepositId::of(&payload(1, 1500)),
            &DepartureRecord {
                departure: Departure::Concluded,
                forget_at: 1001,
            },
        )?;
        t.schedule(
            1001,
            &Due::Forget(rkid(1), DepositId::of(&payload(1, 1500))),
        )?;
        t.put_binding(&rkid(1), &live(2, 5))?;
        t.put_binding(&rkid(2), &closing(1, 70))?;
        t.schedule(70, &Due::Deadline(rkid(2)))?;
        t.put_tombstone(&rkid(3), &tomb(4, 9))?;
        t.add_elastic_bytes(123)?;
        t.put_declaration(&rltp_storage::DeclarationRecord {
            revision: 3,
            document: b"{\"revision\":\"3\"}".to_vec(),
        })
    })?;
    store.raise_seq_floor(40)?;
    let d = dump(
        &store.read()?,
        &[rkid(1), rkid(2), rkid(3)],
        &[DepositId::of(&payload(1, 1500))],
    )?;
    Ok((d, store.store_id()))
}

#[test]
fn the_redb_layout_is_upgraded_and_an_older_binary_refuses_the_result() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let (before, id) = redb_populated(dir.path(), None)?;
    let mut store = LogStore::open_with(dir.path(), quiet())?;
    assert!(store.opened().upgraded);
    assert_eq!(store.store_id(), id);
    assert_eq!(store.seq_floor(), 40);
    let after = dump(
        &store.read()?,
        &[rkid(1), rkid(2), rkid(3)],
        &[DepositId::of(&payload(1, 1500))],
    )?;
    assert_eq!(after, before);
    assert!(store.integrity_check()?.is_clean());
    // The next seq is above the floor, as it would have been.
    let d = write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(7, 10), 0, 0)
    })?;
    assert_eq!(d.seq, 41);
    drop(store);
    // The redb store's files are gone; an older binary refuses format 3.
    assert_eq!(
        std::fs::read_dir(dir.path().join("segments"))
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
    match RedbStore::open(dir.path()) {
        Err(OpenError::Store(StoreError::Corrupt(message))) => {
            assert!(message.contains("format"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let mut again = LogStore::open_with(dir.path(), quiet())?;
    assert!(!again.opened().upgraded);
    assert!(again.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn an_upgrade_cut_by_a_power_loss_at_any_write_loses_nothing() -> StoreResult<()> {
    let dir = Path::new("/store");
    let base = FaultFs::new();
    let (before, _) = redb_populated(dir, Some(&base))?;
    let ids = [DepositId::of(&payload(1, 1500))];
    let mut rng = Rng::new(15);
    for cut in 1..120 {
        let disk = base.copy();
        disk.arm_crash(cut, Rng::new(rng.next_u64()), Box::new(|| 0));
        let options = LogOptions {
            fs: Arc::new(disk.clone()),
            ..quiet()
        };
        let finished = LogStore::open_with(dir, options).is_ok();
        let image = match disk.take_cut() {
            Some((image, _, _)) => image,
            None => {
                assert!(finished, "cut {cut}: the upgrade failed without a cut");
                disk.disarm();
                disk.crash(&mut rng).0
            }
        };
        let options = LogOptions {
            fs: Arc::new(image),
            ..quiet()
        };
        let mut store = LogStore::open_with(dir, options)?;
        let after = dump(&store.read()?, &[rkid(1), rkid(2), rkid(3)], &ids)?;
        assert_eq!(after, before, "cut at write {cut}");
        assert!(store.integrity_check()?.is_clean(), "cut at write {cut}");
        if finished && cut > 100 {
            break;
        }
    }
    Ok(())
}

/// A process killed after writing a record it never synced (so never
/// answered) leaves it in the page cache; the next open replays it and
/// names the log's end past it (the new segment's header, redb's
/// `applied`). A power cut after that open must not take the record from
/// under those names: the open makes what it replayed durable first, so
/// the store opens again and holds it.
#[test]
fn what_an_open_replayed_after_a_kill_survives_a_power_cut() -> StoreResult<()> {
    let dir = Path::new("/store");
    for seed in 0..24 {
        let disk = FaultFs::new();
        let options = |fs: &FaultFs| LogOptions {
            fs: Arc::new(fs.clone()),
            ..quiet()
        };
        {
            let store = LogStore::open_with(dir, options(&disk))?;
            write(&store, |t| t.put_binding(&rkid(1), &live(1, 0)))?;
            let mut txn = store.begin_write()?;
            txn.append_deposit(&rkid(1), &payload(seed, 2000), 10, 20)?;
            // Written, never synced: the process dies here.
            let _never_synced = store.commit_deferred(txn)?;
        }
        let replayed = LogStore::open_with(dir, options(&disk))?;
        assert_eq!(replayed.read()?.deposits(&rkid(1), None, 10)?.len(), 1);
        drop(replayed);
        let (image, _) = disk.crash(&mut Rng::new(seed));
        let mut store = LogStore::open_with(dir, options(&image))?;
        let held = store.read()?.deposits(&rkid(1), None, 10)?;
        assert_eq!(held.len(), 1, "seed {seed}");
        assert_eq!(held[0].id, DepositId::of(&payload(seed, 2000)));
        assert!(store.integrity_check()?.is_clean(), "seed {seed}");
    }
    Ok(())
}

/// Reclaiming deletes a sealed segment once no held deposit lives in it.
/// The removal that drained it may be visible but not yet durable (its
/// batch not yet synced): a power cut then would bring the deposit back
/// with its bytes deleted. Reclaiming makes what it counted durable first,
/// so after the cut the deposit is gone as it was told it was, and the
/// store opens.
#[test]
fn a_segment_is_reclaimed_only_once_the_removal_that_drained_it_is_durable() -> StoreResult<()> {
    let dir = Path::new("/store");
    for seed in 0..24 {
        let disk = FaultFs::new();
        let options = |fs: &FaultFs| LogOptions {
            fs: Arc::new(fs.clone()),
            ..quiet()
        };
        let store = LogStore::open_with(dir, options(&disk))?;
        let first = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(seed, 5000), 10, 20)
        })?;
        // More deposits seal the first segment; two snapshots past it (the
        // log is kept from the older one).
        for n in 1..4 {
            write(&store, |t| {
                t.append_deposit(&rkid(2), &payload(seed * 10 + n, 5000), 10, 20)
            })?;
        }
        store.snapshot_now()?;
        write(&store, |t| t.put_binding(&rkid(3), &live(1, 0)))?;
        store.snapshot_now()?;
        let mut txn = store.begin_write()?;
        txn.remove_deposit(&rkid(1), first.seq)?;
        // Visible, not yet synced.
        let _pending = store.commit_deferred(txn)?;
        store.reclaim_step();
        let (image, _) = disk.crash(&mut Rng::new(seed));
        drop(store);
        let mut store = LogStore::open_with(dir, options(&image))?;
        assert!(
            store.read()?.deposits(&rkid(1), None, 10)?.is_empty(),
            "seed {seed}: the drained deposit is back"
        );
        assert_eq!(store.read()?.deposits(&rkid(2), None, 10)?.len(), 3);
        assert!(store.integrity_check()?.is_clean(), "seed {seed}");
    }
    Ok(())
}

/// Reclaiming counts only committed transactions. The index is changed in
/// place by the open write transaction (with an undo log), so a removal
/// that drained a segment is seen there before it commits; a reclaim that
/// counted it would delete the segment under a transaction that may still
/// roll back (or be cut by a power loss before its record is written): the
/// deposit would then be held with its bytes gone (the power-loss
/// torture's "log segment(s) that held deposits live in are missing").
/// The reclaim runs on another thread while the removal is open; the
/// removal then rolls back, and the deposit must still be readable.
#[test]
fn reclaiming_never_counts_the_open_transaction() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(LogStore::open_with(dir.path(), quiet())?);
    let first = write(&*store, |t| {
        t.append_deposit(&rkid(1), &payload(7, 5000), 10, 20)
    })?;
    for n in 1..4 {
        write(&*store, |t| {
            t.append_deposit(&rkid(2), &payload(70 + n, 5000), 10, 20)
        })?;
    }
    store.snapshot_now()?;
    let before: Vec<String> = files(dir.path()).into_keys().collect();
    let mut txn = store.begin_write()?;
    txn.remove_deposit(&rkid(1), first.seq)?;
    let reclaimer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.reclaim_step())
    };
    // Give a reclaim that does not wait for the transaction every chance
    // to run to its end (one that waits is still blocked here).
    for _ in 0..200 {
        if reclaimer.is_finished() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(txn);
    reclaimer.join().map_err(|_| StoreError::Closed)?;
    let after = files(dir.path());
    let gone: Vec<&String> = before.iter().filter(|n| !after.contains_key(*n)).collect();
    assert!(
        gone.is_empty(),
        "deleted under the open transaction: {gone:?}"
    );
    let held = store.read()?.deposits(&rkid(1), None, 10)?;
    assert_eq!(held.len(), 1);
    assert_eq!(
        store.read()?.deposit_bytes(&rkid(1), &held[0])?,
        payload(7, 5000)
    );
    Ok(())
}

/// A backup copies the log up to the segment it ends in, never the spare
/// after it (64 MiB of zeros by default, or — had the writer rotated into
/// it while the copy was made — records past the copy's end).
#[test]
fn a_backup_never_copies_the_spare_segment() -> StoreResult<()> {
    use rltp_storage::fs::StoreFs as _;
    let dir = Path::new("/store");
    let disk = FaultFs::new();
    let store = LogStore::open_with(
        dir,
        LogOptions {
            fs: Arc::new(disk.clone()),
            ..quiet()
        },
    )?;
    write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(1, 5000), 10, 20)
    })?;
    store.housekeeping_step()?;
    let mut on_disk: Vec<String> = disk.list(&dir.join("log"))?;
    on_disk.sort();
    let spare = on_disk.last().cloned().unwrap_or_default();
    let source = store.backup_source()?;
    let copied: Vec<&str> = source
        .files()
        .iter()
        .map(|(name, _, _)| name.as_str())
        .collect();
    assert!(
        !copied.contains(&format!("log/{spare}").as_str()),
        "the spare {spare} is copied: {copied:?} (on disk {on_disk:?})"
    );
    assert!(copied.iter().any(|n| n.starts_with("log/")), "{copied:?}");
    Ok(())
}
