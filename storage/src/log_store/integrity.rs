//! The log store's integrity check (`LogStore::integrity_check`).
//!
//! 1. The in-memory index against itself (`Index::check`).
//! 2. The index against one rebuilt from the files alone — the snapshot a
//!    restart would load and the log after it — which must be equal: what
//!    is in memory is exactly what a crash now would recover.
//! 3. redb's own check; the bindings against the index's and the held
//!    count; the tombstones against their eviction order and count.
//! 4. Every file: each segment a deposit lives in exists, nothing unknown
//!    is in `log/` or `snap/`; every deposit's bytes against its SHA-256
//!    (a mismatch is named in `damaged`, not an error).

use super::index::Index;
use super::recovery;
use super::replay::Apply;
use super::{Inner, record};
use crate::failure::{corrupt, db_error};
use crate::schema::{self as rs, BINDINGS, EVICTION, TOMBSTONES, Tables as _};
use crate::store_id::IntegrityReport;
use crate::{StoreError, StoreResult};
use redb::ReadableDatabase;
use rltp_proofs::multikey::Rkid;
use std::collections::HashSet;
use std::ops::Bound;

/// Counts of a log store's integrity check beyond the common report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogIntegrity {
    /// Log bytes the rebuild replayed after its snapshot.
    pub replayed_bytes: u64,
}

pub(super) fn check(inner: &Inner) -> StoreResult<IntegrityReport> {
    // Nothing open, nothing in flight: the background thread waits too.
    let state = inner.gate();
    let log_end = (state.active.id, state.active.end());
    drop(state);
    sync_all(inner)?;
    let _state = inner.gate();
    let ix = inner.index_read();
    ix.check()?;
    let rebuilt = rebuild(
        inner,
        log_end,
        (ix.occupancy.bindings, ix.occupancy.tombstones),
    )?;
    let (live, again) = (ix.canonical(), rebuilt.canonical());
    if live != again {
        return Err(corrupt(format!(
            "the index differs from the one its snapshot and log rebuild: {}",
            first_difference(&live, &again)
        )));
    }
    let mut report = IntegrityReport::default();
    check_redb(inner, &ix, &mut report)?;
    check_files(inner, &ix, &mut report)?;
    Ok(report)
}

/// redb's own check, then bindings, tombstones and their eviction entries
/// against the index's flags and counts.
fn check_redb(inner: &Inner, ix: &Index, report: &mut IntegrityReport) -> StoreResult<()> {
    // redb.
    {
        let mut slot = inner
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let db = slot
            .as_mut()
            .and_then(std::sync::Arc::get_mut)
            .ok_or_else(|| StoreError::Unavailable("the database is in use or reopening"))?;
        if !db.check_integrity().map_err(db_error)? {
            return Err(corrupt("redb integrity check had to repair the file"));
        }
    }
    let db = inner.db()?;
    let txn = db.begin_read().map_err(db_error)?;
    let mut bound = HashSet::new();
    txn.scan(BINDINGS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        rs::decode_binding(v)?;
        bound.insert(rs::arr32_at(k, 0)?);
        Ok(true)
    })?;
    report.bindings = bound.len() as u64;
    for rkid in &bound {
        if !ix.bound(&Rkid::from_bytes(*rkid)) {
            return Err(corrupt(format!(
                "binding {} is not in the index",
                Rkid::from_bytes(*rkid)
            )));
        }
    }
    let flagged = (0..ix.queues.high())
        .filter_map(|q| ix.queues.live_at(q))
        .filter(|q| q.bound())
        .count() as u64;
    if flagged != report.bindings {
        return Err(corrupt(format!(
            "{flagged} bindings in the index, {} in redb",
            report.bindings
        )));
    }
    let mut tombstones = 0u64;
    txn.scan(TOMBSTONES, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        let rkid = rs::arr32_at(k, 0)?;
        let t = rs::decode_tombstone(v)?;
        tombstones += 1;
        if bound.contains(&rkid) {
            report.binding_and_tombstone += 1;
        }
        let key = rs::eviction_key(t.released_at, &Rkid::from_bytes(rkid));
        if txn.get_with(EVICTION, &key, |_| Ok(()))?.is_none() {
            return Err(corrupt("tombstone without eviction entry"));
        }
        Ok(true)
    })?;
    report.tombstones = tombstones;
    let mut evictions = 0u64;
    txn.scan(EVICTION, (Bound::Unbounded, Bound::Unbounded), |_, _| {
        evictions += 1;
        Ok(true)
    })?;
    if evictions != tombstones {
        return Err(corrupt(format!(
            "{evictions} eviction entries for {tombstones} tombstones"
        )));
    }
    let o = ix.occupancy;
    if (o.bindings, o.tombstones) != (report.bindings, report.tombstones) {
        return Err(corrupt(format!(
            "occupancy counts {} bindings and {} tombstones, redb holds {} and {}",
            o.bindings, o.tombstones, report.bindings, report.tombstones
        )));
    }
    Ok(())
}

