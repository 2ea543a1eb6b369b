//! Snapshots: the in-memory index written to `snap/<seg>-<off>.snap`, as
//! of log position `(seg, off)` (`storage/README.md`, "The log store:
//! snapshots").
//!
//! A snapshot is *fuzzy*: it is copied in chunks of [`CHUNK`] entries, each
//! between two write transactions — by the writer itself at the start of
//! a transaction while a snapshot is being taken, or by the background
//! thread when the writer is idle — so the writer never pauses for longer
//! than one chunk. Each key is copied whole at one instant at or after the
//! position, and every change after the position is in the log, whose
//! operations are absolute: loading the snapshot and replaying the log
//! from its position gives the state at the log's end.
//!
//! Before the first chunk, the log is `fdatasync`ed up to the position and
//! redb is made durable with `applied` there (a checkpoint), so a restart
//! replays from one position for both. The file is `fdatasync`ed and its
//! name made durable before anything depends on it; until then the
//! previous snapshot (and the log it needs) stays. Two snapshots are kept,
//! with the log from the older one: a restart that cannot load the latest
//! (a bit flipped since it was written) loads the older and replays more.
//!
//! ## Format (little-endian)
//! `RLTPSNP1` ‖ version u32 = 1 ‖ store id (16) ‖ segment u64 ‖ offset u64,
//! then entries, each a tag byte and fixed fields:
//! | tag | entry |
//! |---|---|
//! | `Q` | a queue: rkid ‖ next_seq u64 ‖ bound u8 ‖ its slot u32 — followed by its deposits |
//! | `D` | a deposit of the last queue: seq ‖ id ‖ admitted_at ‖ give_up_at ‖ segment u32 ‖ offset u32 ‖ len u32 ‖ its give-up entry at its own instant u8 |
//! | `P` | a departure: rkid ‖ id ‖ forget_at u64 ‖ given up u8 ‖ its forget entry at its own instant u8 |
//! | `U` | any other due entry: at u64 ‖ its queue's slot u32 (or `FFFFFFFF`) ‖ key len u8 ‖ due key |
//! | `X` | a quarantine record: rkid ‖ seq u64 ‖ len u32 ‖ record |
//! | `E` | elastic bytes u64 |
//! | `Z` | the end: queues, deposits, departures, due entries, quarantine records (5 × u64) ‖ CRC-32 of every byte before it |
//!
//! A file without a whole, matching `Z` is not a snapshot (a crash while
//! it was written): recovery takes the previous one.

use super::index::{Index, NIL};
use super::{Inner, record};
use crate::failure::damaged;
use crate::failure::{corrupt, db_error, lock};
use crate::fs::{Open, StoreFile, StoreFs};
use crate::schema::{self as rs, META};
use crate::store_id::StoreId;
use crate::{DepartureRecord, Deposit, DepositId, StoreResult};
use redb::Durability;
use rltp_proofs::multikey::Rkid;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

const MAGIC: [u8; 8] = *b"RLTPSNP1";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 16 + 8 + 8;
const TRAILER: usize = 1 + 5 * 8 + 4;
/// Entries copied per chunk (a few tens of µs).
pub(super) const CHUNK: usize = 4096;
/// Chunks copied but not yet written, at most.
const IN_FLIGHT: usize = 8;

/// Where a snapshot's copy stands.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    section: u8,
    /// Queues: the next queue slot, and within the current queue the last
    /// seq copied (resuming a long queue in the next chunk) and its rkid.
    qid: u32,
    last_seq: Option<u64>,
    last_rkid: Option<[u8; 32]>,
    /// Departures: the next slot.
    slot: u32,
    /// Due: the next instant.
    due_from: Option<u64>,
    counts: [u64; 5],
}

/// A snapshot being copied (in the writer's state, behind the gate).
#[derive(Debug)]
pub(super) struct Copy {
    cursor: Cursor,
    out: mpsc::Sender<(Vec<u8>, bool)>,
    in_flight: Arc<AtomicUsize>,
    done: bool,
}

impl Copy {
    /// Copies one chunk, if the copy is not done and the writer of the file
    /// keeps up; returns whether it copied.
    pub(super) fn advance(&mut self, ix: &Index) -> bool {
        if self.done || self.in_flight.load(Ordering::SeqCst) >= IN_FLIGHT {
            return false;
        }
        let mut buf = Vec::with_capacity(CHUNK * 80);
        self.done = copy_chunk(ix, &mut self.cursor, &mut buf);
        if self.done {
            let c = self.cursor.counts;
            buf.push(b'Z');
            for n in c {
                buf.extend_from_slice(&n.to_le_bytes());
            }
        }
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.out.send((buf, self.done)).is_err() {
            self.done = true;
        }
        true
    }
}

