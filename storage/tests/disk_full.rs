//! A full disk is a transient condition, never damage (issue 27, item 1):
//! the log store on a [`FaultFs`] whose room runs out (writes cut short,
//! then `ENOSPC`), given room, filled again, stopped and started — with
//! and without room — opens holding every acknowledged deposit.

#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_storage::fault_fs::FaultFs;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::{DepositId, OpenError, ReadTxn, Store, StoreError, WriteTxn};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// Small segments and snapshot intervals, so that rotations, snapshots and
/// spare segments all meet the full disk; the background work is driven by
/// the test ([`LogStore::housekeeping_step`]) so that every run is the same.
fn options(fs: &FaultFs) -> LogOptions {
    LogOptions {
        fs: Arc::new(fs.clone()),
        background: false,
        segment_bytes: 16 << 10,
        snapshot_log_bytes: 24 << 10,
        redb_checkpoint_ops: 4,
        ..LogOptions::default()
    }
}

/// Deposits of `size` bytes until `failures` submissions in a row
/// failed: every error met (the ids acknowledged go to `acked`).
fn fill(
    store: &LogStore,
    (seed, size): (&mut u64, usize),
    acked: &mut BTreeSet<DepositId>,
    failures: usize,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut in_a_row = 0;
    while in_a_row < failures {
        *seed += 1;
        let bytes = payload(*seed, size);
        let result = write(store, |t| t.append_deposit(&rkid(1), &bytes, 1, 1 << 40));
        match result {
            Ok(_) => {
                acked.insert(DepositId::of(&bytes));
                in_a_row = 0;
            }
            Err(error) => {
                errors.push(error.to_string());
                in_a_row += 1;
            }
        }
        // The background thread's work, between two transactions.
        if let Err(error) = store.housekeeping_step() {
            errors.push(format!("housekeeping: {error}"));
        }
        assert!(*seed < 10_000, "the disk never filled");
    }
    errors
}

fn held(store: &LogStore) -> BTreeSet<DepositId> {
    let read = store.read().unwrap_or_else(|e| panic!("read: {e}"));
    read.deposits(&rkid(1), None, usize::MAX)
        .unwrap_or_else(|e| panic!("deposits: {e}"))
        .into_iter()
        .map(|d| d.id)
        .collect()
}

/// One run of the sequence: `room` bytes free, filled; `more` bytes
/// freed, filled again; stopped; started without room, then with room.
/// Deposits of `size` bytes. `Err` says what went wrong.
fn cycle(room: u64, more: u64, size: usize) -> Result<(), String> {
    let fs = FaultFs::new();
    let dir = Path::new("/data/store");
    let store = LogStore::open_with(dir, options(&fs)).map_err(|e| format!("open: {e}"))?;
    let mut acked = BTreeSet::new();
    let mut seed = 0;
    fs.set_room(Some(room));
    let first = fill(&store, (&mut seed, size), &mut acked, 4);
    if !first.iter().any(|e| e.contains("no storage space")) {
        return Err(format!("the disk never refused a write: {first:?}"));
    }
    let after_first = acked.len();
    fs.set_room(Some(more));
    let second = fill(&store, (&mut seed, size), &mut acked, 4);
    if acked.len() == after_first {
        return Err(format!("nothing was admitted once room returned: {second:?}"));
    }
    if held(&store) != acked {
        return Err("held while running differs from acknowledged".into());
    }
    drop(store);
    // Started without room: never refused as damaged (it may lack the
    // room to begin its next segment: a transient i/o error).
    fs.set_room(Some(0));
    match LogStore::open_with(dir, options(&fs)) {
        Ok(store) if held(&store) == acked => {}
        Ok(_) => return Err("opened without room, holding other deposits".into()),
        Err(OpenError::Store(StoreError::Io(e)))
            if e.kind() == std::io::ErrorKind::StorageFull => {}
        Err(other) => return Err(format!("a start without room was refused: {other}")),
    }
    // With room: it opens, holding exactly what was acknowledged.
    fs.set_room(None);
    let mut store = LogStore::open_with(dir, options(&fs))
        .map_err(|e| format!("a start with room was refused: {e}"))?;
    if held(&store) != acked {
        return Err("opened with room, holding other deposits".into());
    }
    let report = store
        .integrity_check()
        .map_err(|e| format!("integrity check: {e}"))?;
    if !report.is_clean() || report.deposits != acked.len() as u64 {
        return Err(format!("integrity: {report:?}"));
    }
    // And it admits again.
    write(&store, |t| t.append_deposit(&rkid(1), &payload(0, size), 1, 1 << 40))
        .map_err(|e| format!("a deposit after the restart: {e}"))?;
    Ok(())
}

#[test]
fn a_store_stopped_on_a_full_disk_starts_again_with_every_acknowledged_deposit() {
    let mut failed = Vec::new();
    let mut runs = 0;
    for size in [700, 3_000, 9_000] {
        for room in [20_000u64, 45_000, 70_000] {
            for more in [30_000u64, 64_000, 200_000] {
                runs += 1;
                if let Err(what) = cycle(room, more, size) {
                    failed.push(format!("size {size}, room {room}, then {more}: {what}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{} of {runs} runs failed:\n{}", failed.len(), failed.join("\n"));
}
