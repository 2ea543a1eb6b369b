//! The embedded durable [`Store`]: an operation log in append-only segment
//! files (every committed transaction's mutations, envelope bytes inside;
//! `src/oplog.rs`) and redb for bindings, indexes and small metadata,
//! made durable at checkpoints (see `storage/README.md`).
//!
//! ## On-disk layout
//! ```text
//! <dir>/carrier.redb              redb database (tables below)
//! <dir>/segments/<id:016x>.seg    the operation log: records with envelope bytes inside (crate::segment, crate::oplog)
//! ```
//!
//! ## Commit order
//! A write transaction appends each mutation to its log record in the active
//! segment (through a buffer) and applies it to a redb write transaction.
//! [`Store::commit_deferred`] then writes the record, the counters
//! (occupancy, queue bytes, per-segment live counts and extents; sealed
//! segments whose live count reached 0 move to `segment_gc`) and `applied`,
//! and commits redb: non-durably, or at a checkpoint (every
//! [`RedbOptions::checkpoint_ops`] operations, rotation, replay) durably
//! after `fdatasync`ing the segment. [`Store::sync`] `fdatasync`s the
//! record: only then is the transaction durable and may be answered.
//! Drained segments are unlinked after a durable commit, once no older read
//! snapshot can reference them; the next write transaction drops their
//! `segment_gc` rows. A failed `fdatasync` of the log stops the process
//! (`fatal_sync_failure`).
//!
//! ## Recovery (what opening does)
//! Work bounded by the checkpoint interval, never by the data: redb's own
//! recovery to its last durable commit (with quick-repair on by default,
//! so a crash does not force redb to walk the whole file); the replay of
//! the previous active segment's records after `applied`, up to the first
//! position that does not hold a valid record, in one durable transaction;
//! then one small transaction that starts a **new** active segment
//! (`next_segment`) and moves the previous one to `segment_gc` if it holds
//! nothing; and the unlinking of whatever `segment_gc` lists. Bytes past the
//! last valid record (a batch that never committed) are never referenced;
//! they are reclaimed with their segment. The segment file for a new id is
//! created *before* the transaction that records it, so an orphan file
//! (its header, nothing else) can only exist at `next_segment`; it is
//! adopted when that id is used. A segment file is never truncated.
//!
//! ## A store knows its own files
//! Before anything is written, opening accounts for every file: the index
//! (`carrier.redb`) and the segment files present against the `segments`
//! and `segment_gc` tables. Refused with [`crate::OpenError::Damaged`]:
//! - an index that is missing, empty or holds no store while any segment
//!   file holds a log record (a fresh store there would orphan them);
//! - a segment file the index does not know, other than the header-only
//!   orphan at `next_segment` (an index older than its log, or a file of
//!   another store);
//! - a segment the index records but whose file is gone;
//! - a store whose `store_id` is not [`RedbOptions::expect_store_id`], or
//!   no store where one is expected;
//! - a panic of redb on damaged pages during the open (contained).
//!
//! A fresh store starts its log after the highest segment id present, so a
//! segment id is never used twice in one directory. A segment file shorter
//! than its committed extent is logged at open; the deposits past its end
//! are quarantined when read (engine). The store's identity, 16 random
//! bytes drawn at creation, is `meta` `store_id` ([`RedbStore::store_id`]).
//!
//! ## Reclaiming space
//! A segment is deleted whole once every deposit in it has left (live count
//! 0) and it is no longer active. [`RedbStore::compact_step`] copies the
//! live deposits of sparse sealed segments into the active one in bounded
//! chunks (one short write transaction each), so stragglers never pin a
//! segment and never cause a pause.
//!
//! ## After an I/O error
//! redb latches an I/O failure: once a write, `set_len` or sync of its file
//! fails (a full disk, say), every later operation of that `Database`
//! answers `PreviousIo` until it is closed and opened again. A failed batch
//! therefore marks the store ([`Store::after_failure`], and every failed
//! commit), and the next write transaction first syncs the log (closing
//! redb makes its pending non-durable commits durable) and reopens the
//! database — redb's own recovery, then the replay of the log, the same as
//! a start.
//! A read snapshot of the old handle keeps its file locked, so a reopen
//! that finds it still open fails retriably and is tried again by the next
//! transaction. A single I/O error therefore never wedges the store.
//!
//! Live challenges are held in memory (see the crate docs).

