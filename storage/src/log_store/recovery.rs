//! Opening a log store: accounting for every file, loading the snapshot,
//! replaying the log (`storage/README.md`, "The log store: recovery").
//!
//! 1. The files present are listed: the index (`carrier.redb`), the
//!    segments in `log/`, the snapshots in `snap/`. A missing or empty
//!    index while any of the others holds data is refused (a fresh store
//!    there would lose it); so is anything unknown in those directories.
//! 2. redb opens (its own recovery, quick-repair: it does not walk the
//!    file); a redb-store layout (format 1, 2) is upgraded (`migrate.rs`).
//! 3. The newest snapshot that is whole (its trailer's CRC) and whose log
//!    segment still exists is loaded; newer ones — torn by a crash while
//!    they were written, or damaged since — are reported and go. The one
//!    before it is kept (not loaded), with the log from it: the fallback
//!    of a later open whose newest snapshot does not load (issue 27); with
//!    no snapshot before it, the log is kept from the store's first
//!    segment if that is still there. With no whole snapshot, the log is
//!    replayed from the store's first segment, which must then exist.
//! 4. The log is replayed from the earlier of the snapshot's position and
//!    redb's `applied`: each operation goes to the index if it lies at or
//!    past the snapshot, to redb if at or past `applied`. A segment is read
//!    up to the first position that does not hold a valid record, then the
//!    segment whose header names that very end follows. Whatever lies past
//!    the end of that chain was never acknowledged (each acknowledgement
//!    follows the `fdatasync` of its record and of every record before it)
//!    and goes — unless it names a segment that is missing, which is
//!    refused.
//! 5. Every segment a held deposit lives in must exist; segments nothing
//!    references and no replay needs (a reclamation cut short) go.
//! 6. A new segment begins, linked to the chain's end; redb commits
//!    durably with `applied` there.

use super::index::Index;
use super::record::{self, SEGMENT_HEADER, SegmentHeader};
use super::replay::Apply;
use super::snapshot;
use super::{FORMAT, House, Inner, LogOptions, OpenReport, WriterState};
use crate::failure::damaged;
use crate::failure::{corrupt, db_error};
use crate::fs::{Open, StoreFile, StoreFs};
use crate::schema::{
    self as rs, BINDINGS, EVICTION, META, META_APPLIED, META_COUNTS, META_FORMAT, META_LEGACY,
    META_SEQ_FLOOR, META_STORE_ID, TOMBSTONES, Tables,
};
use crate::segment::ActiveSegment;
use crate::store_id::StoreId;
use crate::{OpenError, OpenResult, StoreResult};
use redb::{Durability, WriteTransaction};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

/// A log position: `(segment, offset)`.
type Pos = (u64, u64);

/// The segment files present: id → length.
pub(super) fn scan_log(fs: &dyn StoreFs, dir: &Path) -> OpenResult<BTreeMap<u64, u64>> {
    let mut out = BTreeMap::new();
    for name in fs.list(dir)? {
        let Some(id) = record::parse_segment_name(&name) else {
            return Err(damaged(format!(
                "{} holds {name:?}, which is not a log segment",
                dir.display()
            )));
        };
        let len = fs.file_len(&dir.join(&name))?.unwrap_or(0);
        out.insert(id, len);
    }
    Ok(out)
}

