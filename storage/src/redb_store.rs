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
//! ## Tables and their encodings
//! Every key and value is a byte string written big-endian, so that redb's
//! lexicographic key order is the numeric order the store needs.
//! `rkid` is the 32 raw X25519 key bytes, `id` the 32 SHA-256 bytes of the
//! envelope, `seq`/instants/counters are u64 BE, `len` is u32 BE.
//!
//! | table | key | value |
//! |---|---|---|
//! | `bindings` | rkid | phase u8 (0 live, 1 closing) ‖ deadline u64 (0 when live) ‖ generation u64 ‖ principal \[32\] ‖ last_collection_at u64 (57 B) |
//! | `tombstones` | rkid | generation u64 ‖ released_at u64 (16 B) |
//! | `eviction` | released_at u64 ‖ rkid (40 B) | empty — eviction order (§5a.3) |
//! | `deposits` | rkid ‖ seq u64 (40 B) | segment u64 ‖ offset u64 ‖ len u32 ‖ id \[32\] ‖ admitted_at u64 ‖ give_up_at u64 (68 B) \[‖ envelope bytes when inline\] |
//! | `identity` | rkid ‖ id (64 B) | seq u64 |
//! | `queues` | rkid | next_seq u64 (last seq handed out) ‖ bytes u64 |
//! | `departures` | rkid ‖ id (64 B) | kind u8 (0 concluded, 1 given-up) ‖ forget_at u64 |
//! | `due` | at u64 ‖ tag u8 ‖ rkid ‖ extra | empty; tag 0 `OrphanExpiry`, 1 `Deadline`, 2 `GiveUp` (extra = seq u64), 3 `Forget` (extra = id) |
//! | `segments` | segment u64 | live_count u64 ‖ live_bytes u64 ‖ end u64 (committed extent) |
//! | `segment_gc` | segment u64 | empty — segments to unlink (pending deletions) |
//! | `quarantine` | rkid ‖ seq u64 | id \[32\] ‖ len u32 ‖ admitted_at u64 ‖ give_up_at u64 ‖ detected_at u64 ‖ segment u64 ‖ offset u64 ‖ reason (UTF-8) — deposits found damaged and given up (`WriteTxn::quarantine`) |
//! | `meta` | ASCII name | `format` u32 = 2 (1: before the operation log, upgraded on open); `applied` segment u64 ‖ offset u64 (the log records before it are in this state); `occupancy` total_bytes ‖ bindings ‖ deposits ‖ tombstones ‖ elastic_bytes (5×u64); `declaration` revision u64 ‖ document; `active_segment` u64; `next_segment` u64; `store_id` \[16\]; `seq_floor` u64 (every next `seq` is above it; raised by a restore) |
//!
//! The `due` key order equals the order of `(Ms, Due)` (variant order, then
//! fields), and the `eviction` key order equals `(released_at, rkid)`, so
//! both indexes are read front to back. A deposit stored inline (the
//! benchmark's comparison design, [`Placement::Inline`]) has segment
//! `u64::MAX` and offset 0.
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
//! and `segment_gc` tables. Refused with [`StoreError::Damaged`]:
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

use crate::fs::{StoreFile, StoreFs};
use crate::oplog::{self, Cursor, tag};
use crate::segment::{self, ActiveSegment};
use crate::{
    Binding, Challenge, DeclarationRecord, Departure, DepartureRecord, Deposit, DepositId, Due, Ms,
    Occupancy, PendingSync, Phase, ReadTxn, Store, StoreError, StoreResult, Tombstone, WriteTxn,
};
use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};
use rltp_proofs::multikey::Rkid;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// The redb file of an embedded store's directory (both layouts).
pub const INDEX_FILE: &str = "carrier.redb";

pub(crate) type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

pub(crate) const BINDINGS: Def = TableDefinition::new("bindings");
pub(crate) const TOMBSTONES: Def = TableDefinition::new("tombstones");
pub(crate) const EVICTION: Def = TableDefinition::new("eviction");
pub(crate) const DEPOSITS: Def = TableDefinition::new("deposits");
pub(crate) const IDENTITY: Def = TableDefinition::new("identity");
pub(crate) const QUEUES: Def = TableDefinition::new("queues");
pub(crate) const DEPARTURES: Def = TableDefinition::new("departures");
pub(crate) const DUE: Def = TableDefinition::new("due");
pub(crate) const SEGMENTS: Def = TableDefinition::new("segments");
pub(crate) const SEGMENT_GC: Def = TableDefinition::new("segment_gc");
pub(crate) const META: Def = TableDefinition::new("meta");
pub(crate) const QUARANTINE: Def = TableDefinition::new("quarantine");
const ALL_TABLES: [Def; 12] = [
    BINDINGS, TOMBSTONES, EVICTION, DEPOSITS, IDENTITY, QUEUES, DEPARTURES, DUE, SEGMENTS,
    SEGMENT_GC, META, QUARANTINE,
];

pub(crate) const META_FORMAT: &[u8] = b"format";
pub(crate) const META_OCCUPANCY: &[u8] = b"occupancy";
pub(crate) const META_DECLARATION: &[u8] = b"declaration";
pub(crate) const META_ACTIVE: &[u8] = b"active_segment";
pub(crate) const META_NEXT_SEGMENT: &[u8] = b"next_segment";
pub(crate) const META_APPLIED: &[u8] = b"applied";
pub(crate) const META_STORE_ID: &[u8] = b"store_id";
pub(crate) const META_SEQ_FLOOR: &[u8] = b"seq_floor";
/// Format 2 writes operation-log records into segments; a format-1 store
/// (bare envelope bytes in segments, every commit durable) is upgraded in
/// place on open, and an older binary refuses the result.
const FORMAT_VERSION: u32 = 2;

/// The segment number that marks a deposit stored inline in redb.
pub(crate) const INLINE: u64 = u64::MAX;
/// Length of the fixed part of a `deposits` value.
pub(crate) const DEPOSIT_HEADER: usize = 68;

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
    /// refuses to create one where none is ([`StoreError::Damaged`]).
    /// `None`: open what is there, or create a store in a directory that
    /// holds none.
    pub expect_store_id: Option<StoreId>,
}

/// A store's identity: 16 random bytes drawn when it is created, kept in
/// its `meta` table (and so in every backup of it). A data dir records it
/// to recognise its own store (`deploy/OPERATIONS.md`, "damaged data dir").
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreId(pub [u8; 16]);

impl StoreId {
    /// A fresh random id.
    pub fn random() -> StoreId {
        StoreId(rand::random())
    }

    /// Parses the 32 lowercase hex digits of [`StoreId`]'s `Display`.
    pub fn parse(text: &str) -> Option<StoreId> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(StoreId(bytes))
    }
}

impl std::fmt::Display for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Debug for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreId({self})")
    }
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

/// What [`RedbStore::integrity_check`] counted and found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IntegrityReport {
    /// Held bindings.
    pub bindings: u64,
    /// Binding tombstones.
    pub tombstones: u64,
    /// Held deposits (each read back and its SHA-256 verified).
    pub deposits: u64,
    /// Σ deposit lengths (bytes), equal to the occupancy counter.
    pub bytes: u64,
    /// Recorded segments (including the active one).
    pub segments: u64,
    /// rkids holding both a binding and a tombstone (the engine must keep
    /// this 0; the store itself does not forbid it).
    pub binding_and_tombstone: u64,
    /// Held deposits whose bytes fail their check (unreadable, or not the
    /// bytes their id names), each named by seq, segment and offset: not
    /// yet met by an operation, which would quarantine them.
    pub damaged: Vec<String>,
    /// Quarantine records (deposits found damaged and given up), each
    /// named by seq, segment, offset, instant and the failed check.
    pub quarantined: Vec<String>,
}

impl IntegrityReport {
    /// Nothing damaged, nothing quarantined, no rkid with both a binding
    /// and a tombstone.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty() && self.quarantined.is_empty() && self.binding_and_tombstone == 0
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

/// Deposit index entries one background maintenance step examines.
const MAINTENANCE_SCAN: usize = 4_096;

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
    seq_floor: std::sync::atomic::AtomicU64,
    readers: Mutex<Readers>,
    challenges: crate::challenges::ChallengeTable,
    last_replay: Mutex<ReplayReport>,
    /// `(segment, offset)`: every log byte before it is durable. Shared by
    /// the writer and the syncer (deferred commits, [`Store::sync`]) and
    /// held across every `fdatasync` of the log.
    durable: Mutex<(u64, u64)>,
    /// The sync that makes the last visible commit durable.
    visible: Mutex<PendingSync>,
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

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn engine<E: std::fmt::Display>(error: E) -> StoreError {
    StoreError::Engine(error.to_string())
}

/// An `fdatasync` of the operation log failed. What reached the disk is
/// then unknown (the kernel may have dropped the dirty pages), while
/// transactions after the last durable one are already visible and redb
/// would make them durable when it closes. So the process stops at once,
/// without closing anything (as PostgreSQL does on a failed fsync): the
/// restart recovers exactly the durable log (`storage/README.md`, "Commit
/// order"), and the supervisor restarts it (`Restart=on-failure`).
pub(crate) fn fatal_sync_failure(error: &std::io::Error) -> ! {
    tracing::error!(%error, "fdatasync of the operation log failed: stopping the carrier; the restart recovers what is durable");
    eprintln!("rltp-storage: fdatasync of the operation log failed ({error}); aborting");
    std::process::abort()
}

pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Corrupt(what.into())
}

pub(crate) fn damaged(what: impl Into<String>) -> StoreError {
    StoreError::Damaged(what.into())
}

/// The refusal of an index that is missing, empty or unformatted where a
/// store is expected (module docs, "A store knows its own files").
pub(crate) fn missing_index(
    db_path: &Path,
    exists: bool,
    with_records: &[u64],
    expected: Option<StoreId>,
) -> StoreError {
    let state = if exists {
        "is empty or holds no store"
    } else {
        "is missing"
    };
    let mut why = Vec::new();
    if !with_records.is_empty() {
        let ids: Vec<String> = with_records.iter().map(|id| format!("{id:016x}")).collect();
        why.push(format!(
            "the operation log holds records in {} segment file(s) ({})",
            ids.len(),
            ids.join(", ")
        ));
    }
    if let Some(id) = expected {
        why.push(format!("this data dir's store is {id}"));
    }
    damaged(format!(
        "the index {} {state}, but {}: a fresh store here would lose what they hold, so none is made",
        db_path.display(),
        why.join(", and ")
    ))
}

