//! The embedded default [`Store`] (issue 15): the queue data is a log, its
//! indexes live in memory, and redb holds what the state table changes at
//! registration rate. No B-tree is on the path of a deposit.
//!
//! ## On-disk layout (`storage/README.md`, "The log store")
//! ```text
//! <dir>/carrier.redb                  redb: bindings, tombstones, eviction order, declaration, meta
//! <dir>/log/<seg:016x>.log            the log: one record per committed write transaction (record.rs)
//! <dir>/snap/<seg:016x>-<off:016x>.snap   the in-memory index as of that log position (snapshot.rs)
//! ```
//!
//! ## Commit order
//! A write transaction changes the in-memory index in place (each change
//! undoable, `index.rs`), appends its operations to its log record, and —
//! only when it touches a binding, a tombstone or the declaration — a redb
//! write transaction. [`Store::commit_deferred`] writes the record into
//! the active segment, commits redb (non-durably: the record is what makes
//! the transaction durable; `applied` in redb names the record's end) and
//! makes the transaction visible to snapshots; [`Store::sync`]
//! `fdatasync`s the segment, and only then are its callers answered. A
//! failed `fdatasync` stops the process. redb is made durable at each
//! snapshot's start and every [`LogOptions::redb_checkpoint_ops`] of its
//! operations (a checkpoint), so what an open replays into redb is bounded.
//!
//! ## Recovery (`recovery.rs`)
//! The newest valid snapshot is loaded, then the log is replayed from the
//! earlier of its position and redb's `applied` (operations carry absolute
//! values, so a suffix of the log replays over the fuzzy snapshot
//! idempotently), up to the first position that does not hold a valid
//! record; a new segment begins, linked to where the log ended. Work
//! bounded by the snapshot interval ([`LogOptions::snapshot_log_bytes`]),
//! never by the data held.
//!
//! ## Background work (`housekeeping.rs`)
//! One thread per store zero-fills the next segment ahead of use, writes
//! snapshots (fuzzy: copied in chunks between write transactions, never
//! pausing the writer for longer than one chunk), and deletes segments that
//! hold no live deposit and lie before the latest durable snapshot.
//! [`Store::maintenance_step`] compacts: it copies the last deposits of
//! sparse segments into the active one so that those can go.

mod backup;
mod housekeeping;
mod index;
mod integrity;
mod kill;
mod migrate;
mod read;
mod record;
mod recovery;
mod replay;
mod snapshot;
mod write;

pub use backup::{LogBackup, is_store_file};
pub(crate) use kill::kill_point;
pub use kill::{KILL_POINTS, arm_kill_point};
pub use read::LogRead;
pub use write::LogWrite;
use write::location;

use self::index::{DepImage, Index};
use self::record::{RECORD_HEADER, tag};
use crate::OpenResult;
use crate::failure::{Context, corrupt, db_error, lock};
use crate::fs::{StoreFile, StoreFs};
use crate::log_sync::LogSync;
use crate::schema::{
    self as rs, BINDINGS, EVICTION, META, META_COUNTS, META_DECLARATION, META_SEQ_FLOOR,
    TOMBSTONES, Tables as _, query,
};
use crate::segment::ActiveSegment;
use crate::store_id::StoreId;
use crate::{
    Binding, ChallengeTable, DeclarationRecord, DeferredBytes, DepartureRecord, Deposit, DepositId,
    Due, Ms, Occupancy, PendingSync, ReadTxn, SeqFloor, Store, StoreError, StoreResult, Tombstone,
    WriteTxn,
};
use redb::{Database, Durability, ReadTransaction, ReadableDatabase, WriteTransaction};
use rltp_proofs::multikey::Rkid;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use self::integrity::LogIntegrity;
/// The `meta` format of a log store (1 and 2 are the redb store's, which
/// opening upgrades: `migrate.rs`).
pub use crate::schema::LOG_FORMAT as FORMAT;
pub use crate::store_id::IntegrityReport;