fn le(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// Copies the deposits of queue `c.qid` after `c.last_seq`, within
/// `budget`; returns whether the queue's list is done.
fn copy_deposits(ix: &Index, c: &mut Cursor, buf: &mut Vec<u8>, budget: &mut usize) -> bool {
    let mut at = ix.first_after(c.qid, c.last_seq);
    while at != NIL && *budget > 0 {
        let d = ix.deps.get(at);
        buf.push(b'D');
        le(buf, d.seq);
        buf.extend_from_slice(&d.id);
        le(buf, d.admitted_at);
        le(buf, d.give_up_at);
        buf.extend_from_slice(&d.seg.to_le_bytes());
        buf.extend_from_slice(&d.off.to_le_bytes());
        buf.extend_from_slice(&d.len().to_le_bytes());
        buf.push(u8::from(ix.give_up_flagged(at)));
        c.counts[1] += 1;
        c.last_seq = Some(d.seq);
        *budget -= 1;
        at = ix.next_in_queue(at);
    }
    at == NIL
}

/// Copies up to [`CHUNK`] entries; returns whether the snapshot is complete.
fn copy_chunk(ix: &Index, c: &mut Cursor, buf: &mut Vec<u8>) -> bool {
    let mut budget = CHUNK;
    loop {
        match c.section {
            0 => {
                while budget > 0 && c.qid < ix.queues.high() {
                    let Some(q) = ix.queues.live_at(c.qid).copied() else {
                        c.qid += 1;
                        c.last_seq = None;
                        continue;
                    };
                    if c.last_rkid != Some(q.rkid) {
                        // A new queue (or the slot now holds another one).
                        c.last_seq = None;
                        c.last_rkid = Some(q.rkid);
                        c.counts[0] += 1;
                    }
                    buf.push(b'Q');
                    buf.extend_from_slice(&q.rkid);
                    le(buf, q.next_seq);
                    buf.push(u8::from(q.bound()));
                    buf.extend_from_slice(&c.qid.to_le_bytes());
                    budget = budget.saturating_sub(1);
                    if copy_deposits(ix, c, buf, &mut budget) {
                        c.qid += 1;
                        c.last_seq = None;
                    }
                }
                if c.qid < ix.queues.high() {
                    return false;
                }
                c.section = 1;
            }
            1 => {
                while budget > 0 && c.slot < ix.departs.high() {
                    if let Some(p) = ix.departs.live_at(c.slot) {
                        let r = p.record();
                        buf.push(b'P');
                        buf.extend_from_slice(&ix.queue_rec(p.qid).rkid);
                        buf.extend_from_slice(&p.id);
                        le(buf, p.forget_at);
                        buf.push(u8::from(r.departure == crate::Departure::GivenUp));
                        buf.push(u8::from(ix.forget_flagged(c.slot)));
                        c.counts[2] += 1;
                        budget -= 1;
                    }
                    c.slot += 1;
                }
                if c.slot < ix.departs.high() {
                    return false;
                }
                c.section = 2;
            }
            2 => {
                let from = c.due_from.unwrap_or(0);
                let (entries, next) = ix.due_loose_chunk(from, budget);
                for (at, due, hint) in &entries {
                    let key = rs::due_key(*at, due);
                    buf.push(b'U');
                    le(buf, *at);
                    buf.extend_from_slice(&hint.unwrap_or(u32::MAX).to_le_bytes());
                    buf.push(key.len() as u8);
                    buf.extend_from_slice(&key);
                    c.counts[3] += 1;
                }
                match next {
                    Some(next) => {
                        c.due_from = Some(next);
                        return false;
                    }
                    None => c.section = 3,
                }
            }
            _ => {
                for ((rkid, seq), value) in &ix.quarantine {
                    buf.push(b'X');
                    buf.extend_from_slice(rkid.as_bytes());
                    le(buf, *seq);
                    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    buf.extend_from_slice(value);
                    c.counts[4] += 1;
                }
                buf.push(b'E');
                le(buf, ix.occupancy.elastic_bytes);
                return true;
            }
        }
    }
}

/// Takes a snapshot (module docs). One at a time; a no-op when nothing
/// was logged since the last one.
///
/// # Errors
/// I/O errors; the partial file is removed, and nothing is lost.
pub(super) fn take(inner: &Inner) -> StoreResult<()> {
    {
        let mut house = lock(&inner.house);
        if house.busy_snapshot {
            return Ok(());
        }
        house.busy_snapshot = true;
        house.snapshot = false;
    }
    let result = take_inner(inner);
    if result.is_err() {
        inner.gate().snapshot = None;
    }
    lock(&inner.house).busy_snapshot = false;
    result
}

fn take_inner(inner: &Inner) -> StoreResult<()> {
    let (tx, rx) = mpsc::channel::<(Vec<u8>, bool)>();
    let in_flight = Arc::new(AtomicUsize::new(0));
    // The position: the log durable up to it, redb checkpointed at it.
    let pos = {
        let mut state = inner.gate();
        inner.void_if_pending(&mut state)?;
        let pos = (state.active.id, state.active.end());
        if pos == state.latest_snapshot {
            return Ok(());
        }
        if inner.db_failed.load(Ordering::SeqCst) {
            // The writer reopens it first (`Inner::reopen_if_failed`).
            return Err(crate::StoreError::Unavailable(
                "the database is being reopened after an i/o error",
            ));
        }
        inner.sync_active(&mut state)?;
        checkpoint_at(inner, pos).inspect_err(|_| {
            // redb latches a failed write (a full disk): the writer reopens
            // it before its next transaction.
            inner.db_failed.store(true, Ordering::SeqCst);
        })?;
        state.redb_applied = pos;
        state.redb_ops = 0;
        state.since_snapshot = 0;
        inner.publish_bounds(&state);
        state.snapshot = Some(Copy {
            cursor: Cursor::default(),
            out: tx,
            in_flight: Arc::clone(&in_flight),
            done: false,
        });
        pos
    };
    let fs = &*inner.options.fs;
    let path = inner.snap_dir.join(record::snapshot_name(pos));
    if fs.file_len(&path)?.is_some() {
        // A torn attempt at this very position (never the one in use: that
        // one's position is the base, and nothing new would be logged).
        fs.remove_file(&path)?;
    }
    let file = fs.open(&path, Open::CreateNew)?;
    let written = write_file(inner, &*file, pos, &rx, &in_flight);
    inner.gate().snapshot = None;
    let size = match written {
        Ok(size) => size,
        Err(e) => {
            let _ = fs.remove_file(&path);
            return Err(e);
        }
    };
    file.sync_data()?;
    fs.sync_dir(&inner.snap_dir)?;
    super::kill_point("snapshot-durable");
    // Durable: a restart loads it. The previous one stays, and the log
    // from it, so that a restart whose latest snapshot does not load (a bit
    // flipped since) replays from the previous one (issue 27): only the
    // snapshots and segments before the previous one are needed by no
    // replay.
    let previous = {
        let mut state = inner.gate();
        let previous = state.latest_snapshot;
        state.latest_snapshot = pos;
        state.snapshot_base = previous;
        state.last_snapshot_bytes = size;
        inner.publish_bounds(&state);
        previous
    };
    for name in fs.list(&inner.snap_dir)? {
        if record::parse_snapshot_name(&name).is_some_and(|p| p < previous) {
            fs.remove_file(&inner.snap_dir.join(name))?;
        }
    }
    fs.sync_dir(&inner.snap_dir)?;
    tracing::debug!(
        segment = pos.0,
        offset = pos.1,
        bytes = size,
        "snapshot taken"
    );
    Ok(())
}

/// Commits redb durably with `applied` at `pos` and the current counts (the
/// checkpoint a snapshot begins with).
fn checkpoint_at(inner: &Inner, pos: (u64, u64)) -> StoreResult<()> {
    let db = inner.db()?;
    let mut txn = rs::begin(&db, true)?;
    let o = inner.index_read().occupancy;
    rs::put(
        &txn,
        META,
        rs::META_APPLIED,
        &rs::cat(&[&pos.0.to_be_bytes(), &pos.1.to_be_bytes()]),
    )?;
    rs::put(
        &txn,
        META,
        crate::schema::META_COUNTS,
        &rs::cat(&[&o.bindings.to_be_bytes(), &o.tombstones.to_be_bytes()]),
    )?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_error)?;
    txn.commit().map_err(db_error)
}