/// Checks the segment files present (`files`: id, length) against the
/// index: every recorded segment must exist, and every file must be
/// recorded, pending deletion, or the empty orphan at `next_segment`
/// (module docs, "A store knows its own files").
fn account_for_segments(
    txn: &WriteTransaction,
    files: &[(u64, u64)],
    segments_dir: &Path,
) -> StoreResult<()> {
    let next = get_u64(txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
    let mut known = HashSet::new();
    txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
        known.insert(u64_at(k, 0)?);
        Ok(true)
    })?;
    let present: HashMap<u64, u64> = files.iter().copied().collect();
    let mut missing = Vec::new();
    txn.scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        let id = u64_at(k, 0)?;
        known.insert(id);
        let stat = decode_seg(v)?;
        match present.get(&id) {
            None => missing.push(format!(
                "{id:016x} ({} deposits, {} bytes)",
                stat.live, stat.bytes
            )),
            Some(&len) if len < stat.end => tracing::error!(
                segment = format!("{id:016x}"),
                length = len,
                extent = stat.end,
                "a segment file is shorter than its committed extent: the deposits past its end are damaged and will be quarantined when read"
            ),
            Some(_) => {}
        }
        Ok(true)
    })?;
    if !missing.is_empty() {
        return Err(damaged(format!(
            "segment file(s) recorded in the index are missing from {}: {}",
            segments_dir.display(),
            missing.join(", ")
        )));
    }
    let unknown: Vec<String> = files
        .iter()
        .filter(|(id, len)| !(known.contains(id) || *id >= next && *len <= segment::HEADER_LEN))
        .map(|(id, len)| format!("{id:016x} ({len} bytes)"))
        .collect();
    if !unknown.is_empty() {
        return Err(damaged(format!(
            "segment file(s) in {} are not known to the index (the index is older than its log, \
             or they belong to another store): {}",
            segments_dir.display(),
            unknown.join(", ")
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Encodings
// ---------------------------------------------------------------------------

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> StoreResult<u64> {
    bytes
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| corrupt(format!("short record: {} bytes", bytes.len())))
}

pub(crate) fn arr32_at(bytes: &[u8], at: usize) -> StoreResult<[u8; 32]> {
    bytes
        .get(at..at + 32)
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| corrupt(format!("short record: {} bytes", bytes.len())))
}

pub(crate) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn key_seq(rkid: &Rkid, seq: u64) -> Vec<u8> {
    cat(&[rkid.as_bytes(), &seq.to_be_bytes()])
}

fn key_id(rkid: &Rkid, id: &DepositId) -> Vec<u8> {
    cat(&[rkid.as_bytes(), &id.0])
}

pub(crate) fn encode_binding(b: &Binding) -> Vec<u8> {
    let (phase, deadline) = match b.phase {
        Phase::Live => (0u8, 0u64),
        Phase::Closing { deadline } => (1, deadline),
    };
    cat(&[
        &[phase],
        &deadline.to_be_bytes(),
        &b.generation.to_be_bytes(),
        &b.principal,
        &b.last_collection_at.to_be_bytes(),
    ])
}

pub(crate) fn decode_binding(v: &[u8]) -> StoreResult<Binding> {
    let phase = match v.first() {
        Some(0) => Phase::Live,
        Some(1) => Phase::Closing {
            deadline: u64_at(v, 1)?,
        },
        other => return Err(corrupt(format!("binding phase {other:?}"))),
    };
    Ok(Binding {
        phase,
        generation: u64_at(v, 9)?,
        principal: arr32_at(v, 17)?,
        last_collection_at: u64_at(v, 49)?,
    })
}

pub(crate) fn encode_tombstone(t: &Tombstone) -> Vec<u8> {
    cat(&[&t.generation.to_be_bytes(), &t.released_at.to_be_bytes()])
}

pub(crate) fn decode_tombstone(v: &[u8]) -> StoreResult<Tombstone> {
    Ok(Tombstone {
        generation: u64_at(v, 0)?,
        released_at: u64_at(v, 8)?,
    })
}

pub(crate) fn eviction_key(released_at: Ms, rkid: &Rkid) -> Vec<u8> {
    cat(&[&released_at.to_be_bytes(), rkid.as_bytes()])
}

/// A `deposits` value: metadata plus where the bytes are.
pub(crate) struct Stored {
    pub(crate) deposit: Deposit,
    pub(crate) segment: u64,
    pub(crate) offset: u64,
}

fn encode_deposit(d: &Deposit, segment: u64, offset: u64, inline: &[u8]) -> Vec<u8> {
    cat(&[
        &segment.to_be_bytes(),
        &offset.to_be_bytes(),
        &d.len.to_be_bytes(),
        &d.id.0,
        &d.admitted_at.to_be_bytes(),
        &d.give_up_at.to_be_bytes(),
        inline,
    ])
}

pub(crate) fn decode_deposit(seq: u64, v: &[u8]) -> StoreResult<Stored> {
    let len = v
        .get(16..20)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| corrupt("short deposit record"))?;
    Ok(Stored {
        deposit: Deposit {
            seq,
            id: DepositId(arr32_at(v, 20)?),
            len,
            admitted_at: u64_at(v, 52)?,
            give_up_at: u64_at(v, 60)?,
        },
        segment: u64_at(v, 0)?,
        offset: u64_at(v, 8)?,
    })
}

fn seq_of_key(k: &[u8]) -> StoreResult<u64> {
    u64_at(k, 32)
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueMeta {
    pub(crate) next_seq: u64,
    pub(crate) bytes: u64,
}

fn encode_queue(q: &QueueMeta) -> Vec<u8> {
    cat(&[&q.next_seq.to_be_bytes(), &q.bytes.to_be_bytes()])
}

pub(crate) fn decode_queue(v: &[u8]) -> StoreResult<QueueMeta> {
    Ok(QueueMeta {
        next_seq: u64_at(v, 0)?,
        bytes: u64_at(v, 8)?,
    })
}

pub(crate) fn encode_departure(r: &DepartureRecord) -> Vec<u8> {
    let kind = match r.departure {
        Departure::Concluded => 0u8,
        Departure::GivenUp => 1,
    };
    cat(&[&[kind], &r.forget_at.to_be_bytes()])
}

pub(crate) fn decode_departure(v: &[u8]) -> StoreResult<DepartureRecord> {
    let departure = match v.first() {
        Some(0) => Departure::Concluded,
        Some(1) => Departure::GivenUp,
        other => return Err(corrupt(format!("departure kind {other:?}"))),
    };
    Ok(DepartureRecord {
        departure,
        forget_at: u64_at(v, 1)?,
    })
}

pub(crate) fn due_key(at: Ms, due: &Due) -> Vec<u8> {
    let at = at.to_be_bytes();
    match due {
        Due::OrphanExpiry(rkid) => cat(&[&at, &[0], rkid.as_bytes()]),
        Due::Deadline(rkid) => cat(&[&at, &[1], rkid.as_bytes()]),
        Due::GiveUp(rkid, seq) => cat(&[&at, &[2], rkid.as_bytes(), &seq.to_be_bytes()]),
        Due::Forget(rkid, id) => cat(&[&at, &[3], rkid.as_bytes(), &id.0]),
    }
}

pub(crate) fn decode_due(k: &[u8]) -> StoreResult<(Ms, Due)> {
    let at = u64_at(k, 0)?;
    let rkid = Rkid::from_bytes(arr32_at(k, 9)?);
    let due = match (k.get(8), k.len()) {
        (Some(0), 41) => Due::OrphanExpiry(rkid),
        (Some(1), 41) => Due::Deadline(rkid),
        (Some(2), 49) => Due::GiveUp(rkid, u64_at(k, 41)?),
        (Some(3), 73) => Due::Forget(rkid, DepositId(arr32_at(k, 41)?)),
        (tag, len) => return Err(corrupt(format!("due entry tag {tag:?}, {len} bytes"))),
    };
    Ok((at, due))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SegStat {
    live: u64,
    bytes: u64,
    end: u64,
}

fn encode_seg(s: &SegStat) -> Vec<u8> {
    cat(&[
        &s.live.to_be_bytes(),
        &s.bytes.to_be_bytes(),
        &s.end.to_be_bytes(),
    ])
}

fn decode_seg(v: &[u8]) -> StoreResult<SegStat> {
    Ok(SegStat {
        live: u64_at(v, 0)?,
        bytes: u64_at(v, 8)?,
        end: u64_at(v, 16)?,
    })
}

fn encode_occupancy(o: &Occupancy) -> Vec<u8> {
    cat(&[
        &o.total_bytes.to_be_bytes(),
        &o.bindings.to_be_bytes(),
        &o.deposits.to_be_bytes(),
        &o.tombstones.to_be_bytes(),
        &o.elastic_bytes.to_be_bytes(),
    ])
}

pub(crate) fn decode_occupancy(v: &[u8]) -> StoreResult<Occupancy> {
    Ok(Occupancy {
        total_bytes: u64_at(v, 0)?,
        bindings: u64_at(v, 8)?,
        deposits: u64_at(v, 16)?,
        tombstones: u64_at(v, 24)?,
        elastic_bytes: u64_at(v, 32)?,
    })
}

// ---------------------------------------------------------------------------
// Table access, shared by read snapshots and write transactions
// ---------------------------------------------------------------------------

pub(crate) type Range<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// Read access to the tables of a redb transaction (read or write).
pub(crate) trait Tables {
    /// Applies `f` to the value under `key`.
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>>;
    /// Rows of table `def`.
    fn count(&self, def: Def) -> StoreResult<u64>;
    /// Calls `f` on each entry of `range` in key order until it returns
    /// `false`.
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()>;
}

fn get_in<T, R>(
    table: &T,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> StoreResult<R>,
) -> StoreResult<Option<R>>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    match table.get(key).map_err(engine)? {
        Some(guard) => f(guard.value()).map(Some),
        None => Ok(None),
    }
}

fn scan_in<T>(
    table: &T,
    range: Range<'_>,
    mut f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
) -> StoreResult<()>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    for item in table.range::<&[u8]>(range).map_err(engine)? {
        let (k, v) = item.map_err(engine)?;
        if !f(k.value(), v.value())? {
            break;
        }
    }
    Ok(())
}

impl Tables for ReadTransaction {
    fn count(&self, def: Def) -> StoreResult<u64> {
        use redb::ReadableTableMetadata as _;
        self.open_table(def).map_err(engine)?.len().map_err(engine)
    }
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>> {
        get_in(&self.open_table(def).map_err(engine)?, key, f)
    }
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        scan_in(&self.open_table(def).map_err(engine)?, range, f)
    }
}

impl Tables for WriteTransaction {
    fn count(&self, def: Def) -> StoreResult<u64> {
        use redb::ReadableTableMetadata as _;
        self.open_table(def).map_err(engine)?.len().map_err(engine)
    }
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>> {
        get_in(&self.open_table(def).map_err(engine)?, key, f)
    }
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        scan_in(&self.open_table(def).map_err(engine)?, range, f)
    }
}

pub(crate) fn put(
    txn: &WriteTransaction,
    def: Def,
    key: &[u8],
    value: &[u8],
) -> StoreResult<Option<Vec<u8>>> {
    let mut table = txn.open_table(def).map_err(engine)?;
    let old = table.insert(key, value).map_err(engine)?;
    Ok(old.map(|g| g.value().to_vec()))
}

pub(crate) fn del(txn: &WriteTransaction, def: Def, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
    let mut table = txn.open_table(def).map_err(engine)?;
    let old = table.remove(key).map_err(engine)?;
    Ok(old.map(|g| g.value().to_vec()))
}

pub(crate) fn get_u64(t: &impl Tables, def: Def, key: &[u8]) -> StoreResult<Option<u64>> {
    t.get_with(def, key, |v| u64_at(v, 0))
}

pub(crate) fn first_key(
    t: &impl Tables,
    def: Def,
    range: Range<'_>,
) -> StoreResult<Option<Vec<u8>>> {
    let mut found = None;
    t.scan(def, range, |k, _| {
        found = Some(k.to_vec());
        Ok(false)
    })?;
    Ok(found)
}

/// The queries of [`ReadTxn`] over stored tables.
pub(crate) mod query {
    use super::*;