/// Tuning of a [`LogStore`].
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// A segment is sealed and the next one begun once it holds this many
    /// bytes (checked between transactions). Default 64 MiB.
    pub segment_bytes: u64,
    /// Zero-fill the next segment ahead of use, so that a batch's
    /// `fdatasync` writes data only, never file-size metadata. Default on.
    pub preallocate: bool,
    /// A snapshot is taken once this much log was written since the last
    /// one (or the last snapshot's size, if larger): what a restart
    /// replays at most, besides what is logged while a snapshot is
    /// written. Default 192 MiB.
    pub snapshot_log_bytes: u64,
    /// redb is made durable (a checkpoint) after this many binding,
    /// tombstone and declaration operations. Default 8 192.
    pub redb_checkpoint_ops: u64,
    /// A sealed segment is compacted when its live bytes are below this
    /// percentage of `segment_bytes` (or of its extent, if larger).
    /// Default 25.
    pub compact_below_percent: u8,
    /// redb's page cache (bindings and tombstones only: registration-rate
    /// reads, the rest comes from the kernel's page cache). Default 4 MiB.
    pub cache_bytes: usize,
    /// Run the background thread (preallocation, snapshots, reclaiming
    /// segments). Default on; tests turn it off to drive
    /// [`LogStore::snapshot_now`] and [`LogStore::housekeeping_step`]
    /// themselves.
    pub background: bool,
    /// Take a snapshot when the store is closed (dropped), so that the
    /// next open replays nothing and no log record is parsed again.
    /// Default on.
    pub snapshot_at_close: bool,
    /// The file layer (default the operating system's; the power-loss
    /// harness passes a [`crate::fault_fs::FaultFs`]).
    pub fs: Arc<dyn StoreFs>,
    /// The store this directory must hold (the data dir's lineage).
    pub expect_store_id: Option<StoreId>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_bytes: 64 << 20,
            preallocate: true,
            snapshot_log_bytes: 192 << 20,
            redb_checkpoint_ops: 8_192,
            compact_below_percent: 25,
            cache_bytes: 4 << 20,
            background: true,
            snapshot_at_close: true,
            fs: crate::fs::real(),
            expect_store_id: None,
        }
    }
}

/// What the last open did (restart figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenReport {
    /// The snapshot loaded, as a log position (`None`: replayed from the
    /// store's first segment).
    pub snapshot: Option<(u64, u64)>,
    /// Its size, bytes.
    pub snapshot_bytes: u64,
    /// Records replayed.
    pub records: u64,
    /// Log bytes replayed.
    pub replayed_bytes: u64,
    /// Operations applied to the index and to redb.
    pub ops: u64,
    /// Time spent loading the snapshot and replaying, µs.
    pub load_micros: u64,
    /// Time spent replaying the log, µs.
    pub replay_micros: u64,
    /// Whether the directory held the redb store's layout and was upgraded.
    pub upgraded: bool,
}

/// The log store. See the module docs.
pub struct LogStore {
    inner: Arc<Inner>,
    housekeeper: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    dir: PathBuf,
    log_dir: PathBuf,
    snap_dir: PathBuf,
    db_path: PathBuf,
    options: LogOptions,
    index: RwLock<Index>,
    writer: Mutex<WriterState>,
    db: RwLock<Option<Arc<Database>>>,
    db_failed: AtomicBool,
    /// Live snapshots by version.
    readers: Mutex<BTreeMap<u64, usize>>,
    files: Mutex<HashMap<u64, Arc<dyn StoreFile>>>,
    /// How far the log is durable (deferred commits, [`Store::sync`]).
    log: LogSync,
    store_id: StoreId,
    seq_floor: SeqFloor,
    challenges: ChallengeTable,
    house: Mutex<House>,
    house_wake: Condvar,
    opened: Mutex<OpenReport>,
    /// `(snapshot base, redb's durable applied)`, for reclaiming without
    /// the writer gate.
    bounds: Mutex<((u64, u64), (u64, u64))>,
    /// The background thread waits for the writer gate: the writer lets
    /// it in between two transactions.
    gate_wanted: AtomicBool,
}

/// What the housekeeper is asked to do.
#[derive(Debug, Default)]
struct House {
    stop: bool,
    snapshot: bool,
    spare: bool,
    busy_snapshot: bool,
}

