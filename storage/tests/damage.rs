//! A store knows its own files (issue 13): what opening does with a store
//! directory that lost or mixed up some of them. Every case is refused
//! with [`OpenError::Damaged`] naming what is wrong, and leaves every file
//! it found exactly as it was: a fresh store never truncates or reuses a
//! segment file.

#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_storage::redb_store::{RedbOptions, RedbStore, StoreId};
use rltp_storage::{
    DepositId, OpenError, OpenResult, ReadTxn, Store, StoreError, StoreResult, WriteTxn,
};
use std::collections::BTreeMap;
use std::path::Path;

fn write<R>(
    store: &RedbStore,
    f: impl FnOnce(&mut rltp_storage::redb_store::RedbWrite<'_>) -> StoreResult<R>,
) -> StoreResult<R> {
    let mut txn = store.begin_write()?;
    let out = f(&mut txn)?;
    store.commit(txn)?;
    Ok(out)
}

/// Every file of the store directory with the SHA-256 of its bytes.
fn files(dir: &Path) -> BTreeMap<String, DepositId> {
    let mut out = BTreeMap::new();
    for sub in ["", "segments"] {
        for entry in std::fs::read_dir(dir.join(sub)).expect("store dir") {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                let name = format!("{sub}/{}", entry.file_name().to_string_lossy());
                let bytes = std::fs::read(entry.path()).expect("read");
                out.insert(name, DepositId::of(&bytes));
            }
        }
    }
    out
}

fn segments(dir: &Path) -> BTreeMap<String, DepositId> {
    files(dir)
        .into_iter()
        .filter(|(name, _)| name.starts_with("segments/"))
        .collect()
}

/// A closed store holding three deposits and a binding, across several
/// segment files (tiny segments).
fn populated(dir: &Path) -> StoreResult<StoreId> {
    let store = RedbStore::open_with(dir, small_segments())?;
    for seed in 0..3 {
        write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(seed, 3000), 0, 0)
                .map(drop)
        })?;
    }
    write(&store, |t| t.put_binding(&rkid(1), &live(1, 0)))?;
    Ok(store.store_id())
}

fn damaged(result: OpenResult<RedbStore>) -> String {
    match result {
        Err(OpenError::Damaged(message)) => message,
        Err(other) => panic!("expected Damaged, got {other}"),
        Ok(_) => panic!("expected Damaged, the store opened"),
    }
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
        let before = segments(dir.path());
        assert!(before.len() >= 2, "{:?}", before.keys());
        let message = damaged(RedbStore::open_with(dir.path(), small_segments()));
        let state = if empty { "is empty" } else { "is missing" };
        assert!(
            message.contains(state) && message.contains("the operation log holds records"),
            "{message}"
        );
        for name in before.keys() {
            let id = name
                .trim_start_matches("segments/")
                .trim_end_matches(".seg");
            assert!(message.contains(id), "{message} names {id}");
        }
        // Nothing was truncated, reused or created.
        assert_eq!(segments(dir.path()), before);
        assert_eq!(std::fs::metadata(&index).is_ok(), empty);
    }
    Ok(())
}

#[test]
fn an_expected_store_is_never_replaced_by_a_fresh_one() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let id = populated(dir.path())?;
    let expecting = |id| RedbOptions {
        expect_store_id: Some(id),
        ..small_segments()
    };
    // Its own id opens it.
    drop(RedbStore::open_with(dir.path(), expecting(id))?);
    // Another store's id is refused.
    let other = StoreId([9; 16]);
    let message = damaged(RedbStore::open_with(dir.path(), expecting(other)));
    assert!(message.contains(&id.to_string()) && message.contains(&other.to_string()));
    // The whole store directory gone: refused too, nothing is made.
    let gone = tempfile::tempdir()?;
    let message = damaged(RedbStore::open_with(gone.path(), expecting(id)));
    assert!(
        message.contains("is missing") && message.contains(&id.to_string()),
        "{message}"
    );
    assert!(!gone.path().join("carrier.redb").exists());
    Ok(())
}

#[test]
fn an_index_older_than_its_log_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    let old_index = std::fs::read(dir.path().join("carrier.redb"))?;
    {
        let store = RedbStore::open_with(dir.path(), small_segments())?;
        for seed in 10..14 {
            write(&store, |t| {
                t.append_deposit(&rkid(2), &payload(seed, 3000), 0, 0)
                    .map(drop)
            })?;
        }
    }
    std::fs::write(dir.path().join("carrier.redb"), &old_index)?;
    let before = segments(dir.path());
    let message = damaged(RedbStore::open_with(dir.path(), small_segments()));
    assert!(
        message.contains("not known to the index") && message.contains("older than its log"),
        "{message}"
    );
    assert_eq!(segments(dir.path()), before);
    Ok(())
}

