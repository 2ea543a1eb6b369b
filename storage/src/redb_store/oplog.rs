//! The operation log: how a [`crate::redb_store::RedbStore`] makes a batch
//! durable with **one** sequential `fdatasync` instead of a durable redb
//! commit.
//!
//! Every write transaction that changes anything writes one *record* into
//! the active segment: the transaction's mutations, in order, with the
//! envelope bytes of its deposits inline. The record is `fdatasync`ed, then
//! redb commits **non-durably** (its pages stay in memory), and the caller
//! is answered. Every `checkpoint_ops` operations (or `checkpoint_bytes`
//! of log) a commit is durable instead; that commit makes every earlier
//! non-durable one durable too. Every commit, durable or not, also writes
//! `applied` = (segment, end of its record) into redb, so whatever commit
//! redb recovers to after a crash names exactly the records it already
//! holds; opening replays the records after it (bounded by the checkpoint
//! interval, never by the data held).
//!
//! ## Record format (all integers big-endian)
//!
//! | offset | bytes | content |
//! |---|---|---|
//! | 0 | 4 | magic `FF 'R' 'L' 'R'` (`0xFF` never occurs in UTF-8 text) |
//! | 4 | 1 | kind: 1 batch, 2 void |
//! | 5 | 3 | zero |
//! | 8 | 8 | the record's own offset in its segment |
//! | 16 | 8 | body length in bytes |
//! | 24 | 32 | SHA-256 of body ‖ bytes 0..24 (a void: of bytes 0..24 only) |
//! | 56 | … | body: operations, back to back |
//!
//! A record is valid only at the offset it names, with its digest intact;
//! replay stops at the first position that does not hold a valid record
//! (a torn tail). A *void* record covers the bytes of a transaction that
//! reached the file but did not commit (so replay steps over them and
//! never applies them).
//!
//! ## Operations
//!
//! | tag | operation | fields |
//! |---|---|---|
//! | 1 | put binding | rkid ‖ binding (57 B, the `bindings` value) |
//! | 2 | remove binding | rkid |
//! | 3 | put tombstone | rkid ‖ tombstone (16 B) |
//! | 4 | remove tombstone | rkid |
//! | 5 | append deposit | rkid ‖ admitted_at u64 ‖ give_up_at u64 ‖ len u32 ‖ envelope bytes |
//! | 6 | remove deposit | rkid ‖ seq u64 |
//! | 7 | put departure | rkid ‖ id ‖ record (9 B) |
//! | 8 | remove departure | rkid ‖ id |
//! | 9 | schedule | key len u8 ‖ `due` key |
//! | 10 | unschedule | key len u8 ‖ `due` key |
//! | 11 | add elastic bytes | delta i64 |
//! | 12 | put declaration | len u32 ‖ revision u64 ‖ document |
//! | 13 | move deposit (compaction) | rkid ‖ seq u64 ‖ len u32 ‖ envelope bytes |
//! | 14 | quarantine | rkid ‖ seq u64 ‖ len u32 ‖ the `quarantine` value |
//!
//! Replaying an operation runs the same store code as the original call,
//! against the state the original saw, so derived values (sequence
//! numbers, counters, segment statistics) come out the same.

use crate::fs::StoreFile;
use crate::{StoreError, StoreResult};
use sha2::{Digest, Sha256};

/// Bytes of a record header.
pub(crate) const HEADER: usize = 56;
const MAGIC: [u8; 4] = [0xFF, b'R', b'L', b'R'];
/// Kind of a record holding a committed transaction's operations.
pub(crate) const BATCH: u8 = 1;
/// Kind of a record whose bytes never committed.
pub(crate) const VOID: u8 = 2;

/// Operation tags (module docs).
pub(crate) mod tag {
    pub(crate) const PUT_BINDING: u8 = 1;
    pub(crate) const REMOVE_BINDING: u8 = 2;
    pub(crate) const PUT_TOMBSTONE: u8 = 3;
    pub(crate) const REMOVE_TOMBSTONE: u8 = 4;
    pub(crate) const APPEND_DEPOSIT: u8 = 5;
    pub(crate) const REMOVE_DEPOSIT: u8 = 6;
    pub(crate) const PUT_DEPARTURE: u8 = 7;
    pub(crate) const REMOVE_DEPARTURE: u8 = 8;
    pub(crate) const SCHEDULE: u8 = 9;
    pub(crate) const UNSCHEDULE: u8 = 10;
    pub(crate) const ADD_ELASTIC: u8 = 11;
    pub(crate) const PUT_DECLARATION: u8 = 12;
    pub(crate) const MOVE_DEPOSIT: u8 = 13;
    pub(crate) const QUARANTINE: u8 = 14;
}

fn prefix(kind: u8, at: u64, body_len: u64) -> [u8; 24] {
    let mut p = [0u8; 24];
    p[..4].copy_from_slice(&MAGIC);
    p[4] = kind;
    p[8..16].copy_from_slice(&at.to_be_bytes());
    p[16..24].copy_from_slice(&body_len.to_be_bytes());
    p
}

/// The header of a batch record at `at` whose body hashed into `body`
/// (a hasher fed with exactly the body bytes).
pub(crate) fn batch_header(at: u64, body_len: u64, mut body: Sha256) -> [u8; HEADER] {
    let p = prefix(BATCH, at, body_len);
    body.update(p);
    let mut h = [0u8; HEADER];
    h[..24].copy_from_slice(&p);
    h[24..].copy_from_slice(&body.finalize());
    h
}

