//! The log store's background work: the next segment zero-filled ahead of
//! use, snapshots when the log has grown, segments reclaimed once nothing
//! needs them; and compaction, one bounded step at a time
//! ([`crate::Store::maintenance_step`]).
//!
//! **Reclaiming.** A segment file is deleted once (1) no held deposit
//! lives in it as of the last committed transaction (never counting the
//! open one), (2) it lies before the latest durable snapshot's position
//! and before redb's durable `applied` (no replay reads it), (3) it is not
//! the active one, and (4) no read snapshot older than the moment (1) was
//! seen is alive (it might still read a removed deposit's bytes there).
//! The directory is synced after the deletions. A deletion cut short by a
//! crash is finished at the next open (`recovery.rs`, step 5).

use super::{Inner, LogStore, record, snapshot};
use crate::failure::{corrupt, lock};
use crate::fs::{Open, StoreFile};
use crate::{Store as _, StoreError, StoreResult};
use rltp_proofs::multikey::Rkid;
use std::sync::Arc;
use std::time::Duration;

/// The background thread: waits for work (or 200 ms), does it.
pub(super) fn run(inner: &Inner) {
    loop {
        {
            let house = lock(&inner.house);
            let (house, _) = inner
                .house_wake
                .wait_timeout_while(house, Duration::from_millis(200), |h| {
                    !h.stop && !h.snapshot && !h.spare
                })
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if house.stop {
                return;
            }
        }
        if let Err(error) = step(inner, false) {
            // A full disk fails every pass for as long as it lasts.
            if let Some(suppressed) = FAILED.admit(std::time::Instant::now()) {
                tracing::warn!(%error, suppressed, "store housekeeping failed; retrying");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The housekeeper's failures: one line a minute (`suppressed`: how many
/// more failed since the last one).
static FAILED: crate::LogThrottle = crate::LogThrottle::new(Duration::from_secs(60));

/// One pass: the spare segment, a snapshot if one is asked for (or, with
/// `snapshot_if_logged`, whenever anything was logged), reclaiming.
pub(super) fn step(inner: &Inner, snapshot_if_logged: bool) -> StoreResult<()> {
    let (spare, wanted) = {
        let mut house = lock(&inner.house);
        let spare = std::mem::take(&mut house.spare);
        (spare, std::mem::take(&mut house.snapshot))
    };
    if spare && inner.options.preallocate {
        prepare_spare(inner)?;
    }
    if wanted || snapshot_if_logged {
        snapshot::take(inner)?;
    }
    reclaim(inner);
    Ok(())
}

/// Creates segment `id` (no header yet: the rotation writes it), durably
/// named; zero-filled to the segment size when `fill`.
pub(super) fn create_segment(
    inner: &Inner,
    id: u64,
    fill: bool,
) -> StoreResult<Arc<dyn StoreFile>> {
    let fs = &*inner.options.fs;
    let file = fs.open(
        &inner.log_dir.join(record::segment_name(id)),
        Open::CreateNew,
    )?;
    if fill {
        let zeros = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < inner.options.segment_bytes {
            let n = (inner.options.segment_bytes - at).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], at)?;
            super::kill_point("spare-fill");
            at += n as u64;
        }
        file.sync_data()?;
    }
    fs.sync_dir(&inner.log_dir)?;
    Ok(file)
}

/// Zero-fills the next segment, unless one is ready — or the file system
/// has less than two segments' worth free ([`SPARE_ROOM_SEGMENTS`]): a
/// spare filled into the last free space would take the room the active
/// segment's appends need, and turn a nearly full disk into refused
/// admissions while it is filled. Without a spare, the writer begins the
/// next segment itself (its `fdatasync`s then also write file-size
/// metadata: slower, never less durable).
fn prepare_spare(inner: &Inner) -> StoreResult<()> {
    let room = inner
        .options
        .segment_bytes
        .saturating_mul(SPARE_ROOM_SEGMENTS);
    if let Some(free) = inner.options.fs.available_bytes(&inner.log_dir)?
        && free < room
    {
        tracing::warn!(
            free_bytes = free,
            segment_bytes = inner.options.segment_bytes,
            "the store's file system is nearly full: the next log segment is not preallocated"
        );
        return Ok(());
    }
    let id = {
        let mut state = inner.gate();
        if state.spare.is_some() {
            return Ok(());
        }
        let id = state.next_segment;
        state.next_segment += 1;
        id
    };
    let file = match create_segment(inner, id, true) {
        Ok(file) => file,
        Err(error) => {
            // A spare that could not be filled (a full disk) is removed at
            // once: it would hold the very space the active segment's
            // appends need. The next rotation asks for one again, and
            // without one the writer begins the next segment itself.
            let fs = &*inner.options.fs;
            let _ = fs.remove_file(&inner.log_dir.join(record::segment_name(id)));
            let _ = fs.sync_dir(&inner.log_dir);
            return Err(error);
        }
    };
    let mut state = inner.gate();
    if state.spare.is_none() && id > state.active.id {
        state.spare = Some((id, file));
        return Ok(());
    }
    // The writer could not wait and began a later segment itself: the log
    // only ever goes on in higher ids, so this one is of no use.
    drop(state);
    let fs = &*inner.options.fs;
    fs.remove_file(&inner.log_dir.join(record::segment_name(id)))?;
    fs.sync_dir(&inner.log_dir)?;
    Ok(())
}

/// A spare segment is filled only with this many segments' worth free.
const SPARE_ROOM_SEGMENTS: u64 = 2;

/// Deletes the segments nothing needs any more (module docs).
pub(super) fn reclaim(inner: &Inner) {
    let (base, applied) = *lock(&inner.bounds);
    let limit = base.0.min(applied.0);
    let names = match inner.options.fs.list(&inner.log_dir) {
        Ok(names) => names,
        Err(error) => {
            tracing::warn!(%error, "listing the log failed");
            return;
        }
    };
    let (version, drained): (u64, Vec<u64>) = {
        // The writer gate, so that no write transaction is open: the index
        // is changed in place by the open one (with an undo log), and a
        // removal or a compaction move it has not committed must not count
        // as draining a segment (it may still roll back, or be cut before
        // its record is written). Transactions begun after this read only
        // remove from segments before `limit` (appends and moves go to the
        // active one), so what is drained here stays drained.
        let _no_open_transaction = inner.gate();
        let ix = inner.index_read();
        let drained = names
            .iter()
            .filter_map(|n| record::parse_segment_name(n))
            .filter(|&id| id < limit)
            .filter(|&id| {
                u32::try_from(id).is_ok_and(|seg| ix.segs.get(&seg).is_none_or(|s| s.live == 0))
            })
            .collect();
        (ix.committed, drained)
    };
    if drained.is_empty() || inner.oldest_reader().is_some_and(|v| v < version) {
        return;
    }
    // The live counts read above are those of committed (visible)
    // transactions, which may not be durable yet: the removal that drained a segment must be,
    // before the segment goes — else a power cut would bring the deposit
    // back (its removal lost) with its bytes deleted. One `fdatasync`
    // here makes everything visible (so everything counted) durable.
    inner.log.sync_visible();
    let mut removed = 0;
    for id in drained {
        lock(&inner.files).remove(&id);
        match inner
            .options
            .fs
            .remove_file(&inner.log_dir.join(record::segment_name(id)))
        {
            Ok(()) => {
                removed += 1;
                super::kill_point("reclaim");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(%error, segment = id, "deleting a segment failed; will retry")
            }
        }
        if let Ok(seg) = u32::try_from(id) {
            inner.index_write().segs.remove(&seg);
        }
    }
    if removed > 0
        && let Err(error) = inner.options.fs.sync_dir(&inner.log_dir)
    {
        tracing::warn!(%error, "syncing the log directory failed");
    }
}

/// Whether sealed segment `id` (live-deposit figures `stat`) is for
/// compaction: before the latest snapshot's segment `base`, not the
/// `active` one, holding live deposits whose bytes are under
/// `compact_below_percent` of a segment's room. The one home of that rule
/// (compaction itself, and the backlog `Store::size` reports).
pub(super) fn compactable(
    inner: &Inner,
    id: u64,
    stat: &super::index::SegStat,
    base: u64,
    active: u64,
) -> bool {
    let room = inner
        .options
        .segment_bytes
        .saturating_sub(record::SEGMENT_HEADER);
    let percent = u64::from(inner.options.compact_below_percent);
    id < base && id != active && stat.live > 0 && stat.bytes * 100 < room * percent
}

/// One compaction step (see [`LogStore::compact_step`]).
pub(super) fn compact_step(inner: &Inner, max_scan: usize, store: &LogStore) -> StoreResult<usize> {
    let mut w = store.begin_write()?;
    let (base, active) = (w.state.snapshot_base.0, w.state.active.id);
    let (to_move, cursor) = {
        let ix = inner.index_read();
        let sparse: std::collections::HashSet<u32> = ix
            .segs
            .iter()
            .filter(|(id, s)| compactable(inner, u64::from(**id), s, base, active))
            .map(|(id, _)| *id)
            .collect();
        if sparse.is_empty() {
            return Ok(0);
        }
        let high = ix.deps.high();
        let mut slot = w.state.compaction_cursor.min(high);
        let mut to_move = Vec::new();
        for _ in 0..max_scan.max(1) {
            if slot >= high {
                slot = 0;
                break;
            }
            if let Some(d) = ix.deps.live_at(slot)
                && sparse.contains(&d.seg)
            {
                to_move.push((ix.queue_rec(d.qid).rkid(), d.image()));
            }
            slot += 1;
        }
        (to_move, slot)
    };
    w.state.compaction_cursor = cursor;
    let mut moved = 0;
    for (rkid, image) in to_move {
        let bytes = match inner.bytes(&image, None) {
            Ok(bytes) => bytes,
            // Never copied: the engine quarantines it when it meets it.
            Err(StoreError::Corrupt(what)) => {
                tracing::warn!(%what, "compaction skips a damaged deposit");
                continue;
            }
            Err(other) => return Err(other),
        };
        move_deposit(&mut w, &rkid, image.deposit.seq, &bytes)?;
        super::kill_point("compact-moved");
        moved += 1;
    }
    store.commit(w)?;
    Ok(moved)
}

fn move_deposit(
    w: &mut super::LogWrite<'_>,
    rkid: &Rkid,
    seq: u64,
    bytes: &[u8],
) -> StoreResult<()> {
    let len = crate::deposit_len(bytes)?;
    let end = w.log(&[
        &[record::tag::MOVE],
        rkid.as_bytes(),
        &seq.to_be_bytes(),
        &len.to_be_bytes(),
        bytes,
    ])?;
    let (seg, off) = super::location(w.state.active.id, end - u64::from(len))?;
    let mut ix = w.store.index_write();
    let slot = ix
        .queue(rkid)
        .and_then(|q| ix.find_seq(q, seq))
        .ok_or_else(|| corrupt(format!("moved deposit {seq} is not held")))?;
    ix.move_deposit(slot, seg, off);
    Ok(())
}

/// The latest durable snapshot's file, if the store has one at `base`.
pub(super) fn snapshot_file(
    inner: &Inner,
    base: (u64, u64),
) -> StoreResult<Option<(String, Arc<dyn StoreFile>)>> {
    let name = record::snapshot_name(base);
    match inner
        .options
        .fs
        .open(&inner.snap_dir.join(&name), Open::Existing)
    {
        Ok(file) => Ok(Some((name, file))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The segments a copy of the store needs: every one from `base` (the
/// replay) up to `active`, the segment the log ends in, and every one a
/// held deposit lives in. Never one after `active`: that is the spare
/// (zeros, or — should the writer rotate into it while the copy is made —
/// records past the copy's end under a header the copy's log does not
/// lead to).
pub(super) fn live_segments(inner: &Inner, base: (u64, u64), active: u64) -> StoreResult<Vec<u64>> {
    let ix = inner.index_read();
    let mut ids: Vec<u64> = inner
        .options
        .fs
        .list(&inner.log_dir)?
        .iter()
        .filter_map(|n| record::parse_segment_name(n))
        .filter(|&id| id <= active)
        .filter(|&id| {
            id >= base.0
                || u32::try_from(id).is_ok_and(|s| ix.segs.get(&s).is_some_and(|s| s.live > 0))
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}