    pub(crate) fn binding(t: &impl Tables, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        t.get_with(BINDINGS, rkid.as_bytes(), decode_binding)
    }
    pub(crate) fn tombstone(t: &impl Tables, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        t.get_with(TOMBSTONES, rkid.as_bytes(), decode_tombstone)
    }
    pub(crate) fn oldest_tombstone(t: &impl Tables) -> StoreResult<Option<(Rkid, Tombstone)>> {
        let Some(key) = first_key(t, EVICTION, (Bound::Unbounded, Bound::Unbounded))? else {
            return Ok(None);
        };
        let rkid = Rkid::from_bytes(arr32_at(&key, 8)?);
        match tombstone(t, &rkid)? {
            Some(found) => Ok(Some((rkid, found))),
            None => Err(corrupt("eviction entry without tombstone")),
        }
    }
    pub(super) fn stored(t: &impl Tables, rkid: &Rkid, seq: u64) -> StoreResult<Option<Stored>> {
        t.get_with(DEPOSITS, &key_seq(rkid, seq), |v| decode_deposit(seq, v))
    }
    pub(super) fn deposits(
        t: &impl Tables,
        rkid: &Rkid,
        after: Option<u64>,
        limit: usize,
    ) -> StoreResult<Vec<Deposit>> {
        let start = key_seq(rkid, after.map_or(0, |a| a.saturating_add(1)));
        let stop = key_seq(rkid, u64::MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        t.scan(
            DEPOSITS,
            (Bound::Included(&start), Bound::Included(&stop)),
            |k, v| {
                out.push(decode_deposit(seq_of_key(k)?, v)?.deposit);
                Ok(out.len() < limit)
            },
        )?;
        Ok(out)
    }
    pub(super) fn deposit_by_id(
        t: &impl Tables,
        rkid: &Rkid,
        id: &DepositId,
    ) -> StoreResult<Option<Deposit>> {
        match get_u64(t, IDENTITY, &key_id(rkid, id))? {
            Some(seq) => Ok(stored(t, rkid, seq)?.map(|s| s.deposit)),
            None => Ok(None),
        }
    }
    pub(super) fn queue(t: &impl Tables, rkid: &Rkid) -> StoreResult<QueueMeta> {
        Ok(t.get_with(QUEUES, rkid.as_bytes(), decode_queue)?
            .unwrap_or_default())
    }
    pub(super) fn occupancy(t: &impl Tables) -> StoreResult<Occupancy> {
        Ok(t.get_with(META, META_OCCUPANCY, decode_occupancy)?
            .unwrap_or_default())
    }
    pub(super) fn departure(
        t: &impl Tables,
        rkid: &Rkid,
        id: &DepositId,
    ) -> StoreResult<Option<DepartureRecord>> {
        t.get_with(DEPARTURES, &key_id(rkid, id), decode_departure)
    }
    pub(super) fn due(t: &impl Tables, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let stop = upto.checked_add(1).map(u64::to_be_bytes);
        let end = match &stop {
            Some(stop) => Bound::Excluded(&stop[..]),
            None => Bound::Unbounded,
        };
        t.scan(DUE, (Bound::Unbounded, end), |k, _| {
            out.push(decode_due(k)?);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }
    pub(super) fn next_due(t: &impl Tables) -> StoreResult<Option<Ms>> {
        match first_key(t, DUE, (Bound::Unbounded, Bound::Unbounded))? {
            Some(key) => u64_at(&key, 0).map(Some),
            None => Ok(None),
        }
    }
    pub(crate) fn declaration(t: &impl Tables) -> StoreResult<Option<DeclarationRecord>> {
        t.get_with(META, META_DECLARATION, |v| {
            Ok(DeclarationRecord {
                revision: u64_at(v, 0)?,
                document: v.get(8..).unwrap_or_default().to_vec(),
            })
        })
    }
    pub(super) fn seg_stat(t: &impl Tables, segment: u64) -> StoreResult<Option<SegStat>> {
        t.get_with(SEGMENTS, &segment.to_be_bytes(), decode_seg)
    }
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// What a read-only look at a store directory found ([`RedbStore::inspect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inspection {
    /// No index (`carrier.redb` absent or empty): the first start makes one.
    Absent,
    /// Another process (a running carrier) holds the store open: it could
    /// not be read, and that is no fault.
    InUse,
    /// The store was not closed cleanly: the next start recovers it (which
    /// writes), so it was not read further.
    NeedsRecovery,
    /// The store opened read-only.
    Held {
        /// Its identity, `None` for a store made before stores had ids.
        store_id: Option<StoreId>,
        /// Its format version, `None` for a database without a store in it.
        format: Option<u32>,
    },
}

impl RedbStore {
    /// Looks at the store in `dir` without writing anything: no directory,
    /// file, lock upgrade or recovery is made (`rltp-carrier serve
    /// --check`). It reads the index read-only (redb's
    /// [`redb::ReadOnlyDatabase`]) and its `meta` table.
    ///
    /// # Errors
    /// [`StoreError::Engine`] or [`StoreError::Io`] when the index cannot be
    /// read, [`StoreError::Corrupt`] for a format this build does not know.
    pub fn inspect(dir: impl AsRef<Path>) -> StoreResult<Inspection> {
        let db_path = dir.as_ref().join(INDEX_FILE);
        match std::fs::metadata(&db_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Inspection::Absent),
            Err(e) => return Err(StoreError::Io(e)),
            Ok(m) if m.len() == 0 => return Ok(Inspection::Absent),
            Ok(_) => {}
        }
        let db = match redb::ReadOnlyDatabase::open(&db_path) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Ok(Inspection::InUse),
            Err(redb::DatabaseError::RepairAborted) => return Ok(Inspection::NeedsRecovery),
            Err(e) => return Err(engine(format!("{}: {e}", db_path.display()))),
        };
        let txn = db.begin_read().map_err(engine)?;
        let meta = match txn.open_table(META) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => {
                return Ok(Inspection::Held {
                    store_id: None,
                    format: None,
                });
            }
            Err(e) => return Err(engine(e)),
        };
        let format = match meta.get(META_FORMAT).map_err(engine)? {
            Some(v) => Some(
                <[u8; 4]>::try_from(v.value())
                    .map(u32::from_be_bytes)
                    .map_err(|_| corrupt("meta format is not 4 bytes"))?,
            ),
            None => None,
        };
        // Both embedded layouts keep their `meta` here: the redb store's
        // (1, 2) and the log store's, which `serve` opens (upgrading the
        // others).
        if let Some(version) = format
            && version != 1
            && version != FORMAT_VERSION
            && version != crate::log_store::FORMAT
        {
            return Err(corrupt(format!(
                "store format {version}, expected 1, {FORMAT_VERSION} (the redb layout) or {} (the log store)",
                crate::log_store::FORMAT
            )));
        }
        let store_id = meta
            .get(META_STORE_ID)
            .map_err(engine)?
            .and_then(|v| <[u8; 16]>::try_from(v.value()).ok().map(StoreId));
        Ok(Inspection::Held { store_id, format })
    }
}

impl RedbStore {
    /// Opens (or creates) the store in `dir` with default options.
    ///
    /// # Errors
    /// [`StoreError`] on I/O or database errors, or a database of another
    /// format version ([`StoreError::Corrupt`]).
    pub fn open(dir: impl AsRef<Path>) -> StoreResult<RedbStore> {
        RedbStore::open_with(dir, RedbOptions::default())
    }