mod backup;
mod check;
mod compact;
mod log;
mod open;
pub(crate) mod oplog;
mod replay;
mod txn;

pub use backup::{Importer, Snapshot, parse_segment_file_name, segment_file_name};
pub use txn::{RedbRead, RedbWrite};
// The shared pieces, at the paths they had when they lived here.
pub use crate::store_id::{INDEX_FILE, Inspection, IntegrityReport, StoreId, store_in_use};

use crate::OpenResult;
use crate::cursor::Cursor;
use crate::failure::{Context, corrupt, damaged, db_error, fatal_sync_failure, lock};
use crate::fs::{StoreFile, StoreFs};
use crate::log_sync::LogSync;
use crate::schema::query;
use crate::schema::*;
use crate::segment::{self, ActiveSegment};
use crate::store_id::missing_index;
use crate::{
    Binding, BindingPhases, ChallengeTable, DeclarationRecord, DepartureRecord, Deposit, DepositId,
    Due, Ms, Occupancy, PendingSync, ReadTxn, SeqFloor, Store, StoreError, StoreResult, Tombstone,
    WriteTxn,
};
use log::{put_applied, record_active, retire_segment};
use oplog::tag;
use redb::{Database, Durability, ReadTransaction, ReadableDatabase, WriteTransaction};
use rltp_proofs::multikey::Rkid;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Where envelope bytes are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Append-only segment files, fsync'd before the redb commit that
    /// references them (the default).
    Segments,
    /// Inside the redb `deposits` value (the comparison design measured by
    /// the store benchmark; readable by either placement).
    Inline,
}

/// Tuning of a [`RedbStore`].
#[derive(Debug, Clone)]
pub struct RedbOptions {
    /// Where envelope bytes go.
    pub placement: Placement,
    /// The active segment is sealed and a new one started once it reaches
    /// this many bytes (checked between transactions). Default 64 MiB.
    pub segment_bytes: u64,
    /// redb quick-repair: recovery after a crash reads the saved allocator
    /// state instead of walking the whole file (start-up does not grow with
    /// the data), at the price of a two-phase commit. Default `true`.
    pub quick_repair: bool,
    /// A sealed segment is compacted when its live bytes are below this
    /// percentage of its extent (at least `segment_bytes`). Default 25.
    pub compact_below_percent: u8,
    /// A commit is a durable redb checkpoint once this many logged
    /// operations have been committed since the last one (every other
    /// commit is made durable by its operation-log record alone; see
    /// `src/oplog.rs`). Bounds what an open replays. `1` makes every
    /// commit durable in redb too. Default 4 096 (`storage/README.md`,
    /// "The checkpoint interval": shorter intervals cut the tail latency
    /// while the store is small, but cost a third of the throughput once
    /// the index outgrows the interval).
    pub checkpoint_ops: u64,
    /// … or once this many bytes of log (envelopes included) have been
    /// committed since the last one. Default 16 MiB.
    pub checkpoint_bytes: u64,
    /// redb's in-process page cache, bytes (read cache and the pages of
    /// non-durable commits together; past it, pages are read again from
    /// the file through the kernel's page cache). Bounds the carrier's
    /// resident memory as the store grows. Default 64 MiB.
    pub cache_bytes: usize,
    /// The file layer every byte goes through (default: the operating
    /// system's, [`crate::fs::RealFs`]; the power-loss harness passes a
    /// [`crate::fault_fs::FaultFs`]).
    pub fs: Arc<dyn StoreFs>,
    /// The store this directory must hold (the carrier's data-dir
    /// lineage): when set, opening refuses a store of another id, and
    /// refuses to create one where none is ([`crate::OpenError::Damaged`]).
    /// `None`: open what is there, or create a store in a directory that
    /// holds none.
    pub expect_store_id: Option<StoreId>,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            placement: Placement::Segments,
            segment_bytes: 64 << 20,
            quick_repair: true,
            compact_below_percent: 25,
            checkpoint_ops: 4_096,
            checkpoint_bytes: 16 << 20,
            cache_bytes: 64 << 20,
            fs: crate::fs::real(),
            expect_store_id: None,
        }
    }
}