/// Every file in `log/` and `snap/` a segment or a snapshot; every held
/// deposit's segment present and its bytes read back.
fn check_files(inner: &Inner, ix: &Index, report: &mut IntegrityReport) -> StoreResult<()> {
    // Files and bytes.
    let fs = &*inner.options.fs;
    let mut present = HashSet::new();
    for name in fs.list(&inner.log_dir)? {
        let id = record::parse_segment_name(&name)
            .ok_or_else(|| corrupt(format!("stray file {name:?} in log")))?;
        present.insert(id);
    }
    for name in fs.list(&inner.snap_dir)? {
        if record::parse_snapshot_name(&name).is_none() {
            return Err(corrupt(format!("stray file {name:?} in snap")));
        }
    }
    report.segments = present.len() as u64;
    for qid in 0..ix.queues.high() {
        let Some(q) = ix.queues.live_at(qid) else {
            continue;
        };
        for slot in ix.list(qid, None, usize::MAX) {
            let image = ix.deps.get(slot).image();
            if !present.contains(&u64::from(image.seg)) {
                return Err(corrupt(format!(
                    "deposit {} of {} lives in segment {:016x}, which is missing",
                    image.deposit.seq,
                    q.rkid(),
                    image.seg
                )));
            }
            match inner.bytes(&image, None) {
                Ok(_) => {}
                Err(StoreError::Corrupt(what)) => report.damaged.push(what),
                Err(other) => return Err(other),
            }
            report.deposits += 1;
            report.bytes += u64::from(image.deposit.len);
        }
    }
    for ((rkid, seq), value) in &ix.quarantine {
        report.quarantined.push(rs::describe_quarantine(
            &rs::cat(&[rkid.as_bytes(), &seq.to_be_bytes()]),
            value,
        )?);
    }
    Ok(())
}

/// Makes everything committed durable (the syncer may lag a few batches).
fn sync_all(inner: &Inner) -> StoreResult<()> {
    let mut state = inner.gate();
    inner.sync_active(&mut state)
}

/// The index a restart would rebuild now: the snapshot recovery would pick
/// and the log after it, up to `log_end`.
fn rebuild(inner: &Inner, log_end: (u64, u64), held: (u64, u64)) -> StoreResult<Index> {
    let fs = &*inner.options.fs;
    let (base, mut index) = recovery::pick_snapshot(inner)?;
    let segments = recovery::scan_log(fs, &inner.log_dir)?;
    let mut counts = (0, 0);
    let mut apply = Apply {
        index: &mut index,
        txn: None,
        memory_from: base,
        redb_from: (u64::MAX, u64::MAX),
        counts: &mut counts,
        ops: 0,
    };
    let walk = recovery::walk_chain(
        fs,
        &inner.log_dir,
        &segments,
        inner.store_id,
        base,
        &mut apply,
    )?;
    if walk.end != log_end {
        return Err(corrupt(format!(
            "the log's chain ends at segment {:016x} offset {}, the store writes at segment {:016x} offset {}",
            walk.end.0, walk.end.1, log_end.0, log_end.1
        )));
    }
    (index.occupancy.bindings, index.occupancy.tombstones) = held;
    Ok(index)
}

fn first_difference(a: &super::index::Canonical, b: &super::index::Canonical) -> String {
    if a.occupancy != b.occupancy {
        return format!("occupancy {:?} / {:?}", a.occupancy, b.occupancy);
    }
    if a.queues.len() != b.queues.len() {
        return format!("{} queues / {}", a.queues.len(), b.queues.len());
    }
    for (x, y) in a.queues.iter().zip(&b.queues) {
        if x != y {
            return format!("queue {x:?} / {y:?}");
        }
    }
    if a.departures != b.departures {
        return format!("departures {:?} / {:?}", a.departures, b.departures);
    }
    if a.due != b.due {
        return format!("due {:?} / {:?}", a.due, b.due);
    }
    "quarantine records".into()
}