    /// Opens the store in `dir`, or creates one in a directory that holds
    /// none. Does work independent of the amount of data held (see the
    /// module docs, "Recovery"), plus one listing of the segment files.
    ///
    /// **Every file is accounted for first** (module docs, "A store knows
    /// its own files"): an index (`carrier.redb`) that is missing, empty or
    /// unformatted while the log holds records, a segment file the index
    /// does not know (an index older than its log), a segment the index
    /// records but that is gone, or a store of another id than
    /// [`RedbOptions::expect_store_id`] is refused with
    /// [`StoreError::Damaged`], and nothing is written. A fresh store
    /// never truncates or reuses a segment file: its numbering starts after
    /// the highest id present. A panic of the storage engine on damaged
    /// pages is contained and reported the same way.
    ///
    /// # Errors
    /// As [`RedbStore::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: RedbOptions) -> StoreResult<RedbStore> {
        let dir = dir.as_ref();
        crate::contain::contain(&format!("opening the store in {}", dir.display()), || {
            RedbStore::open_inner(dir, options)
        })
    }

    fn open_inner(dir: &Path, options: RedbOptions) -> StoreResult<RedbStore> {
        let fs = Arc::clone(&options.fs);
        let segments_dir = segment::segments_dir(dir);
        fs.create_dir_all(&segments_dir)?;
        let db_path = dir.join(INDEX_FILE);
        let index_len = fs.file_len(&db_path)?;
        let (files, strays) = segment::scan(&*fs, &segments_dir)?;
        if let Some(name) = strays.first() {
            return Err(damaged(format!(
                "{} holds {name:?}, which is not a segment file",
                segments_dir.display()
            )));
        }
        let with_records: Vec<u64> = files
            .iter()
            .filter(|(_, len)| *len > segment::HEADER_LEN)
            .map(|(id, _)| *id)
            .collect();
        let absent = index_len.is_none_or(|len| len == 0);
        if absent && (!with_records.is_empty() || options.expect_store_id.is_some()) {
            return Err(missing_index(
                &db_path,
                index_len.is_some(),
                &with_records,
                options.expect_store_id,
            ));
        }
        let db = open_db(&*fs, &db_path, options.cache_bytes)?;
        // The index's own name is durable before anything depends on it.
        fs.sync_dir(dir)?;
        let txn = begin(&db, options.quick_repair)?;
        for def in ALL_TABLES {
            txn.open_table(def).map_err(engine)?;
        }
        let format = txn.get_with(META, META_FORMAT, |v| {
            Ok(v.try_into().map(u32::from_be_bytes).ok())
        })?;
        let fresh = format.is_none();
        if fresh && (!with_records.is_empty() || options.expect_store_id.is_some()) {
            // A redb file with no store in it (never committed, or reset).
            return Err(missing_index(
                &db_path,
                true,
                &with_records,
                options.expect_store_id,
            ));
        }
        match format {
            None | Some(Some(1)) => {
                put(&txn, META, META_FORMAT, &FORMAT_VERSION.to_be_bytes())?;
            }
            Some(Some(FORMAT_VERSION)) => {}
            Some(other) => return Err(corrupt(format!("store format {other:?}, expected 1 or 2"))),
        }
        let held_id = txn.get_with(META, META_STORE_ID, |v| {
            Ok(<[u8; 16]>::try_from(v).ok().map(StoreId))
        })?;
        let store_id = match (held_id.flatten(), options.expect_store_id) {
            (Some(held), Some(expected)) if held != expected => {
                return Err(damaged(format!(
                    "{} holds store {held}, but this data dir's store is {expected} \
                     (a store from another data dir, or one restored from another carrier's backup)",
                    db_path.display()
                )));
            }
            (None, Some(expected)) => {
                return Err(damaged(format!(
                    "{} holds a store without an id, but this data dir's store is {expected}",
                    db_path.display()
                )));
            }
            (Some(held), _) => held,
            (None, None) => {
                // A fresh store, or one made before stores had ids.
                let id = StoreId::random();
                put(&txn, META, META_STORE_ID, &id.0)?;
                id
            }
        };
        let seq_floor = get_u64(&txn, META, META_SEQ_FLOOR)?.unwrap_or(0);
        let mut gc = Vec::new();
        txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
            gc.push(u64_at(k, 0)?);
            Ok(true)
        })?;
        if fresh {
            // Nothing of a fresh store's may collide with what is there:
            // its log starts after the highest id present, and the files
            // present (headers only, checked above) are reclaimed.
            let next = files.last().map_or(1, |(id, _)| id + 1);
            put(&txn, META, META_NEXT_SEGMENT, &next.to_be_bytes())?;
            for (id, _) in &files {
                put(&txn, SEGMENT_GC, &id.to_be_bytes(), &[])?;
                gc.push(*id);
            }
        } else {
            account_for_segments(&txn, &files, &segments_dir)?;
        }
        let previous = get_u64(&txn, META, META_ACTIVE)?;
        let active = match previous {
            // The log resumes in the previous active segment, after the
            // records redb already holds (or, for a format-1 store, after
            // its committed extent: nothing to replay).
            Some(id) => {
                let at = match applied(&txn)? {
                    Some((segment, at)) if segment == id => at,
                    _ => query::seg_stat(&txn, id)?.map_or(segment::HEADER_LEN, |s| s.end),
                };
                ActiveSegment::reopen(&*fs, &segments_dir, id, at)?
            }
            None => {
                let next = get_u64(&txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
                // The file first: if the transaction below never commits,
                // the orphan (a header only) sits at `next`, which the next
                // open or rotation adopts.
                let active = ActiveSegment::create(&*fs, &segments_dir, next)?;
                record_active(&txn, next)?;
                active
            }
        };
        txn.commit().map_err(engine)?;
        for &id in &gc {
            segment::remove(&*fs, &segments_dir, id)?;
        }
        fs.sync_dir(&segments_dir)?;
        let files = HashMap::from([(active.id, Arc::clone(&active.file))]);
        // What the reopened segment holds up to `at` was synced by `reopen`.
        let through = (active.id, active.end());
        let store = RedbStore {
            db: RwLock::new(Some(Arc::new(db))),
            db_path,
            db_failed: AtomicBool::new(false),
            segments_dir,
            options,
            writer: Mutex::new(WriterState {
                active,
                deferred: Vec::new(),
                unlinked: gc,
                compaction_cursor: None,
                drained_undurable: Vec::new(),
                unchecked_ops: 0,
                unchecked_bytes: 0,
                void_pending: None,
            }),
            files: Mutex::new(files),
            store_id,
            seq_floor: std::sync::atomic::AtomicU64::new(seq_floor),
            readers: Mutex::new(Readers::default()),
            challenges: crate::challenges::ChallengeTable::default(),
            last_replay: Mutex::new(ReplayReport::default()),
            durable: Mutex::new(through),
            visible: Mutex::new(PendingSync::default()),
        };
        if previous.is_some() {
            // Replay what the log holds beyond redb's state, then seal the
            // segment and start the next one (every open does).
            let mut state = store.replay(lock(&store.writer))?;
            store.rotate(&mut state)?;
            // No snapshot exists yet: an empty previous segment goes now.
            store.collect_garbage(&mut state);
        }
        Ok(store)
    }

    /// This store's identity (drawn at creation, kept in every backup).
    pub fn store_id(&self) -> StoreId {
        self.store_id
    }

    /// Every queue's next `seq` is above this (0 unless a restore raised it).
    pub fn seq_floor(&self) -> u64 {
        self.seq_floor.load(Ordering::SeqCst)
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
        let floor = floor.max(self.seq_floor());
        put(w.txn()?, META, META_SEQ_FLOOR, &floor.to_be_bytes())?;
        w.force_durable = true;
        self.commit(w)?;
        self.seq_floor.store(floor, Ordering::SeqCst);
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

    /// Replays the operation-log records of the active segment that redb's
    /// state does not hold yet (those after `applied`), in one durable
    /// transaction; the log then continues after the last valid record
    /// (`src/oplog.rs`). Work is bounded by the checkpoint interval.
    /// Takes and returns the writer lock.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if a valid record holds an operation that
    /// cannot be decoded or applied; I/O and engine errors.
    fn replay<'a>(
        &'a self,
        state: MutexGuard<'a, WriterState>,
    ) -> StoreResult<MutexGuard<'a, WriterState>> {
        let mut state = state;
        let txn = begin(self.db()?.as_ref(), self.options.quick_repair)?;
        let from = match applied(&txn)? {
            Some((segment, at)) if segment == state.active.id => at,
            // A rotation whose commit reported an error but landed: redb's
            // state already names the next segment (nothing was written to
            // it yet), so the log continues there.
            Some((segment, at)) if segment > state.active.id => {
                let active =
                    ActiveSegment::reopen(&*self.options.fs, &self.segments_dir, segment, at)?;
                lock(&self.files).insert(active.id, Arc::clone(&active.file));
                *lock(&self.durable) = (active.id, at);
                state.active = active;
                at
            }
            _ => return Ok(state),
        };
        // The rows of segments unlinked since the last commit go in this
        // one (as in every write transaction, `begin_write`).
        for id in &state.unlinked {
            del(&txn, SEGMENT_GC, &id.to_be_bytes())?;
        }
        let mut w = self.write_with(state, txn, false)?;
        let file = Arc::clone(&w.state.active.file);
        let len = file.len()?;
        let (mut at, mut records, mut ops) = (from, 0u64, 0u64);
        while let Some(record) = oplog::read_record(&*file, len, at)? {
            if record.kind == oplog::BATCH {
                ops += w.apply_record(&record)?;
            }
            records += 1;
            at = record.end;
        }
        w.state.active.resume_at(at);
        w.force_durable = true;
        self.commit(w)?;
        if records > 0 {
            tracing::info!(records, ops, from, to = at, "replayed the operation log");
        }
        *lock(&self.last_replay) = ReplayReport {
            records,
            ops,
            bytes: at - from,
        };
        Ok(lock(&self.writer))
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
                StoreError::Engine("the database is being reopened after an i/o error".into())
            })
    }

    /// If a batch or commit failed since the last transaction, replaces the
    /// redb handle by a freshly opened one (module docs, "After an I/O
    /// error"). Call with the writer lock held.
    ///
    /// # Errors
    /// [`StoreError`] if the reopen fails (a snapshot of the old handle
    /// still holds the file, or the file cannot be read); the next write
    /// transaction tries again.
    fn reopen_if_failed(&self) -> StoreResult<bool> {
        if !self.db_failed.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let mut slot = self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The old handle goes first: redb refuses a second open of a file.
        drop(slot.take());
        let db =
            open_db(&*self.options.fs, &self.db_path, self.options.cache_bytes).map_err(|e| {
                StoreError::Engine(format!("reopening the database after a failure: {e}"))
            })?;
        *slot = Some(Arc::new(db));
        self.db_failed.store(false, Ordering::SeqCst);
        tracing::warn!("the database was reopened after a failed batch");
        Ok(true)
    }

    /// Writes the void header over a log record that reached the file but
    /// did not commit, and syncs it (module docs of `src/oplog.rs`).
    /// Until that succeeds no write transaction may begin.
    fn void_if_pending(&self, state: &mut WriterState) -> StoreResult<()> {
        let Some((start, end)) = state.void_pending else {
            return Ok(());
        };
        let body = end.saturating_sub(start + oplog::HEADER as u64);
        if end >= start + oplog::HEADER as u64 {
            state
                .active
                .overwrite_in_file(start, &oplog::void_header(start, body))
                .inspect_err(|error| {
                    tracing::error!(%error, start, end, "voiding an uncommitted log record failed; will retry");
                })?;
            // A failed sync may have dropped the page: as for any log sync.
            if let Err(error) = state.active.file.sync_data() {
                fatal_sync_failure(&error);
            }
        }
        state.void_pending = None;
        Ok(())
    }

    /// `fdatasync`s the active segment under the durable lock (before a
    /// durable redb commit, which must never reference log bytes that are
    /// not durable). A failure stops the process (`fatal_sync_failure`).
    fn sync_active(&self, state: &mut WriterState) -> StoreResult<()> {
        let mut durable = lock(&self.durable);
        // Everything buffered reaches the file first (an ordinary write
        // error is an ordinary failed batch).
        state.active.flush()?;
        if let Err(error) = state.active.sync() {
            fatal_sync_failure(&error);
        }
        *durable = (state.active.id, state.active.end());
        Ok(())
    }

    /// After a durable commit at `generation`: segments drained since the
    /// last one may be unlinked once no older snapshot reads them, and the
    /// checkpoint counters start again.
    fn durable_done(state: &mut WriterState, generation: u64) {
        let drained = std::mem::take(&mut state.drained_undurable);
        state
            .deferred
            .extend(drained.into_iter().map(|id| (id, generation)));
        state.unchecked_ops = 0;
        state.unchecked_bytes = 0;
    }

    /// Seals the active segment and starts `next_segment` (one small
    /// durable transaction; the file is created first).
    fn rotate(&self, state: &mut WriterState) -> StoreResult<()> {
        // Its durable commit makes every earlier non-durable one durable:
        // their log records must be durable first.
        self.sync_active(state)?;
        let txn = begin(self.db()?.as_ref(), self.options.quick_repair)?;
        let next = get_u64(&txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
        let old = state.active.id;
        let drained = query::seg_stat(&txn, old)?.is_none_or(|s| s.live == 0);
        if drained {
            retire_segment(&txn, old)?;
        }
        let active = ActiveSegment::create(&*self.options.fs, &self.segments_dir, next)?;
        record_active(&txn, next)?;
        txn.commit().map_err(engine)?;
        lock(&self.files).insert(active.id, Arc::clone(&active.file));
        *lock(&self.durable) = (active.id, active.end());
        state.active = active;
        let generation = self.bump_generation();
        if drained {
            state.drained_undurable.push(old);
        }
        RedbStore::durable_done(state, generation);
        Ok(())
    }

    fn bump_generation(&self) -> u64 {
        let mut readers = lock(&self.readers);
        readers.committed += 1;
        readers.committed
    }

    /// Unlinks deferred segments that no live read snapshot can reference.
    fn collect_garbage(&self, state: &mut WriterState) {
        if state.deferred.is_empty() {
            return;
        }
        let oldest_reader = lock(&self.readers).live.keys().next().copied();
        let mut removed = Vec::new();
        state.deferred.retain(|&(id, generation)| {
            if oldest_reader.is_some_and(|oldest| oldest < generation) {
                return true;
            }
            lock(&self.files).remove(&id);
            match segment::remove(&*self.options.fs, &self.segments_dir, id) {
                Ok(()) => {
                    removed.push(id);
                    false
                }
                Err(error) => {
                    tracing::warn!(%error, segment = id, "segment unlink failed; will retry");
                    true
                }
            }
        });
        if removed.is_empty() {
            return;
        }
        // The `segment_gc` rows are dropped only once the unlinks are durable.
        match self.options.fs.sync_dir(&self.segments_dir) {
            Ok(()) => state.unlinked.extend(removed),
            Err(error) => tracing::warn!(%error, "segment directory sync failed"),
        }
    }

    fn file(&self, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
        let mut files = lock(&self.files);
        if let Some(file) = files.get(&id) {
            return Ok(Arc::clone(file));
        }
        let file =
            segment::open_for_read(&*self.options.fs, &self.segments_dir, id).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    corrupt(format!("segment {id:016x} is missing: {e}"))
                } else {
                    StoreError::Io(e)
                }
            })?;
        files.insert(id, Arc::clone(&file));
        Ok(file)
    }

    /// Reads and verifies the bytes of `deposit` of `rkid`, looking in the
    /// open write transaction's buffer first when `active` is given.
    fn bytes_of(
        &self,
        t: &impl Tables,
        rkid: &Rkid,
        deposit: &Deposit,
        active: Option<&ActiveSegment>,
    ) -> StoreResult<Vec<u8>> {
        let found = t.get_with(DEPOSITS, &key_seq(rkid, deposit.seq), |v| {
            let stored = decode_deposit(deposit.seq, v)?;
            let inline = (stored.segment == INLINE)
                .then(|| v.get(DEPOSIT_HEADER..).unwrap_or_default().to_vec());
            Ok((stored, inline))
        })?;
        let Some((stored, inline)) = found else {
            return Err(corrupt(format!("no bytes for deposit {}", deposit.seq)));
        };
        let bytes = match inline {
            Some(bytes) => bytes,
            None => match active
                .filter(|a| a.id == stored.segment)
                .and_then(|a| a.buffered(stored.offset, stored.deposit.len))
            {
                Some(bytes) => bytes,
                None => segment::read_at(
                    &*self.file(stored.segment)?,
                    stored.offset,
                    stored.deposit.len,
                )
                .map_err(|e| {
                    // A short segment is damage; any other read error is
                    // the disk's, and may pass.
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        corrupt(format!(
                            "deposit {} of segment {:016x} offset {}: the segment is cut short ({e})",
                            deposit.seq, stored.segment, stored.offset
                        ))
                    } else {
                        StoreError::Io(e)
                    }
                })?,
            },
        };
        if bytes.len() != stored.deposit.len as usize || DepositId::of(&bytes) != stored.deposit.id
        {
            return Err(corrupt(format!(
                "deposit {} of segment {:016x} offset {}: bytes do not match their id",
                deposit.seq, stored.segment, stored.offset
            )));
        }
        Ok(bytes)
    }

    /// Runs redb's integrity check, then verifies every counter against the
    /// data it counts: occupancy = Σ deposit lengths and counts, per-queue
    /// bytes, per-segment live counts and bytes, the identity and eviction
    /// indexes, every referenced segment file, and every deposit's SHA-256.
    /// Reads everything (O(data)): for tests, the crash harnesses and
    /// restores, never at start-up. Needs exclusive access (no open
    /// transactions). Held deposits whose bytes fail their check are named
    /// in [`IntegrityReport::damaged`], quarantine records in
    /// [`IntegrityReport::quarantined`] ([`IntegrityReport::is_clean`]).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first mismatch of a counter or an
    /// index; [`StoreError::Damaged`] if redb panics on a damaged page;
    /// other [`StoreError`]s for I/O or engine failures.
    pub fn integrity_check(&mut self) -> StoreResult<IntegrityReport> {
        let what = format!("checking the store in {}", self.segments_dir.display());
        crate::contain::contain(&what, || self.check_everything())
    }

    fn check_everything(&mut self) -> StoreResult<IntegrityReport> {
        let db = self
            .db
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
            .and_then(Arc::get_mut)
            .ok_or_else(|| StoreError::Engine("the database is in use or reopening".into()))?;
        match db.check_integrity().map_err(engine)? {
            true => {}
            false => return Err(corrupt("redb integrity check had to repair the file")),
        }
        let txn = db.begin_read().map_err(engine)?;
        let mut report = IntegrityReport::default();
        let occupancy = query::occupancy(&txn)?;

        let mut bound = HashSet::new();
        txn.scan(BINDINGS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            decode_binding(v)?;
            bound.insert(arr32_at(k, 0)?);
            Ok(true)
        })?;
        report.bindings = bound.len() as u64;
        let mut eviction_entries = 0u64;
        txn.scan(TOMBSTONES, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let rkid = arr32_at(k, 0)?;
            let t = decode_tombstone(v)?;
            report.tombstones += 1;
            if bound.contains(&rkid) {
                report.binding_and_tombstone += 1;
            }
            let key = eviction_key(t.released_at, &Rkid::from_bytes(rkid));
            if txn.get_with(EVICTION, &key, |_| Ok(()))?.is_none() {
                return Err(corrupt("tombstone without eviction entry"));
            }
            Ok(true)
        })?;
        txn.scan(EVICTION, (Bound::Unbounded, Bound::Unbounded), |_, _| {
            eviction_entries += 1;
            Ok(true)
        })?;
        if eviction_entries != report.tombstones {
            return Err(corrupt(format!(
                "{eviction_entries} eviction entries for {} tombstones",
                report.tombstones
            )));
        }

        let mut per_queue: HashMap<[u8; 32], (u64, u64)> = HashMap::new();
        let mut per_segment: HashMap<u64, SegStat> = HashMap::new();
        let mut deposits = Vec::new();
        txn.scan(DEPOSITS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let rkid = arr32_at(k, 0)?;
            let stored = decode_deposit(seq_of_key(k)?, v)?;
            let len = u64::from(stored.deposit.len);
            let queue = per_queue.entry(rkid).or_default();
            queue.0 += len;
            queue.1 = queue.1.max(stored.deposit.seq);
            if stored.segment != INLINE {
                let seg = per_segment.entry(stored.segment).or_default();
                seg.live += 1;
                seg.bytes += len;
                seg.end = seg.end.max(stored.offset + len);
            }
            deposits.push((Rkid::from_bytes(rkid), stored.deposit));
            Ok(true)
        })?;
        for (rkid, deposit) in &deposits {
            match get_u64(&txn, IDENTITY, &key_id(rkid, &deposit.id))? {
                Some(seq) if seq == deposit.seq => {}
                other => {
                    return Err(corrupt(format!(
                        "identity of deposit {} points to {other:?}",
                        deposit.seq
                    )));
                }
            }
            match self.bytes_of(&txn, rkid, deposit, None) {
                Ok(_) => {}
                Err(StoreError::Corrupt(what)) => report.damaged.push(what),
                Err(other) => return Err(other),
            }
            report.deposits += 1;
            report.bytes += u64::from(deposit.len);
        }
        txn.scan(QUARANTINE, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            report.quarantined.push(describe_quarantine(k, v)?);
            Ok(true)
        })?;
        let mut identities = 0u64;
        txn.scan(IDENTITY, (Bound::Unbounded, Bound::Unbounded), |_, _| {
            identities += 1;
            Ok(true)
        })?;
        if identities != report.deposits {
            return Err(corrupt(format!(
                "{identities} identity entries for {} deposits",
                report.deposits
            )));
        }
        txn.scan(QUEUES, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let queue = decode_queue(v)?;
            let (bytes, max_seq) = per_queue.remove(&arr32_at(k, 0)?).unwrap_or_default();
            if queue.bytes != bytes || queue.next_seq < max_seq {
                return Err(corrupt(format!(
                    "queue counter {} bytes next {} vs held {bytes} bytes max seq {max_seq}",
                    queue.bytes, queue.next_seq
                )));
            }
            Ok(true)
        })?;
        if !per_queue.is_empty() {
            return Err(corrupt("deposits of a queue without a queue record"));
        }
        let counted = Occupancy {
            total_bytes: report.bytes,
            bindings: report.bindings,
            deposits: report.deposits,
            tombstones: report.tombstones,
            elastic_bytes: occupancy.elastic_bytes,
        };
        if counted != occupancy {
            return Err(corrupt(format!(
                "occupancy counters {occupancy:?} vs held {counted:?}"
            )));
        }

        let active = get_u64(&txn, META, META_ACTIVE)?;
        let mut gc = HashSet::new();
        txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
            gc.insert(u64_at(k, 0)?);
            Ok(true)
        })?;
        let mut recorded = HashSet::new();
        txn.scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let id = u64_at(k, 0)?;
            let stat = decode_seg(v)?;
            let held = per_segment.remove(&id).unwrap_or_default();
            if stat.live != held.live || stat.bytes != held.bytes || stat.end < held.end {
                return Err(corrupt(format!(
                    "segment {id:016x} counters {stat:?} vs held {held:?}"
                )));
            }
            if stat.live == 0 && Some(id) != active {
                return Err(corrupt(format!("drained segment {id:016x} not reclaimed")));
            }
            // A file shorter than its extent shows as the damaged deposits
            // past its end (named above).
            self.options
                .fs
                .file_len(&segment::segment_path(&self.segments_dir, id))?
                .ok_or_else(|| corrupt(format!("segment {id:016x} is missing")))?;
            recorded.insert(id);
            report.segments += 1;
            Ok(true)
        })?;
        if let Some((id, _)) = per_segment.iter().next() {
            return Err(corrupt(format!("deposits in unrecorded segment {id:016x}")));
        }
        for name in self.options.fs.list(&self.segments_dir)? {
            let Some(id) = segment::parse_segment_name(&name) else {
                return Err(corrupt(format!("stray file {name:?} in segments")));
            };
            if !recorded.contains(&id) && !gc.contains(&id) {
                return Err(corrupt(format!("unreferenced segment file {id:016x}")));
            }
        }
        txn.scan(DUE, (Bound::Unbounded, Bound::Unbounded), |k, _| {
            decode_due(k)?;
            Ok(true)
        })?;
        Ok(report)
    }

    /// One bounded step of background compaction: examines up to
    /// `max_scan` entries of the deposit index (resuming where the previous
    /// step stopped) and copies the live deposits of *sparse* sealed
    /// segments (live bytes below `compact_below_percent` of their extent,
    /// or of `segment_bytes` when they were sealed early by a restart)
    /// into the active segment, re-pointing their index entries, in one
    /// short write transaction with the usual commit order. A segment whose
    /// last deposit moves out is reclaimed by that commit. Serialized with
    /// the group-commit writer (it takes the same write lock), so it never
    /// pauses the carrier for longer than one step. Call it periodically
    /// until `pass_complete`.
    ///
    /// # Errors
    /// [`StoreError`] as for a commit. A deposit whose bytes do not match
    /// its id is never copied: it is skipped (and stays where it is until
    /// the engine quarantines it or it is given up).
    pub fn compact_step(&self, max_scan: usize) -> StoreResult<CompactionStep> {
        let mut w = self.begin_write()?;
        let mut step = CompactionStep::default();
        let active = w.state.active.id;
        let percent = u64::from(self.options.compact_below_percent);
        let bound = self.options.segment_bytes;
        let mut sparse = HashSet::new();
        w.txn()?
            .scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                let id = u64_at(k, 0)?;
                let stat = decode_seg(v)?;
                // Judged against the full segment size, so that the small
                // segments sealed at each restart are merged too.
                let size = stat.end.max(bound).saturating_sub(segment::HEADER_LEN);
                if id != active && stat.bytes.saturating_mul(100) < size.saturating_mul(percent) {
                    sparse.insert(id);
                }
                Ok(true)
            })?;
        if sparse.is_empty() {
            w.state.compaction_cursor = None;
            step.pass_complete = true;
            return Ok(step);
        }
        let cursor = w.state.compaction_cursor.take();
        let start = cursor.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut to_move = Vec::new();
        let mut last = None;
        w.txn()?.scan(DEPOSITS, (start, Bound::Unbounded), |k, v| {
            step.scanned += 1;
            last = Some(k.to_vec());
            let stored = decode_deposit(seq_of_key(k)?, v)?;
            if sparse.contains(&stored.segment) {
                to_move.push((Rkid::from_bytes(arr32_at(k, 0)?), stored));
            }
            Ok(step.scanned < max_scan.max(1))
        })?;
        for (rkid, stored) in to_move {
            let bytes = match self.bytes_of(w.txn()?, &rkid, &stored.deposit, None) {
                Ok(bytes) => bytes,
                // Never copied: the engine quarantines it when it meets it.
                Err(StoreError::Corrupt(what)) => {
                    tracing::warn!(%what, "compaction skips a damaged deposit");
                    continue;
                }
                Err(other) => return Err(other),
            };
            let seq = stored.deposit.seq;
            let end = w.log(&[
                &[tag::MOVE_DEPOSIT],
                rkid.as_bytes(),
                &seq.to_be_bytes(),
                &stored.deposit.len.to_be_bytes(),
                &bytes,
            ])?;
            w.move_deposit(&rkid, seq, end - bytes.len() as u64)?;
            step.moved += 1;
            step.moved_bytes += u64::from(stored.deposit.len);
        }
        step.pass_complete = step.scanned < max_scan.max(1);
        let resume = if step.pass_complete { None } else { last };
        self.commit(w)?;
        lock(&self.writer).compaction_cursor = resume;
        Ok(step)
    }
}