/// The writer's state, behind the writer gate (one write transaction at a
/// time; the housekeeper takes it for each chunk of a snapshot).
#[derive(Debug)]
pub(crate) struct WriterState {
    active: ActiveSegment,
    /// `[start, end)` of a record that reached the file and did not commit.
    void_pending: Option<(u64, u64)>,
    /// The zero-filled next segment, once the housekeeper made it.
    spare: Option<(u64, Arc<dyn StoreFile>)>,
    /// The next segment id to use.
    next_segment: u64,
    /// Log bytes since the last snapshot began.
    since_snapshot: u64,
    /// The position of the snapshot before the latest durable one (or
    /// where the log begins): the log is kept from here, so that a restart
    /// whose latest snapshot does not load (a bit flip) replays from this
    /// one; segments before it are needed by no replay.
    snapshot_base: (u64, u64),
    /// The position of the latest durable snapshot (or where the log
    /// begins), what a restart loads.
    latest_snapshot: (u64, u64),
    /// redb's latest durable `applied`.
    redb_applied: (u64, u64),
    /// redb operations committed since its last checkpoint.
    redb_ops: u64,
    /// The size of the last snapshot.
    last_snapshot_bytes: u64,
    /// Where the next compaction step starts (a deposit slot).
    compaction_cursor: u32,
    /// The snapshot being copied, if any.
    snapshot: Option<snapshot::Copy>,
}

impl LogStore {
    /// Opens (or creates) the log store in `dir` with default options.
    ///
    /// # Errors
    /// As [`LogStore::open_with`].
    pub fn open(dir: impl AsRef<Path>) -> OpenResult<LogStore> {
        LogStore::open_with(dir, LogOptions::default())
    }

    /// Opens the store in `dir`, or creates one in a directory that holds
    /// none, or upgrades the redb store's layout found there (`migrate.rs`).
    /// Every file is accounted for first (`recovery.rs`): a missing or
    /// empty index while the log or a snapshot holds data, a snapshot or
    /// log segment the recovery needs but cannot find, an index older or
    /// newer than its log, a file of another store, or a store of another
    /// id than [`LogOptions::expect_store_id`] is refused with
    /// [`crate::OpenError::Damaged`], and nothing is written.
    ///
    /// # Errors
    /// [`crate::OpenError::Damaged`] as above; I/O and engine errors
    /// ([`crate::OpenError::Store`]).
    pub fn open_with(dir: impl AsRef<Path>, options: LogOptions) -> OpenResult<LogStore> {
        let dir = dir.as_ref();
        let inner =
            crate::contain::contain(&format!("opening the store in {}", dir.display()), || {
                recovery::open(dir, options)
            })?;
        let inner = Arc::new(inner);
        let housekeeper = if inner.options.background {
            let worker = Arc::clone(&inner);
            Some(
                std::thread::Builder::new()
                    .name("rltp-store-house".into())
                    .spawn(move || housekeeping::run(&worker))?,
            )
        } else {
            None
        };
        Ok(LogStore { inner, housekeeper })
    }

    /// This store's identity.
    pub fn store_id(&self) -> StoreId {
        self.inner.store_id
    }

    /// Every queue's next `seq` is above this (0 unless a restore raised it).
    pub fn seq_floor(&self) -> u64 {
        self.inner.seq_floor.get()
    }