#[test]
fn a_recorded_segment_that_is_gone_is_refused() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    let first = segments(dir.path()).into_keys().next().expect("a segment");
    std::fs::remove_file(dir.path().join(&first))?;
    let message = damaged(RedbStore::open_with(dir.path(), small_segments()));
    let id = first
        .trim_start_matches("segments/")
        .trim_end_matches(".seg");
    assert!(
        message.contains("are missing") && message.contains(id),
        "{message}"
    );
    Ok(())
}

#[test]
fn a_fresh_store_numbers_its_log_after_every_file_present() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("segments"))?;
    // The header-only orphan an interrupted first open can leave.
    let mut header = b"RLTPSEG1".to_vec();
    header.extend_from_slice(&7u64.to_be_bytes());
    std::fs::write(dir.path().join("segments/0000000000000007.seg"), &header)?;
    let mut store = RedbStore::open_with(dir.path(), small_segments())?;
    write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(1, 10), 0, 0).map(drop)
    })?;
    let names: Vec<String> = segments(dir.path()).into_keys().collect();
    assert_eq!(names, ["segments/0000000000000008.seg"]);
    assert!(store.integrity_check()?.is_clean());
    Ok(())
}

#[test]
fn a_damaged_index_page_is_a_clear_error_not_a_panic() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    populated(dir.path())?;
    let index = dir.path().join("carrier.redb");
    let mut bytes = std::fs::read(&index)?;
    // A B-tree page of the first table: redb panics with "entered
    // unreachable code" on it unless the panic is contained.
    bytes[2 * 4096] = 0xff;
    std::fs::write(&index, &bytes)?;
    let message = damaged(RedbStore::open_with(dir.path(), small_segments()));
    assert!(
        message.contains(&dir.path().display().to_string())
            && message.contains("damaged data")
            && message.contains("index file is damaged"),
        "{message}"
    );
    Ok(())
}

#[test]
fn the_store_id_survives_reopen_and_is_kept_in_its_meta() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let id = populated(dir.path())?;
    let store = RedbStore::open_with(dir.path(), small_segments())?;
    assert_eq!(store.store_id(), id);
    assert_eq!(StoreId::parse(&id.to_string()), Some(id));
    assert_eq!(
        store.read()?.binding(&rkid(1))?.map(|b| b.generation),
        Some(1)
    );
    Ok(())
}

#[test]
fn a_cut_short_segment_is_damage_named_by_the_integrity_check() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    let (first, second) = {
        let store = RedbStore::open(dir.path())?;
        let a = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(1, 500), 0, 0)
        })?;
        let b = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(2, 500), 0, 0)
        })?;
        (a, b)
    };
    // The last deposit's bytes end the file: cut them short.
    let (name, _) = segments(dir.path()).into_iter().next().expect("a segment");
    let path = dir.path().join(&name);
    let len = std::fs::metadata(&path)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len(len - 100)?;
    let mut store = RedbStore::open(dir.path())?;
    let r = store.read()?;
    assert_eq!(r.deposit_bytes(&rkid(1), &first)?, payload(1, 500));
    let cut = r.deposit_bytes(&rkid(1), &second);
    assert!(
        matches!(&cut, Err(StoreError::Corrupt(m)) if m.contains("cut short")),
        "{cut:?}"
    );
    drop(r);
    let report = store.integrity_check()?;
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    // Quarantined: named by the check, and counted.
    write(&store, |t| t.quarantine(&rkid(1), &second, 77, "cut short"))?;
    let report = store.integrity_check()?;
    assert_eq!(store.read()?.quarantined()?, 1);
    assert_eq!(report.quarantined.len(), 1);
    assert!(
        report.quarantined[0].contains("quarantined at 77 ms: cut short"),
        "{report:?}"
    );
    Ok(())
}

#[test]
fn a_raised_seq_floor_survives_reopen_and_numbers_every_queue_above_it() -> StoreResult<()> {
    let dir = tempfile::tempdir()?;
    {
        let store = RedbStore::open(dir.path())?;
        let d = write(&store, |t| {
            t.append_deposit(&rkid(1), &payload(1, 10), 0, 0)
        })?;
        assert_eq!(d.seq, 1);
        store.raise_seq_floor(1_000)?;
        store.raise_seq_floor(10)?; // never lowered
    }
    let store = RedbStore::open(dir.path())?;
    assert_eq!(store.seq_floor(), 1_000);
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