/// Opens (or creates) the redb file through the store's file layer, with
/// the store's cache size.
pub(crate) fn open_db(fs: &dyn StoreFs, path: &Path, cache_bytes: usize) -> StoreResult<Database> {
    let backend = fs.redb_backend(path)?;
    Database::builder()
        .set_cache_size(cache_bytes)
        .create_with_backend(Boxed(backend))
        .map_err(engine)
}

/// A boxed backend as a [`redb::StorageBackend`] (every method delegates,
/// the locks included: they make a second open of the file fail).
#[derive(Debug)]
struct Boxed(Box<dyn redb::StorageBackend>);

impl redb::StorageBackend for Boxed {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.0.write(offset, data)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.0.close()
    }
    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.query_lock_range(start, end)
    }
}

pub(crate) fn begin(db: &Database, quick_repair: bool) -> StoreResult<WriteTransaction> {
    let mut txn = db.begin_write().map_err(engine)?;
    txn.set_durability(Durability::Immediate).map_err(engine)?;
    txn.set_quick_repair(quick_repair);
    Ok(txn)
}

/// Drops a segment's row and lists it for deletion (same transaction).
fn retire_segment(txn: &WriteTransaction, id: u64) -> StoreResult<()> {
    del(txn, SEGMENTS, &id.to_be_bytes())?;
    put(txn, SEGMENT_GC, &id.to_be_bytes(), &[])?;
    Ok(())
}