    /// What the last open did.
    pub fn opened(&self) -> OpenReport {
        *lock(&self.inner.opened)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &LogOptions {
        &self.inner.options
    }

    /// Bytes the in-memory index holds (an estimate).
    pub fn index_bytes(&self) -> usize {
        self.inner.index_read().heap_bytes()
    }

    /// Raises the `seq` floor to `floor` (never lowers it), durably: from
    /// now on every queue's next `seq` is above it (`PROTOCOL.md` §7).
    ///
    /// # Errors
    /// [`StoreError`] as for a commit.
    pub fn raise_seq_floor(&self, floor: u64) -> StoreResult<()> {
        let mut w = self.inner.begin()?;
        let floor = self.inner.seq_floor.raised(floor);
        rs::put(w.redb()?, META, META_SEQ_FLOOR, &floor.to_be_bytes())?;
        w.force_durable = true;
        self.commit(w)?;
        self.inner.seq_floor.set(floor);
        Ok(())
    }

    /// Takes a snapshot now (what the background thread does when the log
    /// has grown), and reclaims what it frees. For tests and a clean
    /// shutdown.
    ///
    /// # Errors
    /// I/O errors writing it (nothing is lost: the log still holds it all).
    pub fn snapshot_now(&self) -> StoreResult<()> {
        snapshot::take(&self.inner)?;
        housekeeping::reclaim(&self.inner);
        Ok(())
    }

    /// One pass of the background work (the spare segment, a snapshot if
    /// due, reclaiming), for tests that run without the thread.
    ///
    /// # Errors
    /// I/O errors.
    pub fn housekeeping_step(&self) -> StoreResult<()> {
        housekeeping::step(&self.inner, true)
    }

    /// Reclaiming alone, as the background thread runs it between
    /// snapshots (for tests that run without the thread).
    pub fn reclaim_step(&self) {
        housekeeping::reclaim(&self.inner);
    }

    /// One bounded step of compaction (module docs): examines up to
    /// `max_scan` deposit slots from where the previous step stopped and
    /// moves the deposits of sparse sealed segments before the snapshot
    /// base into the active segment. Returns how many it moved.
    ///
    /// # Errors
    /// [`StoreError`] as for a commit.
    pub fn compact_step(&self, max_scan: usize) -> StoreResult<usize> {
        housekeeping::compact_step(&self.inner, max_scan, self)
    }

    /// Checks the whole store (`integrity.rs`): the index against itself,
    /// the index against one rebuilt from the files (snapshot and log),
    /// redb's own check, bindings and tombstones against their counters
    /// and the index, every file against what references it, and every
    /// deposit's SHA-256. O(data): for tests, the crash harnesses and
    /// restores. Needs `&mut self`: no transaction may be open.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first mismatch.
    pub fn integrity_check(&mut self) -> StoreResult<IntegrityReport> {
        let what = format!("checking the store in {}", self.inner.dir.display());
        let inner = &self.inner;
        crate::contain::contain(&what, || integrity::check(inner))
    }

    /// A consistent copy of the store's files for a backup
    /// ([`crate::backup`]): see [`LogBackup`].
    ///
    /// # Errors
    /// [`StoreError`] if the snapshot cannot be made.
    pub fn backup_source(&self) -> StoreResult<LogBackup> {
        LogBackup::take(self)
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        {
            let mut house = lock(&self.inner.house);
            house.stop = true;
        }
        self.inner.house_wake.notify_all();
        if let Some(handle) = self.housekeeper.take() {
            let _ = handle.join();
        }
        if self.inner.options.snapshot_at_close
            && !self.inner.db_failed.load(Ordering::SeqCst)
            && let Err(error) = snapshot::take(&self.inner)
        {
            tracing::warn!(%error, "no snapshot at close: the next open replays the log");
        }
    }
}

impl Inner {
    fn index_read(&self) -> RwLockReadGuard<'_, Index> {
        self.index
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    fn index_write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn db(&self) -> StoreResult<Arc<Database>> {
        self.db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(Arc::clone)
            .ok_or_else(|| {
                StoreError::Unavailable("the database is being reopened after an i/o error")
            })
    }

    /// The writer gate, for the background thread: the writer steps aside
    /// at its next transaction (a plain lock could starve behind it).
    fn gate(&self) -> MutexGuard<'_, WriterState> {
        self.gate_wanted.store(true, Ordering::SeqCst);
        let state = lock(&self.writer);
        self.gate_wanted.store(false, Ordering::SeqCst);
        state
    }

    fn publish_bounds(&self, state: &WriterState) {
        *lock(&self.bounds) = (state.snapshot_base, state.redb_applied);
    }

    fn oldest_reader(&self) -> Option<u64> {
        lock(&self.readers).keys().next().copied()
    }