/// What the last replay of the operation log applied (`src/oplog.rs`):
/// at open, and after a failed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayReport {
    /// Records read (void records included).
    pub records: u64,
    /// Operations applied.
    pub ops: u64,
    /// Log bytes read.
    pub bytes: u64,
}

/// The outcome of one [`RedbStore::compact_step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionStep {
    /// Deposit index entries examined.
    pub scanned: usize,
    /// Deposits copied into the active segment.
    pub moved: usize,
    /// Their bytes.
    pub moved_bytes: u64,
    /// The pass over the index finished (or there was nothing sparse); the
    /// next step starts a new pass.
    pub pass_complete: bool,
}

/// The redb + segments store. See the module docs for layout and rules.
pub struct RedbStore {
    /// The redb handle, replaced by a fresh one after an I/O failure
    /// (module docs); `None` only while such a reopen has not succeeded.
    db: RwLock<Option<Arc<Database>>>,
    /// `<dir>/carrier.redb`.
    db_path: PathBuf,
    /// A batch or commit failed: reopen before the next write transaction.
    db_failed: AtomicBool,
    segments_dir: PathBuf,
    options: RedbOptions,
    writer: Mutex<WriterState>,
    files: Mutex<HashMap<u64, Arc<dyn StoreFile>>>,
    /// This store's identity (`meta` `store_id`).
    store_id: StoreId,
    /// Every queue's next `seq` is above this (`meta` `seq_floor`, raised
    /// by a restore: [`RedbStore::raise_seq_floor`]).
    seq_floor: SeqFloor,
    readers: Mutex<Readers>,
    challenges: ChallengeTable,
    last_replay: Mutex<ReplayReport>,
    /// How far the log is durable (deferred commits, [`Store::sync`]).
    log: LogSync,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("segments_dir", &self.segments_dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct WriterState {
    active: ActiveSegment,
    /// Segments dropped by commit `gen`, waiting for older readers.
    deferred: Vec<(u64, u64)>,
    /// Unlinked segments whose `segment_gc` rows the next transaction drops.
    unlinked: Vec<u64>,
    /// Where the compaction pass resumes (a `deposits` key).
    compaction_cursor: Option<Vec<u8>>,
    /// Segments drained by non-durable commits: unlinked only after the
    /// next durable one (until then a crash recovers a state that
    /// references them, before replay removes those references).
    drained_undurable: Vec<u64>,
    /// Logged operations and log bytes committed since the last durable
    /// commit (the checkpoint policy, [`RedbOptions::checkpoint_ops`]).
    unchecked_ops: u64,
    unchecked_bytes: u64,
    /// `[start, end)` of a log record that reached the file but did not
    /// commit, until a void header over it is durable. While set, no write
    /// transaction begins (replay must be able to step over it).
    void_pending: Option<(u64, u64)>,
}

/// Live read snapshots by the commit generation they started at.
#[derive(Debug, Default)]
struct Readers {
    committed: u64,
    live: BTreeMap<u64, usize>,
}

impl RedbStore {
    /// Looks at the store in `dir` without writing anything
    /// ([`crate::store_id::inspect`]).
    ///
    /// # Errors
    /// As [`crate::store_id::inspect`].
    pub fn inspect(dir: impl AsRef<Path>) -> StoreResult<Inspection> {
        crate::store_id::inspect(dir)
    }

    /// This store's identity (drawn at creation, kept in every backup).
    pub fn store_id(&self) -> StoreId {
        self.store_id
    }

    /// Every queue's next `seq` is above this (0 unless a restore raised it).
    pub fn seq_floor(&self) -> u64 {
        self.seq_floor.get()
    }

    /// Raises the `seq` floor to `floor` (never lowers it), in one durable
    /// transaction: from now on every queue's next `seq` is above it,
    /// whatever its last one was. A restore calls this, because the
    /// restored copy does not know the seqs handed out after its snapshot,
    /// and a client holding `after = n` from those would never see new
    /// deposits numbered `≤ n` (`PROTOCOL.md` §7, "seq is never reused").
    ///
    /// # Errors
    /// [`StoreError`] as for a commit.
    pub fn raise_seq_floor(&self, floor: u64) -> StoreResult<()> {
        let mut w = self.begin_write()?;
        let floor = self.seq_floor.raised(floor);
        put(w.txn()?, META, META_SEQ_FLOOR, &floor.to_be_bytes())?;
        w.force_durable = true;
        self.commit(w)?;
        self.seq_floor.set(floor);
        Ok(())
    }

    /// Makes everything committed so far durable in redb itself (a
    /// checkpoint), so that the next open replays nothing. For a clean
    /// shutdown; never needed for durability.
    ///
    /// # Errors
    /// [`StoreError`] as for a commit.
    pub fn checkpoint(&self) -> StoreResult<()> {
        let mut w = self.begin_write()?;
        w.force_durable = true;
        self.commit(w)
    }

    /// What the last replay of the operation log applied.
    pub fn last_replay(&self) -> ReplayReport {
        *lock(&self.last_replay)
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &RedbOptions {
        &self.options
    }

    /// The directory holding the segment files.
    pub fn segments_dir(&self) -> &Path {
        &self.segments_dir
    }

    /// The current redb handle.
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
}

impl RedbStore {
    /// [`Store::commit_deferred`]'s body (the caller marks the store on
    /// failure).
    ///
    /// 1. The transaction's log record is closed (its header written) and
    ///    written to the active segment.
    /// 2. At a checkpoint (the policy says so, or `force_durable`): the
    ///    segment is `fdatasync`ed and redb commits durably; nothing is left
    ///    to wait for. Otherwise redb commits non-durably (visible, held in
    ///    memory), and the returned [`PendingSync`] is the `fdatasync` that
    ///    makes the record, and so the transaction, durable.
    /// 3. Either way redb records `applied` = the end of that record.
    /// 4. Segments drained by durable commits are unlinked once no older
    ///    snapshot can read them.
    fn commit_visible(&self, mut w: RedbWrite<'_>) -> StoreResult<PendingSync> {
        let active = w.state.active.id;
        // The active segment's extent is rewritten by every commit.
        w.seg_adjust(active, 0, 0)?;
        let logged = match &w.record {
            Some((start, hasher)) => {
                let start = *start;
                let end = w.state.active.end();
                let body = end - start - oplog::HEADER as u64;
                let header = oplog::batch_header(start, body, hasher.clone());
                w.state.active.overwrite(start, &header)?;
                end - start
            }
            None => 0,
        };
        let drained = w.flush_counters()?;
        let options = &self.options;
        let durable = w.force_durable
            || w.state.unchecked_ops + w.ops >= options.checkpoint_ops
            || w.state.unchecked_bytes + logged >= options.checkpoint_bytes;
        if durable {
            self.sync_active(&mut w.state)?;
        } else {
            w.state.active.flush()?;
        }
        let end = w.state.active.end();
        put_applied(w.txn()?, active, end)?;
        if !durable {
            // Before the commit makes the batch visible: a reader that sees
            // it must find its sync here (`sync_visible`). If the commit
            // then fails, syncing its (voided) record is harmless.
            self.log.set_visible(&w.state.active.file, active, end);
        }
        let mut txn = w.txn.take().ok_or(StoreError::Closed)?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability).map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        w.committed = true;
        let generation = self.bump_generation();
        let ops = w.ops;
        let state = &mut *w.state;
        state.unlinked.clear();
        state.drained_undurable.extend(drained);
        let pending = if durable {
            RedbStore::durable_done(state, generation);
            PendingSync::durable()
        } else {
            state.unchecked_ops += ops;
            state.unchecked_bytes += logged;
            LogSync::pending(&state.active.file, active, end)
        };
        self.collect_garbage(state);
        Ok(pending)
    }

    /// A write transaction over `txn` holding the writer lock.
    fn write_with<'a>(
        &'a self,
        state: MutexGuard<'a, WriterState>,
        txn: WriteTransaction,
        logging: bool,
    ) -> StoreResult<RedbWrite<'a>> {
        let occupancy = query::occupancy(&txn)?;
        Ok(RedbWrite {
            store: self,
            txn: Some(txn),
            state,
            occupancy,
            occupancy_dirty: false,
            queues: HashMap::new(),
            segments: HashMap::new(),
            committed: false,
            logging,
            record: None,
            ops: 0,
            force_durable: false,
        })
    }
}