/// Writes the header, then the chunks as they come (copying them itself
/// whenever the writer is idle), then the CRC; returns the file's size.
fn write_file(
    inner: &Inner,
    file: &dyn StoreFile,
    pos: (u64, u64),
    rx: &mpsc::Receiver<(Vec<u8>, bool)>,
    in_flight: &AtomicUsize,
) -> StoreResult<u64> {
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&inner.store_id.0);
    le(&mut header, pos.0);
    le(&mut header, pos.1);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    file.write_all_at(&header, 0)?;
    let mut at = header.len() as u64;
    loop {
        let (chunk, last) = match rx.recv_timeout(std::time::Duration::from_millis(2)) {
            Ok(chunk) => chunk,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The writer is idle (or busy elsewhere): copy a chunk here.
                if let Ok(mut state) = inner.writer.try_lock()
                    && let Some(copy) = state.snapshot.as_mut()
                {
                    copy.advance(&inner.index_read());
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(corrupt("the snapshot copy stopped"));
            }
        };
        in_flight.fetch_sub(1, Ordering::SeqCst);
        crc.update(&chunk);
        file.write_all_at(&chunk, at)?;
        super::kill_point("snapshot-chunk");
        at += chunk.len() as u64;
        if last {
            let sum = crc.finalize().to_le_bytes();
            file.write_all_at(&sum, at)?;
            return Ok(at + 4);
        }
    }
}

