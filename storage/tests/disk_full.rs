//! A full disk is a transient condition, never damage (issue 27, item 1):
//! the log store on a [`FaultFs`] whose room runs out (writes cut short,
//! then `ENOSPC`), given room, filled again, stopped and started — with
//! and without room — opens holding every acknowledged deposit.

#![allow(clippy::panic)]

mod common;

use common::*;
use rltp_storage::fault_fs::FaultFs;
use rltp_storage::fs::{Open, StoreFs};
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
        return Err(format!(
            "nothing was admitted once room returned: {second:?}"
        ));
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
        Err(OpenError::Store(StoreError::Io(e))) if e.kind() == std::io::ErrorKind::StorageFull => {
        }
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
    write(&store, |t| {
        t.append_deposit(&rkid(1), &payload(0, size), 1, 1 << 40)
    })
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
    assert!(
        failed.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A segment header (`record.rs` in the log store: magic, id, store id,
/// the previous segment and the offset its log ended at, CRC-32).
fn segment_header(id: u64, store_id: [u8; 16], prev: (u64, u64)) -> Vec<u8> {
    let mut h = Vec::with_capacity(64);
    h.extend_from_slice(b"RLTPLOG1");
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&store_id);
    h.extend_from_slice(&prev.0.to_be_bytes());
    h.extend_from_slice(&prev.1.to_be_bytes());
    h.extend_from_slice(&[0; 12]);
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_be_bytes());
    h
}

/// A void record's header at `at` of segment `id` covering `body` bytes.
fn void_header(id: u64, at: u64, body: u32) -> Vec<u8> {
    let mut h = vec![0xFF, b'R', b'L', b'G', 2, 0, 0, 0];
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&at.to_be_bytes());
    h.extend_from_slice(&body.to_be_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_be_bytes());
    h
}

/// What a build before issue 27 left after a full disk: its log's last
/// segment ends in a void record claiming bytes that never reached the
/// file, and the next segment's header names the end that void claims.
/// Such a data dir opens with every deposit (it was refused as damaged).
#[test]
fn a_void_an_older_build_left_past_the_end_of_the_log_is_recovered() {
    let fs = FaultFs::new();
    let dir = Path::new("/data/store");
    let quiet = LogOptions {
        snapshot_at_close: false,
        ..options(&fs)
    };
    let (store_id, acked) = {
        let store = LogStore::open_with(dir, quiet.clone()).unwrap_or_else(|e| panic!("open: {e}"));
        let mut acked = BTreeSet::new();
        for seed in 1..=3 {
            let bytes = payload(seed, 3_000);
            write(&store, |t| t.append_deposit(&rkid(1), &bytes, 1, 1 << 40))
                .unwrap_or_else(|e| panic!("deposit: {e}"));
            acked.insert(DepositId::of(&bytes));
        }
        (store.store_id(), acked)
    };
    let log = dir.join("log");
    let last = fs
        .list(&log)
        .unwrap_or_else(|e| panic!("list: {e}"))
        .iter()
        .filter_map(|n| u64::from_str_radix(n.strip_suffix(".log")?, 16).ok())
        .max()
        .unwrap_or_else(|| panic!("no segment"));
    let path = log.join(format!("{last:016x}.log"));
    let mut content = fs
        .read(&path)
        .unwrap_or_else(|| panic!("no {}", path.display()));
    let end = content.len() as u64;
    content.extend_from_slice(&void_header(last, end, 3_100));
    fs.overwrite(&path, content)
        .unwrap_or_else(|e| panic!("write: {e}"));
    let claimed = end + 32 + 3_100;
    let next = log.join(format!("{:016x}.log", last + 1));
    fs.open(&next, Open::CreateNew)
        .and_then(|f| f.write_all_at(&segment_header(last + 1, store_id.0, (last, claimed)), 0))
        .unwrap_or_else(|e| panic!("next segment: {e}"));
    let mut store = LogStore::open_with(dir, quiet.clone())
        .unwrap_or_else(|e| panic!("the older build's data dir was refused: {e}"));
    assert_eq!(held(&store), acked);
    let report = store
        .integrity_check()
        .unwrap_or_else(|e| panic!("integrity check: {e}"));
    assert!(report.is_clean(), "{report:?}");
    let bytes = payload(9, 3_000);
    write(&store, |t| t.append_deposit(&rkid(1), &bytes, 1, 1 << 40))
        .unwrap_or_else(|e| panic!("a deposit after the restart: {e}"));
    drop(store);
    let store = LogStore::open_with(dir, quiet).unwrap_or_else(|e| panic!("reopen: {e}"));
    let mut all = acked;
    all.insert(DepositId::of(&bytes));
    assert_eq!(held(&store), all);
}