/// The header of a void record at `at` covering `body_len` bytes after it.
pub(crate) fn void_header(at: u64, body_len: u64) -> [u8; HEADER] {
    let p = prefix(VOID, at, body_len);
    let mut h = [0u8; HEADER];
    h[..24].copy_from_slice(&p);
    h[24..].copy_from_slice(&Sha256::digest(p));
    h
}

/// A valid record read from a segment.
pub(crate) struct Record {
    /// [`BATCH`] or [`VOID`].
    pub(crate) kind: u8,
    /// Offset of the first body byte in the segment.
    pub(crate) body_at: u64,
    /// The body (empty for a void).
    pub(crate) body: Vec<u8>,
    /// Offset just past the record.
    pub(crate) end: u64,
}

/// Reads the record at `at` of `file` (`file_len` bytes long): `None` if
/// the bytes there are not a valid record (the end of the log).
///
/// # Errors
/// [`StoreError::Io`] if reading fails.
pub(crate) fn read_record(
    file: &dyn StoreFile,
    file_len: u64,
    at: u64,
) -> StoreResult<Option<Record>> {
    let Some(room) = file_len.checked_sub(at) else {
        return Ok(None);
    };
    if room < HEADER as u64 {
        return Ok(None);
    }
    let mut h = [0u8; HEADER];
    file.read_exact_at(&mut h, at)?;
    let kind = h[4];
    let named_at = u64::from_be_bytes(h[8..16].try_into().unwrap_or_default());
    let body_len = u64::from_be_bytes(h[16..24].try_into().unwrap_or_default());
    if h[..4] != MAGIC
        || !(kind == BATCH || kind == VOID)
        || h[5..8] != [0, 0, 0]
        || named_at != at
        || body_len > room - HEADER as u64
    {
        return Ok(None);
    }
    let body_at = at + HEADER as u64;
    let end = body_at + body_len;
    if kind == VOID {
        if h[24..] != Sha256::digest(&h[..24])[..] {
            return Ok(None);
        }
        return Ok(Some(Record {
            kind,
            body_at,
            body: Vec::new(),
            end,
        }));
    }
    let len =
        usize::try_from(body_len).map_err(|_| StoreError::Corrupt("log record size".into()))?;
    let mut body = vec![0u8; len];
    file.read_exact_at(&mut body, body_at)?;
    let mut hasher = Sha256::new();
    hasher.update(&body);
    hasher.update(&h[..24]);
    if h[24..] != hasher.finalize()[..] {
        return Ok(None);
    }
    Ok(Some(Record {
        kind,
        body_at,
        body,
        end,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::short;
    use crate::fs::{Open, StoreFs};
    use std::sync::Arc;

    /// A file holding `bytes` (on a simulated disk).
    struct TestFile(Arc<dyn StoreFile>);

    impl TestFile {
        fn as_file(&self) -> &dyn StoreFile {
            &*self.0
        }
    }

    fn file_with(bytes: &[u8]) -> (TestFile, u64) {
        let fs = crate::fault_fs::FaultFs::new();
        let path = std::path::Path::new("/f");
        let file = fs
            .open(path, Open::CreateNew)
            .unwrap_or_else(|e| panic!("{e}"));
        file.write_all_at(bytes, 0)
            .unwrap_or_else(|e| panic!("{e}"));
        (TestFile(file), bytes.len() as u64)
    }

    #[test]
    fn a_record_is_valid_only_whole_and_at_its_own_offset() -> StoreResult<()> {
        let body = b"\x0bops".to_vec();
        let mut hasher = Sha256::new();
        hasher.update(&body);
        let at = 16u64;
        let mut bytes = vec![7u8; 16];
        bytes.extend_from_slice(&batch_header(at, body.len() as u64, hasher.clone()));
        bytes.extend_from_slice(&body);
        let (f, len) = file_with(&bytes);
        let record = read_record(f.as_file(), len, at)?.ok_or_else(short)?;
        assert_eq!((record.kind, record.body_at, record.end), (BATCH, 72, 76));
        assert_eq!(record.body, body);
        // Elsewhere, torn, or with one bit flipped: not a record.
        assert!(read_record(f.as_file(), len, 0)?.is_none());
        assert!(read_record(f.as_file(), len - 1, at)?.is_none());
        let mut flipped = bytes.clone();
        flipped[74] ^= 1;
        let (f2, len2) = file_with(&flipped);
        assert!(read_record(f2.as_file(), len2, at)?.is_none());
        // The same record copied to another offset names the wrong one.
        let mut moved = vec![0u8; 8];
        moved.extend_from_slice(&bytes[16..]);
        let (f3, len3) = file_with(&moved);
        assert!(read_record(f3.as_file(), len3, 8)?.is_none());
        Ok(())
    }

    #[test]
    fn a_void_record_covers_whatever_follows_its_header() -> StoreResult<()> {
        let mut bytes = void_header(0, 5).to_vec();
        bytes.extend_from_slice(b"junk!");
        let (f, len) = file_with(&bytes);
        let record = read_record(f.as_file(), len, 0)?.ok_or_else(short)?;
        assert_eq!((record.kind, record.end), (VOID, 61));
        assert!(record.body.is_empty());
        Ok(())
    }
}