/// Records `id` as the (empty) active segment and bumps `next_segment`.
fn record_active(txn: &WriteTransaction, id: u64) -> StoreResult<()> {
    let fresh = SegStat {
        live: 0,
        bytes: 0,
        end: segment::HEADER_LEN,
    };
    put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(&fresh))?;
    put(txn, META, META_ACTIVE, &id.to_be_bytes())?;
    put(txn, META, META_NEXT_SEGMENT, &(id + 1).to_be_bytes())?;
    put_applied(txn, id, segment::HEADER_LEN)
}

/// Records that redb's state holds every log record of `segment` before
/// offset `at` (`src/oplog.rs`).
fn put_applied(txn: &WriteTransaction, segment: u64, at: u64) -> StoreResult<()> {
    let value = cat(&[&segment.to_be_bytes(), &at.to_be_bytes()]);
    put(txn, META, META_APPLIED, &value).map(drop)
}

/// Where the log resumes: `(segment, offset)` of the first record redb's
/// state does not hold (`None` for a format-1 store).
pub(crate) fn applied(t: &impl Tables) -> StoreResult<Option<(u64, u64)>> {
    t.get_with(META, META_APPLIED, |v| Ok((u64_at(v, 0)?, u64_at(v, 8)?)))
}

// ---------------------------------------------------------------------------
// Backup: a consistent export of one read snapshot, and its import
// ---------------------------------------------------------------------------

/// A read snapshot held for a backup ([`crate::backup`]): every table row
/// as the snapshot sees it, and the segment extents it references.
///
/// While it lives, no segment it references is unlinked (it is registered
/// like any read snapshot, see "Commit order"), and the bytes below a
/// segment's committed extent never change (segments are append-only), so
/// copying each referenced segment up to its extent is consistent with the
/// rows. Holding it never blocks the writer (redb read transactions are
/// MVCC snapshots); it only delays reclaiming space until it is dropped.
pub struct Snapshot<'a> {
    read: RedbRead<'a>,
}

impl RedbStore {
    /// Takes a consistent snapshot for a backup (see [`Snapshot`]).
    ///
    /// # Errors
    /// [`StoreError`] if the read transaction cannot begin.
    pub fn snapshot(&self) -> StoreResult<Snapshot<'_>> {
        let read = self.read()?;
        // Nothing the backup holds may be a batch a crash could undo.
        self.sync_visible()?;
        Ok(Snapshot { read })
    }
}

impl Snapshot<'_> {
    /// The snapshot as a [`ReadTxn`] (occupancy, declaration, …).
    pub fn read(&self) -> &RedbRead<'_> {
        &self.read
    }

    /// Calls `f(table, key, value)` for every row of every table, table by
    /// table, in key order.
    ///
    /// # Errors
    /// The first error of `f`, or a [`StoreError`] from the reads.
    pub fn for_each_row(
        &self,
        mut f: impl FnMut(&str, &[u8], &[u8]) -> StoreResult<()>,
    ) -> StoreResult<()> {
        for def in ALL_TABLES {
            let name = redb::TableHandle::name(&def).to_owned();
            self.read
                .txn
                .scan(def, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                    f(&name, k, v)?;
                    Ok(true)
                })?;
        }
        Ok(())
    }

    /// The segments the snapshot references: `(id, committed extent in
    /// bytes)`, ascending by id. Deposits stored inline reference none.
    ///
    /// # Errors
    /// [`StoreError`] from the read.
    pub fn segments(&self) -> StoreResult<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        self.read
            .txn
            .scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                out.push((u64_at(k, 0)?, decode_seg(v)?.end));
                Ok(true)
            })?;
        Ok(out)
    }

    /// The file of segment `id`.
    pub fn segment_path(&self, id: u64) -> PathBuf {
        segment::segment_path(&self.read.store.segments_dir, id)
    }

    /// Segment `id`, opened through the store's file layer.
    ///
    /// # Errors
    /// [`StoreError::Io`] if it cannot be opened.
    pub fn segment_file(&self, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
        Ok(segment::open_for_read(
            &*self.read.store.options.fs,
            &self.read.store.segments_dir,
            id,
        )?)
    }
}

/// Whether another process (or another handle in this one) holds the store
/// in `dir` open: redb locks its file for its single writer. Opens nothing
/// for writing and changes nothing; a missing, unreadable or uncleanly
/// closed file counts as not in use.
pub fn store_in_use(dir: &Path) -> bool {
    matches!(
        redb::ReadOnlyDatabase::open(dir.join(INDEX_FILE)),
        Err(redb::DatabaseError::DatabaseAlreadyOpen)
    )
}

/// The file name of segment `id` inside `segments/` (`<id:016x>.seg`).
pub fn segment_file_name(id: u64) -> String {
    format!("{id:016x}.seg")
}

/// The segment id a file name inside `segments/` names, if it is one.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    segment::parse_segment_name(name)
}

/// Rows written into a fresh store directory (a restore, [`crate::backup`]):
/// committed in chunks, the last one durable.
pub struct Importer {
    db: Database,
    txn: Option<WriteTransaction>,
    pending_bytes: usize,
    rows: u64,
}

/// A chunk of imported rows is committed past this many bytes, so an
/// import never holds a whole store in one transaction.
const IMPORT_CHUNK_BYTES: usize = 32 << 20;

impl Importer {
    /// Creates `<dir>/carrier.redb`, which must not exist yet, and the
    /// `segments/` directory.
    ///
    /// # Errors
    /// [`StoreError::Io`] if it exists or cannot be created.
    pub fn create(dir: &Path) -> StoreResult<Importer> {
        let path = dir.join(INDEX_FILE);
        if path.exists() {
            return Err(StoreError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", path.display()),
            )));
        }
        std::fs::create_dir_all(segment::segments_dir(dir))?;
        let db = Database::builder().create(path).map_err(engine)?;
        Ok(Importer {
            db,
            txn: None,
            pending_bytes: 0,
            rows: 0,
        })
    }

    /// Inserts one row into `table`, which must be one of the store's
    /// tables.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an unknown table; engine errors.
    pub fn row(&mut self, table: &str, key: &[u8], value: &[u8]) -> StoreResult<()> {
        let def = ALL_TABLES
            .into_iter()
            .find(|d| redb::TableHandle::name(d) == table)
            .ok_or_else(|| corrupt(format!("unknown table {table:?}")))?;
        if self.txn.is_none() {
            let mut txn = self.db.begin_write().map_err(engine)?;
            txn.set_durability(Durability::None).map_err(engine)?;
            self.txn = Some(txn);
        }
        let txn = self.txn.as_ref().ok_or(StoreError::Closed)?;
        if put(txn, def, key, value)?.is_some() {
            return Err(corrupt(format!("duplicate key in table {table}")));
        }
        self.rows += 1;
        self.pending_bytes += key.len() + value.len();
        if self.pending_bytes >= IMPORT_CHUNK_BYTES {
            self.commit_chunk()?;
        }
        Ok(())
    }

    fn commit_chunk(&mut self) -> StoreResult<()> {
        if let Some(txn) = self.txn.take() {
            txn.commit().map_err(engine)?;
        }
        self.pending_bytes = 0;
        Ok(())
    }

    /// Commits the rest durably and closes the database; returns the rows
    /// imported.
    ///
    /// # Errors
    /// Engine errors.
    pub fn finish(mut self) -> StoreResult<u64> {
        self.commit_chunk()?;
        let mut txn = self.db.begin_write().map_err(engine)?;
        txn.set_durability(Durability::Immediate).map_err(engine)?;
        txn.commit().map_err(engine)?;
        Ok(self.rows)
    }
}

/// A read snapshot of a [`RedbStore`].
pub struct RedbRead<'a> {
    store: &'a RedbStore,
    txn: ReadTransaction,
    generation: u64,
}

impl Drop for RedbRead<'_> {
    fn drop(&mut self) {
        let mut readers = lock(&self.store.readers);
        if let Some(count) = readers.live.get_mut(&self.generation) {
            *count -= 1;
            if *count == 0 {
                readers.live.remove(&self.generation);
            }
        }
    }
}

/// A write transaction of a [`RedbStore`]. Holds the writer lock; dropping
/// it without [`Store::commit`] discards everything it did.
pub struct RedbWrite<'a> {
    store: &'a RedbStore,
    txn: Option<WriteTransaction>,
    state: MutexGuard<'a, WriterState>,
    occupancy: Occupancy,
    occupancy_dirty: bool,
    queues: HashMap<Rkid, (QueueMeta, bool)>,
    segments: HashMap<u64, SegStat>,
    committed: bool,
    /// Whether mutations are written to the operation log (`false` while
    /// replaying it).
    logging: bool,
    /// This transaction's log record: its offset and the hash of its body
    /// so far (`None` until the first logged operation).
    record: Option<(u64, Sha256)>,
    /// Operations logged.
    ops: u64,
    /// Commit durably in redb (a checkpoint) whatever the counters say.
    force_durable: bool,
}

impl Drop for RedbWrite<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // A record that reached the file (spilled, or synced before a
        // failed commit) is voided before anything else is written.
        if let Some((start, _)) = self.record.take()
            && self.state.active.written() > start
        {
            self.state.void_pending = Some((start, self.state.active.written()));
        }
        self.state.active.abandon();
        if self.state.void_pending.is_some() {
            let _ = self.store.void_if_pending(&mut self.state);
        }
    }
}