/// Reads 4 MiB at a time.
const READ_CHUNK: usize = 4 << 20;

/// Loads the snapshot at `path`: `None` if it is not whole (no matching
/// trailer); refused if it is another store's.
///
/// # Errors
/// [`crate::OpenError::Damaged`] (in [`crate::StoreError::Open`]) for
/// another store's snapshot; I/O errors.
pub(super) fn load(
    fs: &dyn StoreFs,
    path: &Path,
    store_id: StoreId,
) -> StoreResult<Option<(Index, u64)>> {
    let file = fs.open(path, Open::Existing)?;
    let len = file.len()?;
    if len < (HEADER + TRAILER) as u64 {
        return Ok(None);
    }
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, 0)?;
    if header[..8] != MAGIC || header[8..12] != VERSION.to_le_bytes() {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER];
    file.read_exact_at(&mut trailer, len - TRAILER as u64)?;
    if trailer[0] != b'Z' {
        return Ok(None);
    }
    let count =
        |i: usize| u64::from_le_bytes(trailer[1 + 8 * i..9 + 8 * i].try_into().unwrap_or_default());
    let body_end = len - 4;
    // One pass: parsed as it is read, the CRC checked at the end (a torn
    // file's index is thrown away); the identity hash is built by a helper
    // thread meanwhile.
    let mut crc = crc32fast::Hasher::new();
    let mut ix = Index::new();
    ix.reserve(count(0) as usize, 0, count(2) as usize);
    ix.set_loading(true);
    let (work, inbox) = mpsc::channel::<Vec<(u64, u32)>>();
    let expected = count(1) as usize;
    let helper = std::thread::Builder::new()
        .name("rltp-store-load".into())
        .spawn(move || {
            let mut builder = Index::identity_builder(expected);
            while let Ok(batch) = inbox.recv() {
                builder.add(&batch);
            }
            builder
        })?;
    let mut parser = Parser::default();
    let mut at = 0u64;
    let mut buf = Vec::with_capacity(READ_CHUNK + 1024);
    let mut parsed = Ok(());
    while at < body_end {
        let n = (body_end - at).min(READ_CHUNK as u64) as usize;
        let start = buf.len();
        buf.resize(start + n, 0);
        file.read_exact_at(&mut buf[start..], at)?;
        crc.update(&buf[start..]);
        at += n as u64;
        if parsed.is_err() {
            buf.clear();
            continue;
        }
        let last = at == body_end;
        let step = if parser.header_done {
            parser.entries(&mut ix, &buf, last)
        } else {
            parser.header_done = true;
            parser
                .entries(&mut ix, &buf[HEADER..], last)
                .map(|n| n + HEADER)
        };
        match step {
            Ok(used) => {
                buf.drain(..used);
            }
            Err(e) => parsed = Err(e),
        }
        let _ = work.send(ix.take_identity_work());
    }
    drop(work);
    let builder = helper
        .join()
        .map_err(|_| corrupt("the snapshot loader's helper thread failed"))?;
    if crc.finalize().to_le_bytes() != trailer[TRAILER - 4..] {
        return Ok(None);
    }
    parsed?;
    ix.install_identity(builder);
    if !parser.ended {
        return Err(corrupt(format!(
            "the snapshot {} ends early",
            path.display()
        )));
    }
    if parser.counts != [count(0), count(1), count(2), count(3), count(4)] {
        return Err(corrupt(format!(
            "the snapshot {} holds other counts than its trailer says",
            path.display()
        )));
    }
    // Whole: only now is its header's store id what was written.
    if header[12..28] != store_id.0 {
        return Err(damaged(format!(
            "the snapshot {} belongs to another store ({})",
            path.display(),
            StoreId(header[12..28].try_into().unwrap_or_default())
        ))
        .into());
    }
    ix.set_loading(false);
    ix.commit(false, None)?;
    Ok(Some((ix, len)))
}