fn scan_snapshots(fs: &dyn StoreFs, dir: &Path) -> OpenResult<Vec<Pos>> {
    let mut out = Vec::new();
    for name in fs.list(dir)? {
        match record::parse_snapshot_name(&name) {
            Some(pos) => out.push(pos),
            None => {
                return Err(damaged(format!(
                    "{} holds {name:?}, which is not a snapshot",
                    dir.display()
                )));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn open_segment(fs: &dyn StoreFs, log_dir: &Path, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
    Ok(fs.open(&log_dir.join(record::segment_name(id)), Open::Existing)?)
}

/// Whether segment `id` holds at least one record (a header and zeros,
/// the spare of a crashed process, hold none).
fn holds_records(fs: &dyn StoreFs, log_dir: &Path, id: u64) -> StoreResult<bool> {
    let file = open_segment(fs, log_dir, id)?;
    let len = file.len()?;
    Ok(record::read_record(&*file, len, id, SEGMENT_HEADER)?.is_some())
}

/// Creates segment `id` with `header`, durably (file and name).
pub(super) fn create_with_header(
    fs: &dyn StoreFs,
    log_dir: &Path,
    header: &SegmentHeader,
) -> StoreResult<Arc<dyn StoreFile>> {
    let file = fs.open(
        &log_dir.join(record::segment_name(header.id)),
        Open::CreateNew,
    )?;
    file.write_all_at(&header.encode(), 0)?;
    file.sync_data()?;
    fs.sync_dir(log_dir)?;
    Ok(file)
}

pub(super) fn open(dir: &Path, options: LogOptions) -> OpenResult<Inner> {
    open_inner(dir, options, false)
}

fn open_inner(dir: &Path, options: LogOptions, upgraded: bool) -> OpenResult<Inner> {
    let started = Instant::now();
    let fs = Arc::clone(&options.fs);
    let log_dir = dir.join("log");
    let db_path = dir.join(crate::store_id::INDEX_FILE);
    let found = survey(&*fs, dir, &db_path, &options)?;
    refuse_before_writing(&*fs, &db_path, &options)?;
    let db = rs::open_db(&*fs, &db_path, options.cache_bytes)?;
    fs.sync_dir(dir)?;
    match index_format(&db)? {
        None => {
            if found.needs_index {
                let (records, snapshots) = (&found.with_records, &found.snapshots);
                return Err(missing(&db_path, true, records, snapshots, &options));
            }
            create_fresh(&*fs, &log_dir, &db, &found.segments)?;
        }
        Some(Some(1 | 2)) => {
            drop(db);
            migrate_then_open(dir, &options)?;
            return open_inner(dir, options, true);
        }
        Some(Some(FORMAT)) => {}
        Some(other) => return Err(unknown_format(&db_path, other)),
    }
    // Listed again: a fresh store made its first segment.
    let segments = scan_log(&*fs, &log_dir)?;
    let txn = rs::begin(&db, true)?;
    for def in [BINDINGS, TOMBSTONES, EVICTION, META] {
        txn.open_table(def).map_err(db_error)?;
    }
    let store_id = held_store_id(&txn, &db_path, options.expect_store_id)?;
    let (seq_floor, mut counts, applied) = read_meta(&txn)?;
    if txn.get_with(META, META_LEGACY, |_| Ok(()))?.is_some() {
        super::migrate::remove_legacy(&*fs, dir)?;
        rs::del(&txn, META, META_LEGACY)?;
    }

    // The snapshot.
    let mut report = OpenReport {
        upgraded,
        ..OpenReport::default()
    };
    let (stale_snapshots, kept, (base, mut index, snapshot_bytes)) = choose_base(
        &*fs,
        dir,
        &segments,
        &found.snapshots,
        store_id,
        &mut report,
    )?;
    // The replay.
    let from = base.min(applied);
    refuse_missing_start(&segments, from, (base, applied), &db_path, &log_dir)?;
    let mut apply = Apply {
        index: &mut index,
        txn: Some(&txn),
        memory_from: base,
        redb_from: applied,
        counts: &mut counts,
        ops: 0,
    };
    let walk = replay_log(
        &*fs,
        &log_dir,
        (&segments, store_id),
        from,
        &mut apply,
        &mut report,
    )?;
    // Every file accounted for.
    let referenced = referenced_segments(&index, &segments, &log_dir)?;
    let obsolete = classify(
        &*fs,
        &log_dir,
        &segments,
        &walk,
        &referenced,
        (from.0, kept.0),
        store_id,
    )?;
    let end = walk.end;
    refuse_ahead_of_log(end, (base, applied), &db_path, &log_dir)?;
    tidy(&*fs, dir, &obsolete, &stale_snapshots)?;
    sync_replayed(&*fs, &log_dir, &segments, (from, end), &obsolete)?;
    // A new segment, linked to the chain's end.
    let next = segments.keys().next_back().copied().unwrap_or(0).max(end.0) + 1;
    let file = start_segment(&*fs, &log_dir, (next, end), store_id, txn, counts)?;
    index.occupancy.bindings = counts.0;
    index.occupancy.tombstones = counts.1;
    index.commit(false, None)?;
    report.load_micros = started.elapsed().as_micros() as u64;
    let state = writer_state(
        (next, Arc::clone(&file)),
        (kept, base),
        walk.since_base,
        snapshot_bytes,
    );
    Ok(assemble(
        dir,
        options,
        (db, index, state),
        (store_id, seq_floor),
        (next, file),
        report,
    ))
}

/// Replays the log from `from` along the chain into `apply`, timed into
/// `report`.
fn replay_log(
    fs: &dyn StoreFs,
    log_dir: &Path,
    (segments, store_id): (&BTreeMap<u64, u64>, StoreId),
    from: Pos,
    apply: &mut Apply<'_>,
    report: &mut OpenReport,
) -> OpenResult<Walk> {
    let started = Instant::now();
    let walk = walk_chain(fs, log_dir, segments, store_id, from, apply)?;
    report.ops = apply.ops;
    report.records = walk.records;
    report.replayed_bytes = walk.bytes;
    report.replay_micros = started.elapsed().as_micros() as u64;
    Ok(walk)
}

/// The refusal of a format this build does not know.
fn unknown_format(db_path: &Path, format: Option<u32>) -> OpenError {
    corrupt(format!(
        "{}: store format {format:?}, expected {FORMAT} (or 1, 2: the redb store's, upgraded)",
        db_path.display()
    ))
    .into()
}

/// The `meta` format the index holds (`None`: no store in it).
fn index_format(db: &redb::Database) -> StoreResult<Option<Option<u32>>> {
    let txn = rs::begin(db, true)?;
    txn.get_with(META, META_FORMAT, |v| {
        Ok(v.try_into().map(u32::from_be_bytes).ok())
    })
}

/// The seq floor, the `(bindings, tombstones)` counts and redb's
/// `applied` position, from `meta`.
fn read_meta(txn: &WriteTransaction) -> StoreResult<(u64, (u64, u64), Pos)> {
    let seq_floor = rs::get_u64(txn, META, META_SEQ_FLOOR)?.unwrap_or(0);
    let counts = txn
        .get_with(META, META_COUNTS, |v| {
            Ok((rs::u64_at(v, 0)?, rs::u64_at(v, 8)?))
        })?
        .unwrap_or((0, 0));
    let applied = rs::applied(txn)?.ok_or_else(|| corrupt("the index names no log position"))?;
    Ok((seq_floor, counts, applied))
}

/// Creates segment `next`, linked to the log's `end`, and commits redb
/// durably with `applied` at its start and the replayed counts.
fn start_segment(
    fs: &dyn StoreFs,
    log_dir: &Path,
    (next, end): (u64, Pos),
    store_id: StoreId,
    mut txn: WriteTransaction,
    counts: (u64, u64),
) -> OpenResult<Arc<dyn StoreFile>> {
    let header = SegmentHeader {
        id: next,
        store_id: store_id.0,
        prev: end,
    };
    let file = create_with_header(fs, log_dir, &header)?;
    super::kill_point("open-new-segment");
    rs::put(
        &txn,
        META,
        META_APPLIED,
        &rs::cat(&[&next.to_be_bytes(), &SEGMENT_HEADER.to_be_bytes()]),
    )?;
    rs::put(
        &txn,
        META,
        META_COUNTS,
        &rs::cat(&[&counts.0.to_be_bytes(), &counts.1.to_be_bytes()]),
    )?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_error)?;
    txn.commit().map_err(db_error)?;
    Ok(file)
}

/// The writer's state on a new segment `next` (its `file`), the index
/// starting at `base`, `since_base` log bytes after it, the log kept from
/// `kept`.
fn writer_state(
    (next, file): (u64, Arc<dyn StoreFile>),
    (kept, base): (Pos, Pos),
    since_base: u64,
    snapshot_bytes: u64,
) -> WriterState {
    WriterState {
        active: ActiveSegment::over(next, file, SEGMENT_HEADER),
        void_pending: None,
        spare: None,
        next_segment: next + 1,
        since_snapshot: since_base,
        snapshot_base: kept,
        latest_snapshot: base,
        redb_applied: (next, SEGMENT_HEADER),
        redb_ops: 0,
        last_snapshot_bytes: snapshot_bytes,
        compaction_cursor: 0,
        snapshot: None,
    }
}

/// The store's state, once recovered.
fn assemble(
    dir: &Path,
    options: LogOptions,
    (db, index, state): (redb::Database, Index, WriterState),
    (store_id, seq_floor): (StoreId, u64),
    (next, file): (u64, Arc<dyn StoreFile>),
    report: OpenReport,
) -> Inner {
    let (base, start) = (state.snapshot_base, state.redb_applied);
    if report.records > 0 {
        tracing::info!(
            records = report.records,
            bytes = report.replayed_bytes,
            snapshot = ?report.snapshot,
            micros = report.load_micros,
            "recovered the store from its snapshot and log"
        );
    }
    let files = HashMap::from([(next, file)]);
    Inner {
        dir: dir.to_owned(),
        log_dir: dir.join("log"),
        snap_dir: dir.join("snap"),
        db_path: dir.join(crate::store_id::INDEX_FILE),
        index: RwLock::new(index),
        writer: Mutex::new(state),
        db: RwLock::new(Some(Arc::new(db))),
        db_failed: AtomicBool::new(false),
        readers: Mutex::new(BTreeMap::new()),
        files: Mutex::new(files),
        log: crate::log_sync::LogSync::new(start),
        store_id,
        seq_floor: crate::SeqFloor::new(seq_floor),
        challenges: crate::ChallengeTable::default(),
        house: Mutex::new(House {
            spare: options.preallocate,
            ..House::default()
        }),
        house_wake: Condvar::new(),
        opened: Mutex::new(report),
        bounds: Mutex::new((base, start)),
        gate_wanted: AtomicBool::new(false),
        options,
    }
}

/// The files a store directory holds, before anything is written.
struct Survey {
    segments: BTreeMap<u64, u64>,
    snapshots: Vec<Pos>,
    /// Log segments holding a record.
    with_records: Vec<u64>,
    /// The directory holds data (or must hold a store): no fresh index.
    needs_index: bool,
}

/// Lists the log, the snapshots and the legacy segments, and refuses a
/// missing or empty index where the directory holds data.
fn survey(
    fs: &dyn StoreFs,
    dir: &Path,
    db_path: &Path,
    options: &LogOptions,
) -> OpenResult<Survey> {
    let log_dir = dir.join("log");
    fs.create_dir_all(&log_dir)?;
    fs.create_dir_all(&dir.join("snap"))?;
    let segments = scan_log(fs, &log_dir)?;
    let snapshots = scan_snapshots(fs, &dir.join("snap"))?;
    let index_len = fs.file_len(db_path)?;
    let legacy = legacy_segments(fs, dir)?;
    let mut with_records = Vec::new();
    for &id in segments.keys() {
        if holds_records(fs, &log_dir, id)? {
            with_records.push(id);
        }
    }
    let holds_data = !with_records.is_empty() || !snapshots.is_empty();
    let needs_index = holds_data || !legacy.is_empty() || options.expect_store_id.is_some();
    if index_len.is_none_or(|len| len == 0) && needs_index {
        return Err(missing(
            db_path,
            index_len.is_some(),
            &with_records,
            &snapshots,
            options,
        ));
    }
    Ok(Survey {
        segments,
        snapshots,
        with_records,
        needs_index,
    })
}

/// Where the in-memory index starts: the newest whole snapshot, or the
/// store's first segment (an empty index); where the log is kept from (the
/// snapshot before it, else the store's first segment if it is still
/// there: what a restart falls back on should that snapshot not load);
/// and the stale snapshots.
#[allow(clippy::type_complexity)]
fn choose_base(
    fs: &dyn StoreFs,
    dir: &Path,
    segments: &BTreeMap<u64, u64>,
    snapshots: &[Pos],
    store_id: StoreId,
    report: &mut OpenReport,
) -> OpenResult<(Vec<Pos>, Pos, (Pos, Index, u64))> {
    let (chosen, older, stale) =
        choose_snapshot(fs, &dir.join("snap"), segments, snapshots, store_id)?;
    let genesis = first_segment(fs, &dir.join("log"), segments, store_id)?;
    if let Some((pos, index, bytes)) = chosen {
        report.snapshot = Some(pos);
        report.snapshot_bytes = bytes;
        let kept = older
            .or(genesis.map(|g| (g, SEGMENT_HEADER)))
            .map_or(pos, |kept| kept.min(pos));
        return Ok((stale, kept, (pos, index, bytes)));
    }
    let genesis = genesis.ok_or_else(|| {
        damaged(format!(
            "{} holds no whole snapshot{} and its log does not begin with the store's first segment \
             (the snapshot is missing, or the segments before {} were reclaimed): the store cannot be rebuilt",
            dir.display(),
            if snapshots.is_empty() { "" } else { " (each one is damaged)" },
            segments.keys().next().map_or("its first".into(), |id| format!("{id:016x}")),
        ))
    })?;
    let base = (genesis, SEGMENT_HEADER);
    Ok((stale, base, (base, Index::new(), 0)))
}

/// Refuses a replay whose first segment is gone.
fn refuse_missing_start(
    segments: &BTreeMap<u64, u64>,
    from: Pos,
    (base, applied): (Pos, Pos),
    db_path: &Path,
    log_dir: &Path,
) -> OpenResult<()> {
    if segments.contains_key(&from.0) {
        return Ok(());
    }
    Err(damaged(if applied < base {
        format!(
            "{} (its redb state) is older than its log: it needs segment {:016x}, which is gone",
            db_path.display(),
            applied.0
        )
    } else {
        format!(
            "the log segment {:016x} the snapshot begins in is missing from {}",
            from.0,
            log_dir.display()
        )
    }))
}

/// The segments held deposits live in, every one of them present.
fn referenced_segments(
    index: &Index,
    segments: &BTreeMap<u64, u64>,
    log_dir: &Path,
) -> OpenResult<BTreeSet<u64>> {
    let referenced: BTreeSet<u64> = index
        .segs
        .iter()
        .filter(|(_, s)| s.live > 0)
        .map(|(&id, _)| u64::from(id))
        .collect();
    let missing: Vec<String> = referenced
        .iter()
        .filter(|id| !segments.contains_key(id))
        .map(|id| format!("{id:016x}"))
        .collect();
    if !missing.is_empty() {
        return Err(damaged(format!(
            "log segment(s) that held deposits live in are missing from {}: {}",
            log_dir.display(),
            missing.join(", ")
        )));
    }
    Ok(referenced)
}

/// Refuses an index or a snapshot that holds more of the log than the
/// log itself (the log ends at `end`).
fn refuse_ahead_of_log(
    end: Pos,
    (base, applied): (Pos, Pos),
    db_path: &Path,
    log_dir: &Path,
) -> OpenResult<()> {
    if applied > end {
        return Err(damaged(format!(
            "{} (its redb state) is newer than its log: it holds the log up to segment {:016x} offset {}, \
             the log in {} ends at segment {:016x} offset {}",
            db_path.display(),
            applied.0,
            applied.1,
            log_dir.display(),
            end.0,
            end.1
        )));
    }
    if base > end {
        return Err(damaged(format!(
            "the snapshot at segment {:016x} offset {} is newer than the log in {} (which ends at segment {:016x} offset {})",
            base.0,
            base.1,
            log_dir.display(),
            end.0,
            end.1
        )));
    }
    Ok(())
}

/// Removes the obsolete log segments and the stale snapshots, durably.
fn tidy(fs: &dyn StoreFs, dir: &Path, obsolete: &[u64], stale: &[Pos]) -> OpenResult<()> {
    let (log_dir, snap_dir) = (dir.join("log"), dir.join("snap"));
    for &id in obsolete {
        fs.remove_file(&log_dir.join(record::segment_name(id)))?;
    }
    for &pos in stale {
        fs.remove_file(&snap_dir.join(record::snapshot_name(pos)))?;
    }
    fs.sync_dir(&log_dir)?;
    fs.sync_dir(&snap_dir)?;
    Ok(())
}

/// Makes what was replayed durable before anything names its end: a
/// killed process's last records may still be only in the page cache
/// (written, never synced, so never answered), and the new segment's
/// header and redb's `applied` point past them. Without this, a power cut
/// after the open would lose them from under a header that names them,
/// and the next open would refuse the log as damaged.
fn sync_replayed(
    fs: &dyn StoreFs,
    log_dir: &Path,
    segments: &BTreeMap<u64, u64>,
    (from, end): (Pos, Pos),
    obsolete: &[u64],
) -> OpenResult<()> {
    for (&id, _) in segments.range(from.0..=end.0) {
        if !obsolete.contains(&id) {
            open_segment(fs, log_dir, id)?.sync_data()?;
        }
    }
    Ok(())
}

/// The refusal of a missing, empty or storeless index.
fn missing(
    db_path: &Path,
    exists: bool,
    with_records: &[u64],
    snapshots: &[Pos],
    options: &LogOptions,
) -> OpenError {
    let mut held = with_records.to_vec();
    held.extend(snapshots.iter().map(|(seg, _)| *seg));
    held.sort_unstable();
    held.dedup();
    let mut error = crate::store_id::missing_index(db_path, exists, &held, options.expect_store_id);
    if let OpenError::Damaged(what) = &mut error
        && !snapshots.is_empty()
    {
        what.push_str(&format!(" ({} snapshot(s) in snap/)", snapshots.len()));
    }
    error
}

/// The redb store's segment files (`segments/`), if any.
fn legacy_segments(fs: &dyn StoreFs, dir: &Path) -> StoreResult<Vec<String>> {
    match fs.list(&dir.join("segments")) {
        Ok(names) => Ok(names),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

fn migrate_then_open(dir: &Path, options: &LogOptions) -> StoreResult<()> {
    tracing::warn!(dir = %dir.display(), "the store holds the redb store's layout: upgrading it to the log store");
    super::migrate::upgrade(dir, options)
}

/// Refuses an index of a format this build does not know, or of another
/// store than expected, before redb is opened for writing (which may
/// repair and so rewrite `carrier.redb`: a refused start changes nothing,
/// issue 27) — when redb can open it read-only; an index that needs
/// repair first is checked after it, as are the refusals the log's replay
/// finds.
fn refuse_before_writing(fs: &dyn StoreFs, db_path: &Path, options: &LogOptions) -> OpenResult<()> {
    use redb::ReadableDatabase as _;
    if fs.file_len(db_path)?.is_none_or(|len| len == 0) {
        return Ok(());
    }
    let Ok(db) = fs.redb_backend(db_path).map(|backend| {
        redb::Builder::new()
            .set_cache_size(options.cache_bytes)
            .open_read_only_with_backend(rs::Boxed::new(backend))
    }) else {
        return Ok(());
    };
    let Ok(txn) = db
        .map_err(db_error)
        .and_then(|db| db.begin_read().map_err(db_error))
    else {
        return Ok(());
    };
    match txn.get_with(META, META_FORMAT, |v| {
        Ok(v.try_into().map(u32::from_be_bytes).ok())
    }) {
        Ok(Some(Some(FORMAT))) => held_store_id(&txn, db_path, options.expect_store_id).map(drop),
        Ok(Some(Some(1 | 2)) | None) | Err(_) => Ok(()),
        Ok(Some(other)) => Err(unknown_format(db_path, other)),
    }
}

/// The id a store holds, checked against the one expected.
fn held_store_id(
    txn: &impl Tables,
    db_path: &Path,
    expected: Option<StoreId>,
) -> OpenResult<StoreId> {
    let held = txn
        .get_with(META, META_STORE_ID, |v| {
            Ok(<[u8; 16]>::try_from(v).ok().map(StoreId))
        })?
        .flatten()
        .ok_or_else(|| corrupt(format!("{} holds no store id", db_path.display())))?;
    match expected {
        Some(expected) if held != expected => Err(damaged(format!(
            "{} holds store {held}, but this data dir's store is {expected} \
             (a store from another data dir, or one restored from another carrier's backup)",
            db_path.display()
        ))),
        _ => Ok(held),
    }
}

/// A fresh store: its first segment after every id present (segments that
/// hold no record, left by an interrupted first open, go), then redb.
fn create_fresh(
    fs: &dyn StoreFs,
    log_dir: &Path,
    db: &redb::Database,
    segments: &BTreeMap<u64, u64>,
) -> StoreResult<()> {
    for &id in segments.keys() {
        fs.remove_file(&log_dir.join(record::segment_name(id)))?;
    }
    fs.sync_dir(log_dir)?;
    let store_id = StoreId::random();
    let first = segments.keys().next_back().copied().unwrap_or(0) + 1;
    create_with_header(
        fs,
        log_dir,
        &SegmentHeader {
            id: first,
            store_id: store_id.0,
            prev: (0, 0),
        },
    )?;
    let txn = rs::begin(db, true)?;
    for def in [BINDINGS, TOMBSTONES, EVICTION, META] {
        txn.open_table(def).map_err(db_error)?;
    }
    rs::put(&txn, META, META_FORMAT, &FORMAT.to_be_bytes())?;
    rs::put(&txn, META, META_STORE_ID, &store_id.0)?;
    rs::put(&txn, META, META_COUNTS, &[0; 16])?;
    rs::put(
        &txn,
        META,
        META_APPLIED,
        &rs::cat(&[&first.to_be_bytes(), &SEGMENT_HEADER.to_be_bytes()]),
    )?;
    txn.commit().map_err(db_error)
}

/// A loaded snapshot: its position, the index, its size.
type Loaded = (Pos, Index, u64);

/// The newest snapshot that is whole and whose segment exists; the one
/// before it whose segment exists (kept, not loaded: the fallback of the
/// next restart); and the others (to delete).
#[allow(clippy::type_complexity)]
fn choose_snapshot(
    fs: &dyn StoreFs,
    snap_dir: &Path,
    segments: &BTreeMap<u64, u64>,
    snapshots: &[Pos],
    store_id: StoreId,
) -> StoreResult<(Option<Loaded>, Option<Pos>, Vec<Pos>)> {
    let mut stale = Vec::new();
    let mut chosen = None;
    let mut older = None;
    for &pos in snapshots.iter().rev() {
        if !segments.contains_key(&pos.0) || older.is_some() {
            stale.push(pos);
            continue;
        }
        if chosen.is_some() {
            older = Some(pos);
            continue;
        }
        let path = snap_dir.join(record::snapshot_name(pos));
        match snapshot::load(fs, &path, store_id)? {
            Some((index, bytes)) => chosen = Some((pos, index, bytes)),
            None => {
                tracing::warn!(
                    snapshot = %path.display(),
                    "a snapshot does not load: its checksum does not match (a bit changed since it was \
                     written, or a crash tore it while it was written); the snapshot before it and the \
                     log replace it, and it is removed"
                );
                stale.push(pos);
            }
        }
    }
    Ok((chosen, older, stale))
}

/// What a restart would start from now: the snapshot it would load (or an
/// empty index at the store's first segment).
pub(super) fn pick_snapshot(inner: &Inner) -> StoreResult<(Pos, Index)> {
    let fs = &*inner.options.fs;
    let segments = scan_log(fs, &inner.log_dir)?;
    let snapshots = scan_snapshots(fs, &inner.snap_dir)?;
    match choose_snapshot(fs, &inner.snap_dir, &segments, &snapshots, inner.store_id)?.0 {
        Some((pos, index, _)) => Ok((pos, index)),
        None => {
            let genesis = first_segment(fs, &inner.log_dir, &segments, inner.store_id)?
                .ok_or_else(|| corrupt("no snapshot and no first segment"))?;
            Ok(((genesis, SEGMENT_HEADER), Index::new()))
        }
    }
}

/// The store's first segment (its header names no predecessor).
fn first_segment(
    fs: &dyn StoreFs,
    log_dir: &Path,
    segments: &BTreeMap<u64, u64>,
    store_id: StoreId,
) -> StoreResult<Option<u64>> {
    for &id in segments.keys() {
        let file = open_segment(fs, log_dir, id)?;
        if let Some(h) = SegmentHeader::read(&*file)?
            && h.id == id
            && h.store_id == store_id.0
            && h.prev == (0, 0)
        {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// What a walk of the log found.
pub(super) struct Walk {
    /// Segments on the chain, in order.
    pub(super) chain: Vec<u64>,
    /// Where the log ends.
    pub(super) end: Pos,
    pub(super) records: u64,
    pub(super) bytes: u64,
    /// Log bytes at or past the memory position (what the next snapshot
    /// would save a replay).
    pub(super) since_base: u64,
}

/// Reads the log from `from` along the chain, handing every record to
/// `apply`.
pub(super) fn walk_chain(
    fs: &dyn StoreFs,
    log_dir: &Path,
    segments: &BTreeMap<u64, u64>,
    store_id: StoreId,
    from: Pos,
    apply: &mut Apply<'_>,
) -> OpenResult<Walk> {
    let mut walk = Walk {
        chain: Vec::new(),
        end: from,
        records: 0,
        bytes: 0,
        since_base: 0,
    };
    let (mut id, mut at) = from;
    loop {
        let file = open_segment(fs, log_dir, id)?;
        match SegmentHeader::read(&*file)? {
            Some(h) if h.id == id && h.store_id == store_id.0 => {}
            Some(h) if h.store_id != store_id.0 => {
                return Err(damaged(format!(
                    "log segment {id:016x} in {} belongs to another store ({})",
                    log_dir.display(),
                    StoreId(h.store_id)
                )));
            }
            _ => {
                return Err(damaged(format!(
                    "log segment {id:016x} in {} has no valid header",
                    log_dir.display()
                )));
            }
        }
        walk.chain.push(id);
        let len = file.len()?;
        while let Some(rec) = record::read_record(&*file, len, id, at)? {
            if rec.kind == record::BATCH {
                apply.record(id, &rec)?;
            }
            walk.records += 1;
            walk.bytes += rec.end - at;
            if (id, at) >= apply.memory_from {
                walk.since_base += rec.end - at;
            }
            at = rec.end;
        }
        walk.end = (id, at);
        let mut next = None;
        for (&candidate, _) in segments.range(id + 1..) {
            let f = open_segment(fs, log_dir, candidate)?;
            if let Some(h) = SegmentHeader::read(&*f)?
                && h.id == candidate
                && h.store_id == store_id.0
                && h.prev == (id, at)
            {
                next = Some(candidate);
                break;
            }
        }
        match next {
            Some(n) => {
                id = n;
                at = SEGMENT_HEADER;
            }
            None => return Ok(walk),
        }
    }
}

/// The segment files no longer needed: those before the replay (and
/// before `kept`, where the log is kept from: the fallback of a restart
/// whose latest snapshot does not load) that no deposit lives in (a
/// reclamation cut short), and those past the end of
/// the chain that hold no header (a segment zero-filled ahead of use, or
/// begun by a rotation cut short). A segment past the end of the chain
/// *with* a header is refused: a rotation makes the sealed segment durable
/// before it writes the next one's header, so the log did go on past the
/// point where it now stops — a segment is missing, or a record that was
/// durable no longer reads back.
fn classify(
    fs: &dyn StoreFs,
    log_dir: &Path,
    segments: &BTreeMap<u64, u64>,
    walk: &Walk,
    referenced: &BTreeSet<u64>,
    (from, kept): (u64, u64),
    store_id: StoreId,
) -> OpenResult<Vec<u64>> {
    let on_chain: BTreeSet<u64> = walk.chain.iter().copied().collect();
    let mut obsolete = Vec::new();
    for &id in segments.keys() {
        if on_chain.contains(&id) || referenced.contains(&id) {
            continue;
        }
        if id < from {
            if id < kept {
                obsolete.push(id);
            }
            continue;
        }
        let file = open_segment(fs, log_dir, id)?;
        match SegmentHeader::read(&*file)? {
            None => obsolete.push(id),
            Some(h) if h.store_id != store_id.0 => {
                return Err(damaged(format!(
                    "log segment {id:016x} in {} belongs to another store ({})",
                    log_dir.display(),
                    StoreId(h.store_id)
                )));
            }
            Some(h) if !segments.contains_key(&h.prev.0) => {
                return Err(damaged(format!(
                    "log segment {:016x} is missing from {} (segment {id:016x} follows it): \
                     the log is broken there and what follows cannot be replayed",
                    h.prev.0,
                    log_dir.display()
                )));
            }
            Some(h) => {
                let read = if h.prev.0 == walk.end.0 {
                    walk.end.1
                } else {
                    SEGMENT_HEADER
                };
                let held = segments.get(&h.prev.0).copied().unwrap_or(0);
                return Err(damaged(format!(
                    "the log in {} is damaged: segment {:016x} reads back up to offset {read} only, \
                     but segment {id:016x} says it went on to offset {} (a durable record no longer reads back: \
                     bytes {read}..{} of that segment, whose file holds {held} bytes, are missing or damaged, \
                     and segment {id:016x} and those after it cannot be replayed)",
                    log_dir.display(),
                    h.prev.0,
                    h.prev.1,
                    h.prev.1,
                )));
            }
        }
    }
    Ok(obsolete)
}

/// Brings redb up to the log after it was reopened (`Inner::reopen_if_failed`):
/// replays the binding operations past its `applied`, and commits durably.
pub(super) fn catch_up(inner: &Inner, state: &mut WriterState) -> StoreResult<()> {
    let db = inner.db()?;
    let txn = rs::begin(&db, true)?;
    let applied = rs::applied(&txn)?.ok_or_else(|| corrupt("the index names no log position"))?;
    let mut counts = txn
        .get_with(META, META_COUNTS, |v| {
            Ok((rs::u64_at(v, 0)?, rs::u64_at(v, 8)?))
        })?
        .unwrap_or((0, 0));
    let segments = scan_log(&*inner.options.fs, &inner.log_dir)?;
    let mut scratch = Index::new();
    let mut apply = Apply {
        index: &mut scratch,
        txn: Some(&txn),
        memory_from: (u64::MAX, u64::MAX),
        redb_from: applied,
        counts: &mut counts,
        ops: 0,
    };
    walk_chain(
        &*inner.options.fs,
        &inner.log_dir,
        &segments,
        inner.store_id,
        applied,
        &mut apply,
    )?;
    let end = (state.active.id, state.active.end());
    rs::put(
        &txn,
        META,
        META_APPLIED,
        &rs::cat(&[&end.0.to_be_bytes(), &end.1.to_be_bytes()]),
    )?;
    rs::put(
        &txn,
        META,
        META_COUNTS,
        &rs::cat(&[&counts.0.to_be_bytes(), &counts.1.to_be_bytes()]),
    )?;
    let mut txn = txn;
    txn.set_durability(Durability::Immediate)
        .map_err(db_error)?;
    txn.commit().map_err(db_error)?;
    state.redb_applied = end;
    state.redb_ops = 0;
    inner.publish_bounds(state);
    Ok(())
}