impl Store for RedbStore {
    type Read<'a> = RedbRead<'a>;
    type Write<'a> = RedbWrite<'a>;

    fn read(&self) -> StoreResult<RedbRead<'_>> {
        // Registering under the readers lock orders this snapshot against
        // the generation bump that follows every commit (see
        // `collect_garbage`).
        let mut readers = lock(&self.readers);
        let generation = readers.committed;
        let txn = self.db()?.begin_read().map_err(db_error)?;
        *readers.live.entry(generation).or_insert(0) += 1;
        Ok(RedbRead {
            store: self,
            txn,
            generation,
        })
    }

    fn begin_write(&self) -> StoreResult<RedbWrite<'_>> {
        let mut state = lock(&self.writer);
        self.void_if_pending(&mut state)?;
        if self.db_failed.load(Ordering::SeqCst) {
            // Closing redb promotes its pending non-durable commits to
            // durable ones: the log records they reference must be durable
            // first.
            self.sync_active(&mut state)?;
        }
        if self.reopen_if_failed()? {
            // redb is back at its last durable commit: replay the log.
            state = self.replay(state).inspect_err(|_| self.after_failure())?;
        }
        self.collect_garbage(&mut state);
        if self.options.placement == Placement::Segments
            && state.active.end() >= self.options.segment_bytes
        {
            self.rotate(&mut state)?;
        }
        let txn = begin(self.db()?.as_ref(), self.options.quick_repair)?;
        for id in &state.unlinked {
            del(&txn, SEGMENT_GC, &id.to_be_bytes())?;
        }
        self.write_with(state, txn, true)
    }

    fn commit(&self, w: RedbWrite<'_>) -> StoreResult<()> {
        let pending = self.commit_deferred(w)?;
        self.sync(pending)
    }

    fn sync_visible(&self) -> StoreResult<()> {
        self.log.sync_visible();
        Ok(())
    }

    fn commit_deferred(&self, w: RedbWrite<'_>) -> StoreResult<PendingSync> {
        self.commit_visible(w).inspect_err(|_| self.after_failure())
    }

    /// `fdatasync`s the segment of `pending` unless a sync already covered
    /// it, under the durable lock. A failure stops the process
    /// (`fatal_sync_failure`), so this returns only `Ok`.
    fn sync(&self, pending: PendingSync) -> StoreResult<()> {
        self.log.sync(pending);
        Ok(())
    }

    fn after_failure(&self) {
        self.db_failed.store(true, Ordering::SeqCst);
    }

    fn challenges(&self) -> &ChallengeTable {
        &self.challenges
    }

    /// Compacts sparse segments in bounded steps (see
    /// [`RedbStore::compact_step`]); then, if segments drained since the
    /// last durable commit wait to be unlinked, makes a checkpoint so that
    /// their space comes back even when traffic stops.
    fn maintenance_step(&self) -> StoreResult<()> {
        self.compact_step(crate::MAINTENANCE_SCAN)?;
        if !lock(&self.writer).drained_undurable.is_empty() {
            self.checkpoint()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `inspect` writes nothing: an absent store stays absent (no
    /// directory made), an open one is reported in use, a closed one is
    /// read with its id and format, and its files are unchanged.
    #[test]
    fn inspect_reads_a_store_without_writing() -> StoreResult<()> {
        let dir = tempfile::tempdir()?;
        let store_dir = dir.path().join("store");
        assert_eq!(RedbStore::inspect(&store_dir)?, Inspection::Absent);
        assert!(!store_dir.exists());
        let store = RedbStore::open(&store_dir)?;
        let id = store.store_id();
        assert_eq!(RedbStore::inspect(&store_dir)?, Inspection::InUse);
        drop(store);
        let index = store_dir.join("carrier.redb");
        let before = std::fs::read(&index)?;
        assert_eq!(
            RedbStore::inspect(&store_dir)?,
            Inspection::Held {
                store_id: Some(id),
                format: Some(REDB_FORMAT)
            }
        );
        assert_eq!(std::fs::read(&index)?, before);
        Ok(())
    }
}