    /// The file of segment `id` (cached).
    fn file(&self, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
        crate::segment::cached_file(&self.files, id, || {
            let path = self.log_dir.join(record::segment_name(id));
            self.options.fs.open(&path, crate::fs::Open::Existing)
        })
    }

    fn what(seq: u64, image: &DepImage) -> String {
        format!(
            "deposit {seq} of segment {:016x} offset {}",
            image.seg, image.off
        )
    }

    /// The bytes of `image`, checked, from the open transaction's buffer
    /// when `active` holds them.
    fn bytes(&self, image: &DepImage, active: Option<&ActiveSegment>) -> StoreResult<Vec<u8>> {
        let d = &image.deposit;
        if let Some(bytes) = active
            .filter(|a| a.id == u64::from(image.seg))
            .and_then(|a| a.buffered(u64::from(image.off), d.len))
        {
            if DepositId::of(&bytes) != d.id {
                return Err(corrupt(format!(
                    "{}: bytes do not match their id",
                    Inner::what(d.seq, image)
                )));
            }
            return Ok(bytes);
        }
        let file = self.file(u64::from(image.seg))?;
        crate::read_checked(
            &*file,
            u64::from(image.off),
            d.len,
            &d.id,
            &Inner::what(d.seq, image),
        )
    }

    fn deferred(&self, image: &DepImage, active: Option<&ActiveSegment>) -> DeferredBytes {
        if active.is_some_and(|a| {
            a.id == u64::from(image.seg)
                && a.buffered(u64::from(image.off), image.deposit.len)
                    .is_some()
        }) {
            return DeferredBytes::ready(self.bytes(image, active));
        }
        match self.file(u64::from(image.seg)) {
            Ok(file) => {
                let (offset, d) = (u64::from(image.off), image.deposit);
                let what = Inner::what(d.seq, image);
                DeferredBytes::later(move || {
                    crate::read_checked(&*file, offset, d.len, &d.id, &what)
                })
            }
            Err(e) => DeferredBytes::ready(Err(e)),
        }
    }

    /// `fdatasync`s the active segment (before a durable redb commit).
    fn sync_active(&self, state: &mut WriterState) -> StoreResult<()> {
        self.log.sync_active(&mut state.active)
    }

    /// Writes the void header over a record that reached the file but did
    /// not commit, and syncs it; until then no transaction begins.
    fn void_if_pending(&self, state: &mut WriterState) -> StoreResult<()> {
        let Some((start, end)) = state.void_pending else {
            return Ok(());
        };
        if end >= start + RECORD_HEADER as u64 {
            let body = u32::try_from(end - start - RECORD_HEADER as u64)
                .map_err(|_| corrupt("a void record over 4 GiB"))?;
            let header = record::void_header(state.active.id, start, body);
            state.active.overwrite_in_file(start, &header)?;
            if let Err(error) = state.active.file.sync_data() {
                crate::failure::fatal_sync_failure(&error);
            }
        }
        state.void_pending = None;
        Ok(())
    }

    /// After a failed batch: redb latches I/O errors, so it is closed and
    /// opened again (its pending commits promoted after the log is synced),
    /// and brought up to the log (`recovery::catch_up`).
    fn reopen_if_failed(&self, state: &mut WriterState) -> StoreResult<()> {
        if !self.db_failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.sync_active(state)?;
        let mut slot = self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(slot.take());
        let db = rs::open_db(&*self.options.fs, &self.db_path, self.options.cache_bytes).map_err(
            |e| StoreError::Redb(Context::new("reopening the database after a failure", e)),
        )?;
        *slot = Some(Arc::new(db));
        drop(slot);
        recovery::catch_up(self, state)?;
        self.db_failed.store(false, Ordering::SeqCst);
        tracing::warn!("the database was reopened after a failed batch");
        Ok(())
    }