impl RedbWrite<'_> {
    fn txn(&self) -> StoreResult<&WriteTransaction> {
        self.txn.as_ref().ok_or(StoreError::Closed)
    }

    /// Appends one operation (`parts`, concatenated) to this transaction's
    /// log record (`src/oplog.rs`), opening the record first; returns the
    /// segment offset just past it. Does nothing while replaying.
    fn log(&mut self, parts: &[&[u8]]) -> StoreResult<u64> {
        if !self.logging {
            return Ok(0);
        }
        let active = &mut self.state.active;
        let (_, hasher) = match &mut self.record {
            Some(record) => record,
            record @ None => {
                let start = active.append(&[0u8; oplog::HEADER])?;
                record.insert((start, Sha256::new()))
            }
        };
        for part in parts {
            hasher.update(part);
            active.append(part)?;
        }
        self.ops += 1;
        Ok(active.end())
    }

    /// Indexes a deposit whose bytes are at `offset` of the active segment
    /// (inside a log record): `append_deposit` and its replay.
    fn index_deposit(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
        offset: u64,
    ) -> StoreResult<Deposit> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| corrupt(format!("deposit of {} bytes", bytes.len())))?;
        let floor = self.store.seq_floor();
        let queue = self.queue_mut(rkid)?;
        queue.next_seq = queue.next_seq.max(floor) + 1;
        queue.bytes += u64::from(len);
        let deposit = Deposit {
            seq: queue.next_seq,
            id: *id,
            len,
            admitted_at,
            give_up_at,
        };
        let value = match self.store.options.placement {
            Placement::Inline => encode_deposit(&deposit, INLINE, 0, bytes),
            Placement::Segments => {
                let active = self.state.active.id;
                self.seg_adjust(active, 1, u64::from(len))?;
                encode_deposit(&deposit, active, offset, &[])
            }
        };
        let txn = self.txn()?;
        put(txn, DEPOSITS, &key_seq(rkid, deposit.seq), &value)?;
        put(
            txn,
            IDENTITY,
            &key_id(rkid, &deposit.id),
            &deposit.seq.to_be_bytes(),
        )?;
        self.occupancy.total_bytes += u64::from(len);
        self.occupancy.deposits += 1;
        self.occupancy_dirty = true;
        Ok(deposit)
    }

    /// Re-points held deposit `seq` of `rkid` to `offset` of the active
    /// segment, where a copy of its bytes was logged (compaction and its
    /// replay).
    fn move_deposit(&mut self, rkid: &Rkid, seq: u64, offset: u64) -> StoreResult<()> {
        let stored = query::stored(self.txn()?, rkid, seq)?
            .ok_or_else(|| corrupt(format!("moved deposit {seq} is not held")))?;
        let active = self.state.active.id;
        let len = u64::from(stored.deposit.len);
        put(
            self.txn()?,
            DEPOSITS,
            &key_seq(rkid, seq),
            &encode_deposit(&stored.deposit, active, offset, &[]),
        )?;
        if stored.segment != INLINE {
            self.seg_adjust(stored.segment, -1, len)?;
        }
        self.seg_adjust(active, 1, len)
    }

    /// Applies the operations of a replayed batch record; returns how many.
    fn apply_record(&mut self, record: &oplog::Record) -> StoreResult<u64> {
        let mut c = Cursor::new(&record.body);
        let mut ops = 0;
        while !c.done() {
            let op = c.u8()?;
            match op {
                tag::PUT_BINDING => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.put_binding(&rkid, &decode_binding(c.take(57)?)?)?;
                }
                tag::REMOVE_BINDING => {
                    self.remove_binding(&Rkid::from_bytes(c.arr32()?))?;
                }
                tag::PUT_TOMBSTONE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.put_tombstone(&rkid, &decode_tombstone(c.take(16)?)?)?;
                }
                tag::REMOVE_TOMBSTONE => {
                    self.remove_tombstone(&Rkid::from_bytes(c.arr32()?))?;
                }
                tag::APPEND_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let (admitted_at, give_up_at, len) = (c.u64()?, c.u64()?, c.u32()?);
                    let offset = record.body_at + c.pos() as u64;
                    let bytes = c.take(len as usize)?;
                    let id = DepositId::of(bytes);
                    self.index_deposit(&rkid, bytes, &id, admitted_at, give_up_at, offset)?;
                }
                tag::REMOVE_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.remove_deposit(&rkid, c.u64()?)?;
                }
                tag::PUT_DEPARTURE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let id = DepositId(c.arr32()?);
                    self.put_departure(&rkid, &id, &decode_departure(c.take(9)?)?)?;
                }
                tag::REMOVE_DEPARTURE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    self.remove_departure(&rkid, &DepositId(c.arr32()?))?;
                }
                tag::SCHEDULE | tag::UNSCHEDULE => {
                    let len = c.u8()?;
                    let (at, due) = decode_due(c.take(len.into())?)?;
                    if op == tag::SCHEDULE {
                        self.schedule(at, &due)?;
                    } else {
                        self.unschedule(at, &due)?;
                    }
                }
                tag::ADD_ELASTIC => {
                    self.add_elastic_bytes(c.u64()?.cast_signed())?;
                }
                tag::PUT_DECLARATION => {
                    let len = c.u32()?;
                    let value = c.take(len as usize)?;
                    self.put_declaration(&DeclarationRecord {
                        revision: u64_at(value, 0)?,
                        document: value.get(8..).unwrap_or_default().to_vec(),
                    })?;
                }
                tag::MOVE_DEPOSIT => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let (seq, len) = (c.u64()?, c.u32()?);
                    let offset = record.body_at + c.pos() as u64;
                    c.take(len as usize)?;
                    self.move_deposit(&rkid, seq, offset)?;
                }
                tag::QUARANTINE => {
                    let rkid = Rkid::from_bytes(c.arr32()?);
                    let seq = c.u64()?;
                    let len = c.u32()?;
                    let value = c.take(len as usize)?;
                    put(self.txn()?, QUARANTINE, &key_seq(&rkid, seq), value)?;
                }
                other => return Err(corrupt(format!("log record: operation tag {other}"))),
            }
            ops += 1;
        }
        Ok(ops)
    }

    fn queue_mut(&mut self, rkid: &Rkid) -> StoreResult<&mut QueueMeta> {
        if !self.queues.contains_key(rkid) {
            let meta = query::queue(self.txn()?, rkid)?;
            self.queues.insert(*rkid, (meta, false));
        }
        let (meta, dirty) = self
            .queues
            .get_mut(rkid)
            .ok_or_else(|| corrupt("queue cache"))?;
        *dirty = true;
        Ok(meta)
    }

    fn seg_adjust(&mut self, id: u64, count: i64, bytes: u64) -> StoreResult<()> {
        if !self.segments.contains_key(&id) {
            let stat = query::seg_stat(self.txn()?, id)?
                .ok_or_else(|| corrupt(format!("deposit in unrecorded segment {id:016x}")))?;
            self.segments.insert(id, stat);
        }
        let stat = self
            .segments
            .get_mut(&id)
            .ok_or_else(|| corrupt("segment cache"))?;
        if count >= 0 {
            stat.live += count.unsigned_abs();
            stat.bytes += bytes;
        } else {
            stat.live = stat.live.saturating_sub(count.unsigned_abs());
            stat.bytes = stat.bytes.saturating_sub(bytes);
        }
        Ok(())
    }

    /// Writes the cached counters; returns the sealed segments this
    /// transaction drained.
    fn flush_counters(&mut self) -> StoreResult<Vec<u64>> {
        let txn = self.txn()?;
        if self.occupancy_dirty {
            put(
                txn,
                META,
                META_OCCUPANCY,
                &encode_occupancy(&self.occupancy),
            )?;
        }
        for (rkid, (meta, dirty)) in &self.queues {
            if *dirty {
                put(txn, QUEUES, rkid.as_bytes(), &encode_queue(meta))?;
            }
        }
        let active = self.state.active.id;
        let mut drained = Vec::new();
        for (&id, stat) in &self.segments {
            if id == active {
                let stat = SegStat {
                    end: self.state.active.end(),
                    ..*stat
                };
                put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(&stat))?;
            } else if stat.live == 0 {
                retire_segment(txn, id)?;
                drained.push(id);
            } else {
                put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(stat))?;
            }
        }
        Ok(drained)
    }
}

macro_rules! shared_reads {
    () => {
        fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
            query::binding(self.tables()?, rkid)
        }
        fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
            query::tombstone(self.tables()?, rkid)
        }
        fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
            query::oldest_tombstone(self.tables()?)
        }
        fn deposits(
            &self,
            rkid: &Rkid,
            after: Option<u64>,
            limit: usize,
        ) -> StoreResult<Vec<Deposit>> {
            query::deposits(self.tables()?, rkid, after, limit)
        }
        fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
            query::deposit_by_id(self.tables()?, rkid, id)
        }
        fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
            query::departure(self.tables()?, rkid, id)
        }
        fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
            query::due(self.tables()?, upto, limit)
        }
        fn next_due(&self) -> StoreResult<Option<Ms>> {
            query::next_due(self.tables()?)
        }
        fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
            query::declaration(self.tables()?)
        }
        fn quarantined(&self) -> StoreResult<u64> {
            self.tables()?.count(QUARANTINE)
        }
    };
}

impl RedbRead<'_> {
    fn tables(&self) -> StoreResult<&ReadTransaction> {
        Ok(&self.txn)
    }
}

impl RedbWrite<'_> {
    fn tables(&self) -> StoreResult<&WriteTransaction> {
        self.txn()
    }
}

impl ReadTxn for RedbRead<'_> {
    shared_reads!();
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        self.store.bytes_of(&self.txn, rkid, deposit, None)
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        Ok(query::queue(&self.txn, rkid)?.bytes)
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        query::occupancy(&self.txn)
    }
    fn binding_phases(&self) -> StoreResult<crate::BindingPhases> {
        binding_phases(&self.txn)
    }
}

impl ReadTxn for RedbWrite<'_> {
    shared_reads!();
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        self.store
            .bytes_of(self.txn()?, rkid, deposit, Some(&self.state.active))
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        match self.queues.get(rkid) {
            Some((meta, _)) => Ok(meta.bytes),
            None => Ok(query::queue(self.txn()?, rkid)?.bytes),
        }
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        Ok(self.occupancy)
    }
}