#[derive(Default)]
struct Parser {
    header_done: bool,
    ended: bool,
    /// The queue the `D` entries that follow belong to.
    queue: Option<(Rkid, u32)>,
    /// The snapshot's queue slots → this index's.
    slots: Vec<u32>,
    counts: [u64; 5],
    since_commit: usize,
}

fn u64_le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}
fn u32_le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
fn arr32(b: &[u8], at: usize) -> [u8; 32] {
    b[at..at + 32].try_into().unwrap_or_default()
}

impl Parser {
    /// Parses whole entries of `buf`; returns the bytes consumed.
    fn entries(&mut self, ix: &mut Index, buf: &[u8], last: bool) -> StoreResult<usize> {
        let bad = || corrupt("a snapshot entry is malformed");
        let mut at = 0;
        while at < buf.len() && !self.ended {
            let rest = &buf[at..];
            let need = match rest[0] {
                b'Q' => 1 + 45,
                b'D' => 1 + 69,
                b'P' => 1 + 74,
                b'U' => {
                    if rest.len() < 14 {
                        break;
                    }
                    14 + rest[13] as usize
                }
                b'X' => {
                    if rest.len() < 45 {
                        break;
                    }
                    45 + u32_le(rest, 41) as usize
                }
                b'E' => 1 + 8,
                b'Z' => TRAILER - 4,
                _ => return Err(bad()),
            };
            if rest.len() < need {
                break;
            }
            let e = &rest[..need];
            match e[0] {
                b'Q' => {
                    let rkid = Rkid::from_bytes(arr32(e, 1));
                    let qid = ix.load_queue(&rkid, u64_le(e, 33), e[41] != 0)?;
                    let old = u32_le(e, 42) as usize;
                    if self.slots.len() <= old {
                        self.slots.resize(old + 1, u32::MAX);
                    }
                    self.slots[old] = qid;
                    if self.queue.map(|(r, _)| r) != Some(rkid) {
                        self.counts[0] += 1;
                    }
                    self.queue = Some((rkid, qid));
                }
                b'D' => {
                    let (_, qid) = self.queue.ok_or_else(bad)?;
                    let deposit = Deposit {
                        seq: u64_le(e, 1),
                        id: DepositId(arr32(e, 9)),
                        admitted_at: u64_le(e, 41),
                        give_up_at: u64_le(e, 49),
                        len: u32_le(e, 65),
                    };
                    ix.load_deposit(qid, &deposit, u32_le(e, 57), u32_le(e, 61), e[69] != 0)?;
                    self.counts[1] += 1;
                }
                b'P' => {
                    let rkid = Rkid::from_bytes(arr32(e, 1));
                    let id = DepositId(arr32(e, 33));
                    let forget_at = u64_le(e, 65);
                    let departure = if e[73] != 0 {
                        crate::Departure::GivenUp
                    } else {
                        crate::Departure::Concluded
                    };
                    let record = DepartureRecord {
                        departure,
                        forget_at,
                    };
                    ix.load_departure(&rkid, &id, &record, e[74] != 0)?;
                    self.counts[2] += 1;
                }
                b'U' => {
                    let (at, due) = rs::decode_due(&e[14..])?;
                    let hint = self.slots.get(u32_le(e, 9) as usize).copied();
                    ix.load_due(at, &due, hint.filter(|&q| q != u32::MAX))?;
                    self.counts[3] += 1;
                }
                b'X' => {
                    let rkid = Rkid::from_bytes(arr32(e, 1));
                    ix.put_quarantine((rkid, u64_le(e, 33)), e[45..].to_vec());
                    self.counts[4] += 1;
                }
                b'E' => ix.occupancy_mut().elastic_bytes = u64_le(e, 1),
                _ => self.ended = true,
            }
            at += need;
            self.since_commit += 1;
            if self.since_commit >= CHUNK {
                ix.commit(false, None)?;
                self.since_commit = 0;
            }
        }
        if last && !self.ended && at < buf.len() {
            return Err(bad());
        }
        Ok(at)
    }
}