    /// Seals the active segment and begins the next (the spare if ready),
    /// its header naming where this one's log ends.
    fn rotate(&self, state: &mut WriterState) -> StoreResult<()> {
        // Everything before the new segment is durable first: the syncer
        // skips what a later position's sync covers, and `durable` (a
        // position) could not tell two files apart.
        self.sync_active(state)?;
        let prev = (state.active.id, state.active.end());
        let (id, file) = match state.spare.take() {
            Some(spare) => spare,
            None => {
                let id = state.next_segment;
                let file = housekeeping::create_segment(self, id, false)?;
                (id, file)
            }
        };
        state.next_segment = state.next_segment.max(id + 1);
        let header = record::SegmentHeader {
            id,
            store_id: self.store_id.0,
            prev,
        };
        file.write_all_at(&header.encode(), 0)?;
        if let Err(error) = file.sync_data() {
            crate::failure::fatal_sync_failure(&error);
        }
        kill_point("rotate-header");
        lock(&self.files).insert(id, Arc::clone(&file));
        state.active = ActiveSegment::over(id, file, record::SEGMENT_HEADER);
        {
            let mut house = lock(&self.house);
            house.spare = true;
        }
        self.house_wake.notify_all();
        Ok(())
    }

    /// Begins a write transaction (the writer gate).
    fn begin(&self) -> StoreResult<LogWrite<'_>> {
        while self.gate_wanted.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let mut state = lock(&self.writer);
        self.void_if_pending(&mut state)?;
        self.reopen_if_failed(&mut state)?;
        if state.active.end() >= self.options.segment_bytes {
            self.rotate(&mut state)?;
        }
        if let Some(copy) = state.snapshot.as_mut() {
            // One chunk of the snapshot, between two transactions.
            copy.advance(&self.index_read());
        }
        Ok(LogWrite {
            store: self,
            state,
            redb: None,
            record: None,
            ops: 0,
            redb_ops: 0,
            committed: false,
            force_durable: false,
        })
    }

    /// The commit (module docs, "Commit order").
    fn commit_visible(&self, mut w: LogWrite<'_>) -> StoreResult<PendingSync> {
        let logged = match w.record.take() {
            Some((start, crc)) => {
                let end = w.state.active.end();
                let body = u32::try_from(end - start - RECORD_HEADER as u64)
                    .map_err(|_| corrupt("a log record over 4 GiB"))?;
                let header = record::batch_header(w.state.active.id, start, body, &crc);
                // Put back for the drop, should the write fail.
                w.record = Some((start, crc));
                w.state.active.overwrite(start, &header)?;
                w.state.active.flush()?;
                kill_point("record-written");
                w.record = None;
                // From here on the record is in the file: a failure voids it.
                w.state.void_pending = Some((start, end));
                end - start
            }
            None => 0,
        };
        let segment = w.state.active.id;
        let end = w.state.active.end();
        let opts = &self.options;
        let checkpoint = w.force_durable
            || (w.redb_ops > 0 && w.state.redb_ops + w.redb_ops >= opts.redb_checkpoint_ops);
        if checkpoint {
            self.sync_active(&mut w.state)?;
        }
        if checkpoint && w.redb.is_none() {
            w.redb()?;
        }
        if logged > 0 || w.redb.is_some() {
            // Before the commit makes it visible: a reader that sees it
            // finds its sync here.
            self.log.set_visible(&w.state.active.file, segment, end);
        }
        {
            let mut ix = self.index_write();
            // Nothing of the index's commit can fail after redb's.
            ix.settle()?;
            if let Some(mut txn) = w.redb.take() {
                let o = ix.occupancy;
                let counts = rs::cat(&[&o.bindings.to_be_bytes(), &o.tombstones.to_be_bytes()]);
                rs::put(&txn, META, META_COUNTS, &counts)?;
                let applied = rs::cat(&[&segment.to_be_bytes(), &end.to_be_bytes()]);
                rs::put(&txn, META, rs::META_APPLIED, &applied)?;
                let durability = if checkpoint {
                    Durability::Immediate
                } else {
                    Durability::None
                };
                txn.set_durability(durability).map_err(db_error)?;
                if let Err(e) = txn.commit() {
                    self.db_failed.store(true, Ordering::SeqCst);
                    return Err(db_error(e));
                }
            }
            let readers = lock(&self.readers);
            let oldest = readers.keys().next().copied();
            ix.commit(oldest.is_some(), oldest)?;
        }
        w.committed = true;
        w.state.void_pending = None;
        if checkpoint {
            w.state.redb_ops = 0;
            w.state.redb_applied = (segment, end);
            self.publish_bounds(&w.state);
        } else {
            w.state.redb_ops += w.redb_ops;
        }
        w.state.since_snapshot += logged;
        let threshold = opts.snapshot_log_bytes.max(w.state.last_snapshot_bytes);
        if w.state.since_snapshot >= threshold {
            let mut house = lock(&self.house);
            if !house.busy_snapshot {
                house.snapshot = true;
                drop(house);
                self.house_wake.notify_all();
            }
        }
        if logged == 0 || checkpoint {
            return Ok(PendingSync::durable());
        }
        Ok(LogSync::pending(&w.state.active.file, segment, end))
    }
}