/// Every mutation is logged first (`RedbWrite::log`, a no-op during
/// replay), then applied to redb.
impl WriteTxn for RedbWrite<'_> {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        let value = encode_binding(binding);
        self.log(&[&[tag::PUT_BINDING], rkid.as_bytes(), &value])?;
        if put(self.txn()?, BINDINGS, rkid.as_bytes(), &value)?.is_none() {
            self.occupancy.bindings += 1;
            self.occupancy_dirty = true;
        }
        Ok(())
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        self.log(&[&[tag::REMOVE_BINDING], rkid.as_bytes()])?;
        let Some(old) = del(self.txn()?, BINDINGS, rkid.as_bytes())? else {
            return Ok(None);
        };
        self.occupancy.bindings = self.occupancy.bindings.saturating_sub(1);
        self.occupancy_dirty = true;
        decode_binding(&old).map(Some)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        let value = encode_tombstone(tombstone);
        self.log(&[&[tag::PUT_TOMBSTONE], rkid.as_bytes(), &value])?;
        if put_tombstone(self.txn()?, rkid, tombstone)? {
            self.occupancy.tombstones += 1;
            self.occupancy_dirty = true;
        }
        Ok(())
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.log(&[&[tag::REMOVE_TOMBSTONE], rkid.as_bytes()])?;
        let Some(old) = remove_tombstone(self.txn()?, rkid)? else {
            return Ok(None);
        };
        self.occupancy.tombstones = self.occupancy.tombstones.saturating_sub(1);
        self.occupancy_dirty = true;
        Ok(Some(old))
    }
    /// The envelope bytes are written once, inside this transaction's log
    /// record; the deposit points at them there.
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| corrupt(format!("deposit of {} bytes", bytes.len())))?;
        let end = self.log(&[
            &[tag::APPEND_DEPOSIT],
            rkid.as_bytes(),
            &admitted_at.to_be_bytes(),
            &give_up_at.to_be_bytes(),
            &len.to_be_bytes(),
            bytes,
        ])?;
        let offset = end.saturating_sub(u64::from(len));
        self.index_deposit(rkid, bytes, id, admitted_at, give_up_at, offset)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        self.log(&[&[tag::REMOVE_DEPOSIT], rkid.as_bytes(), &seq.to_be_bytes()])?;
        let txn = self.txn()?;
        let Some(old) = del(txn, DEPOSITS, &key_seq(rkid, seq))? else {
            return Ok(None);
        };
        let stored = decode_deposit(seq, &old)?;
        del(txn, IDENTITY, &key_id(rkid, &stored.deposit.id))?;
        let len = u64::from(stored.deposit.len);
        let queue = self.queue_mut(rkid)?;
        queue.bytes = queue.bytes.saturating_sub(len);
        if stored.segment != INLINE {
            self.seg_adjust(stored.segment, -1, len)?;
        }
        self.occupancy.total_bytes = self.occupancy.total_bytes.saturating_sub(len);
        self.occupancy.deposits = self.occupancy.deposits.saturating_sub(1);
        self.occupancy_dirty = true;
        Ok(Some(stored.deposit))
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        let value = encode_departure(record);
        self.log(&[&[tag::PUT_DEPARTURE], rkid.as_bytes(), &id.0, &value])?;
        put(self.txn()?, DEPARTURES, &key_id(rkid, id), &value).map(drop)
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        self.log(&[&[tag::REMOVE_DEPARTURE], rkid.as_bytes(), &id.0])?;
        del(self.txn()?, DEPARTURES, &key_id(rkid, id)).map(drop)
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = due_key(at, due);
        self.log(&[&[tag::SCHEDULE, key.len() as u8], &key])?;
        put(self.txn()?, DUE, &key, &[]).map(drop)
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = due_key(at, due);
        self.log(&[&[tag::UNSCHEDULE, key.len() as u8], &key])?;
        del(self.txn()?, DUE, &key).map(drop)
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        self.log(&[&[tag::ADD_ELASTIC], &delta.to_be_bytes()])?;
        self.occupancy.elastic_bytes = self.occupancy.elastic_bytes.saturating_add_signed(delta);
        self.occupancy_dirty = true;
        Ok(())
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        let value = cat(&[&record.revision.to_be_bytes(), &record.document]);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("declaration of {} bytes", value.len())))?;
        self.log(&[&[tag::PUT_DECLARATION], &len.to_be_bytes(), &value])?;
        put(self.txn()?, META, META_DECLARATION, &value).map(drop)
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        let (segment, offset) = query::stored(self.txn()?, rkid, deposit.seq)?
            .map_or((INLINE, 0), |s| (s.segment, s.offset));
        let value = quarantine_value(deposit, at, segment, offset, reason);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("quarantine record of {} bytes", value.len())))?;
        let seq = deposit.seq.to_be_bytes();
        self.log(&[
            &[tag::QUARANTINE],
            rkid.as_bytes(),
            &seq,
            &len.to_be_bytes(),
            &value,
        ])?;
        put(self.txn()?, QUARANTINE, &key_seq(rkid, deposit.seq), &value).map(drop)
    }
}

/// Installs a tombstone and its eviction entry (replacing an older one's);
/// returns whether the rkid had none.
pub(crate) fn put_tombstone(
    txn: &WriteTransaction,
    rkid: &Rkid,
    tombstone: &Tombstone,
) -> StoreResult<bool> {
    let fresh = match put(
        txn,
        TOMBSTONES,
        rkid.as_bytes(),
        &encode_tombstone(tombstone),
    )? {
        Some(old) => {
            let old = decode_tombstone(&old)?;
            del(txn, EVICTION, &eviction_key(old.released_at, rkid))?;
            false
        }
        None => true,
    };
    put(
        txn,
        EVICTION,
        &eviction_key(tombstone.released_at, rkid),
        &[],
    )?;
    Ok(fresh)
}

/// Removes a tombstone and its eviction entry.
pub(crate) fn remove_tombstone(
    txn: &WriteTransaction,
    rkid: &Rkid,
) -> StoreResult<Option<Tombstone>> {
    let Some(old) = del(txn, TOMBSTONES, rkid.as_bytes())? else {
        return Ok(None);
    };
    let old = decode_tombstone(&old)?;
    del(txn, EVICTION, &eviction_key(old.released_at, rkid))?;
    Ok(Some(old))
}

/// Held bindings by phase: one scan of `bindings`.
pub(crate) fn binding_phases(t: &impl Tables) -> StoreResult<crate::BindingPhases> {
    let mut phases = crate::BindingPhases::default();
    t.scan(BINDINGS, (Bound::Unbounded, Bound::Unbounded), |_, v| {
        match v.first() {
            Some(0) => phases.live += 1,
            Some(1) => phases.closing += 1,
            other => return Err(corrupt(format!("binding phase {other:?}"))),
        }
        Ok(true)
    })?;
    Ok(phases)
}

/// A quarantine record: id ‖ len ‖ admitted_at ‖ give_up_at ‖ detected_at
/// ‖ segment ‖ offset ‖ reason.
pub(crate) fn quarantine_value(
    deposit: &Deposit,
    at: Ms,
    segment: u64,
    offset: u64,
    reason: &str,
) -> Vec<u8> {
    cat(&[
        &deposit.id.0,
        &deposit.len.to_be_bytes(),
        &deposit.admitted_at.to_be_bytes(),
        &deposit.give_up_at.to_be_bytes(),
        &at.to_be_bytes(),
        &segment.to_be_bytes(),
        &offset.to_be_bytes(),
        reason.as_bytes(),
    ])
}

/// A `quarantine` row, named for the integrity report.
pub(crate) fn describe_quarantine(key: &[u8], v: &[u8]) -> StoreResult<String> {
    let len = v
        .get(32..36)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| corrupt("short quarantine record"))?;
    let reason = String::from_utf8_lossy(v.get(76..).unwrap_or_default());
    Ok(format!(
        "deposit seq {} ({len} bytes, segment {:016x} offset {}), quarantined at {} ms: {reason}",
        seq_of_key(key)?,
        u64_at(v, 60)?,
        u64_at(v, 68)?,
        u64_at(v, 52)?,
    ))
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
            *lock(&self.visible) = PendingSync {
                file: Some(Arc::clone(&w.state.active.file)),
                segment: active,
                end,
            };
        }
        let mut txn = w.txn.take().ok_or(StoreError::Closed)?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability).map_err(engine)?;
        txn.commit().map_err(engine)?;
        w.committed = true;
        let generation = self.bump_generation();
        let ops = w.ops;
        let state = &mut *w.state;
        state.unlinked.clear();
        state.drained_undurable.extend(drained);
        let pending = if durable {
            RedbStore::durable_done(state, generation);
            PendingSync::default()
        } else {
            state.unchecked_ops += ops;
            state.unchecked_bytes += logged;
            PendingSync {
                file: Some(Arc::clone(&state.active.file)),
                segment: active,
                end,
            }
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
        let txn = self.db()?.begin_read().map_err(engine)?;
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
        let visible = {
            let v = lock(&self.visible);
            PendingSync {
                file: v.file.clone(),
                ..*v
            }
        };
        self.sync(visible)
    }

    fn commit_deferred(&self, w: RedbWrite<'_>) -> StoreResult<PendingSync> {
        self.commit_visible(w).inspect_err(|_| self.after_failure())
    }

    /// `fdatasync`s the segment of `pending` unless a sync already covered
    /// it, under the durable lock. A failure stops the process
    /// (`fatal_sync_failure`), so this returns only `Ok`.
    fn sync(&self, pending: PendingSync) -> StoreResult<()> {
        let Some(file) = pending.file else {
            return Ok(());
        };
        let mut durable = lock(&self.durable);
        if *durable >= (pending.segment, pending.end) {
            return Ok(());
        }
        if let Err(error) = file.sync_data() {
            fatal_sync_failure(&error);
        }
        *durable = (pending.segment, pending.end);
        Ok(())
    }

    fn after_failure(&self) {
        self.db_failed.store(true, Ordering::SeqCst);
    }

    fn issue_challenge(&self, challenge: Challenge) -> StoreResult<()> {
        self.challenges.issue(challenge);
        Ok(())
    }
    fn take_challenge(&self, principal_challenge: &[u8; 32]) -> StoreResult<Option<Challenge>> {
        Ok(self.challenges.take(principal_challenge))
    }
    fn purge_challenges(&self, now: Ms) -> StoreResult<usize> {
        Ok(self.challenges.purge(now))
    }
    fn challenge_count(&self) -> usize {
        self.challenges.len()
    }

    /// Compacts sparse segments in bounded steps (see
    /// [`RedbStore::compact_step`]); then, if segments drained since the
    /// last durable commit wait to be unlinked, makes a checkpoint so that
    /// their space comes back even when traffic stops.
    fn maintenance_step(&self) -> StoreResult<()> {
        self.compact_step(MAINTENANCE_SCAN)?;
        if !lock(&self.writer).drained_undurable.is_empty() {
            self.checkpoint()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rkid(n: u8) -> Rkid {
        Rkid::from_bytes([n; 32])
    }

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
                format: Some(FORMAT_VERSION)
            }
        );
        assert_eq!(std::fs::read(&index)?, before);
        Ok(())
    }

    #[test]
    fn due_keys_sort_like_the_model() {
        let dues = [
            (5, Due::Forget(rkid(0), DepositId([9; 32]))),
            (5, Due::OrphanExpiry(rkid(7))),
            (5, Due::GiveUp(rkid(1), 2)),
            (5, Due::GiveUp(rkid(1), 256)),
            (5, Due::Deadline(rkid(0))),
            (4, Due::Forget(rkid(255), DepositId([0; 32]))),
            (256, Due::OrphanExpiry(rkid(0))),
        ];
        let mut by_model = dues.to_vec();
        by_model.sort();
        let mut by_key = dues.to_vec();
        by_key.sort_by_key(|(at, due)| due_key(*at, due));
        assert_eq!(by_model, by_key);
        for (at, due) in dues {
            assert_eq!(decode_due(&due_key(at, &due)).ok(), Some((at, due)));
        }
    }

    #[test]
    fn records_round_trip() -> StoreResult<()> {
        let binding = Binding {
            phase: Phase::Closing { deadline: 77 },
            generation: (1 << 53) - 1,
            principal: [3; 32],
            last_collection_at: 12,
        };
        assert_eq!(encode_binding(&binding).len(), 57);
        assert_eq!(decode_binding(&encode_binding(&binding))?, binding);
        let deposit = Deposit {
            seq: 9,
            id: DepositId([4; 32]),
            len: 1024,
            admitted_at: 5,
            give_up_at: 6,
        };
        let value = encode_deposit(&deposit, 3, 16, &[]);
        assert_eq!(value.len(), DEPOSIT_HEADER);
        let stored = decode_deposit(9, &value)?;
        assert_eq!(
            (stored.deposit, stored.segment, stored.offset),
            (deposit, 3, 16)
        );
        assert!(matches!(
            decode_binding(&[2; 57]),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            decode_deposit(1, &[0; 10]),
            Err(StoreError::Corrupt(_))
        ));
        Ok(())
    }
}