impl Store for LogStore {
    type Read<'a> = LogRead<'a>;
    type Write<'a> = LogWrite<'a>;

    fn read(&self) -> StoreResult<LogRead<'_>> {
        let inner = &*self.inner;
        let ix = inner.index_read();
        let version = ix.committed;
        let redb = inner.db()?.begin_read().map_err(db_error)?;
        *lock(&inner.readers).entry(version).or_insert(0) += 1;
        drop(ix);
        Ok(LogRead {
            store: inner,
            version,
            redb,
        })
    }

    fn begin_write(&self) -> StoreResult<LogWrite<'_>> {
        self.inner.begin()
    }

    fn commit(&self, w: LogWrite<'_>) -> StoreResult<()> {
        let pending = self.commit_deferred(w)?;
        self.sync(pending)
    }

    fn commit_deferred(&self, w: LogWrite<'_>) -> StoreResult<PendingSync> {
        self.inner
            .commit_visible(w)
            .inspect_err(|_| self.after_failure())
    }

    fn sync(&self, pending: PendingSync) -> StoreResult<()> {
        self.inner.log.sync(pending);
        Ok(())
    }

    fn sync_visible(&self) -> StoreResult<()> {
        self.inner.log.sync_visible();
        Ok(())
    }

    fn after_failure(&self) {
        self.inner.db_failed.store(true, Ordering::SeqCst);
    }

    fn challenges(&self) -> &ChallengeTable {
        &self.inner.challenges
    }

    /// One bounded compaction step (the background thread does the rest).
    fn maintenance_step(&self) -> StoreResult<()> {
        self.compact_step(crate::MAINTENANCE_SCAN).map(drop)
    }

    fn size(&self) -> StoreResult<crate::StoreSize> {
        let inner = &self.inner;
        let fs = &*inner.options.fs;
        let files = |dir: &Path| -> StoreResult<(u64, u64)> {
            let mut count_bytes = (0u64, 0u64);
            for name in fs.list(dir)? {
                if let Some(len) = fs.file_len(&dir.join(&name))? {
                    count_bytes.0 += 1;
                    count_bytes.1 += len;
                }
            }
            Ok(count_bytes)
        };
        let (segments, log_bytes) = files(&inner.log_dir)?;
        let (_, snapshot_bytes) = files(&inner.snap_dir)?;
        let redb_bytes = fs
            .file_len(&inner.dir.join(crate::store_id::INDEX_FILE))?
            .unwrap_or(0);
        let (base, active) = {
            let state = inner.gate();
            (state.snapshot_base.0, state.active.id)
        };
        let ix = inner.index_read();
        let live_bytes = ix.segs.values().map(|s| s.bytes).sum();
        let compactable = ix
            .segs
            .iter()
            .filter(|(id, s)| housekeeping::compactable(inner, u64::from(**id), s, base, active))
            .count() as u64;
        Ok(crate::StoreSize {
            disk_bytes: Some(log_bytes + snapshot_bytes + redb_bytes),
            log_bytes: Some(log_bytes),
            live_bytes: Some(live_bytes),
            segments: Some(segments),
            compactable_segments: Some(compactable),
            snapshot_bytes: Some(snapshot_bytes),
            index_bytes: Some(ix.heap_bytes() as u64),
            oldest_deposit_at: ix.oldest_admitted_at(),
        })
    }
}
