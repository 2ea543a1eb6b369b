//! The bytes of the log store's files: segment headers, log records and
//! the operations inside them (`storage/README.md`, "The log store").
//!
//! ## Segment file `log/<id:016x>.log`
//! | offset | bytes | content |
//! |---|---|---|
//! | 0 | 8 | magic `RLTPLOG1` |
//! | 8 | 8 | segment id, u64 BE |
//! | 16 | 16 | store id |
//! | 32 | 8 | previous segment id (0: the store's first segment) |
//! | 40 | 8 | offset at which the log of the previous segment ended |
//! | 48 | 12 | zero |
//! | 60 | 4 | CRC-32 of bytes 0..60 |
//! | 64 | … | records, back to back; then zeros (segments are zero-filled ahead of use) |
//!
//! The previous-segment link makes the log a chain: replay reads a segment
//! up to the first position that does not hold a valid record, then goes on
//! in the segment whose header names exactly that end. A segment begun by a
//! process that crashed before its records were acknowledged names another
//! end, and is never read.
//!
//! ## Record
//! | offset | bytes | content |
//! |---|---|---|
//! | 0 | 4 | magic `FF 'R' 'L' 'G'` |
//! | 4 | 1 | kind: 1 batch, 2 void |
//! | 5 | 3 | zero |
//! | 8 | 8 | segment id |
//! | 16 | 8 | the record's own offset in its segment |
//! | 24 | 4 | body length |
//! | 28 | 4 | CRC-32 of bytes 0..28 ‖ body (a void: of bytes 0..28) |
//! | 32 | … | body: operations, back to back |
//!
//! Zeros never parse as a record, nor does a record copied to another
//! offset or segment. A *void* record covers bytes of a transaction that
//! reached the file but did not commit. A void is read even where it
//! claims bytes past the end of its file, and the log then ends where it
//! says: builds before issue 27 counted a write a full disk cut short as
//! written, and named that end in what followed (the next segment's
//! header, a snapshot, redb's `applied`); none of the bytes it claims was
//! ever a committed record.
//!
//! ## Operations (all values absolute, so that replaying a suffix of the
//! log over a fuzzy snapshot is idempotent; all integers big-endian)
//! | tag | operation | fields |
//! |---|---|---|
//! | 1 | append deposit | rkid ‖ seq u64 ‖ id ‖ admitted_at u64 ‖ give_up_at u64 ‖ len u32 ‖ bytes |
//! | 2 | remove deposit | rkid ‖ seq u64 |
//! | 3 | move deposit (compaction) | rkid ‖ seq u64 ‖ len u32 ‖ bytes |
//! | 4 | put departure | rkid ‖ id ‖ kind u8 ‖ forget_at u64 |
//! | 5 | remove departure | rkid ‖ id |
//! | 6 | schedule | key len u8 ‖ due key (the redb store's encoding) |
//! | 7 | unschedule | key len u8 ‖ due key |
//! | 8 | elastic bytes | value u64 (after the change) |
//! | 9 | quarantine | rkid ‖ seq u64 ‖ len u32 ‖ record (the redb store's encoding) |
//! | 10 | next seq | rkid ‖ next_seq u64 (the upgrade from the redb layout) |
//! | 20 | put binding | rkid ‖ binding (57 B) |
//! | 21 | remove binding | rkid |
//! | 22 | put tombstone | rkid ‖ tombstone (16 B) |
//! | 23 | remove tombstone | rkid |
//! | 24 | put declaration | len u32 ‖ revision u64 ‖ document |
//!
//! Tags 20–24 are the state redb holds: replay applies them to redb when
//! they lie past redb's own `applied` position.

#[cfg(test)]
use crate::StoreError;
use crate::StoreResult;
use crate::cursor::Cursor;
use crate::fs::StoreFile;

/// Bytes of a segment header.
pub(crate) const SEGMENT_HEADER: u64 = 64;
const SEGMENT_MAGIC: [u8; 8] = *b"RLTPLOG1";
/// Bytes of a record header.
pub(crate) const RECORD_HEADER: usize = 32;
const RECORD_MAGIC: [u8; 4] = [0xFF, b'R', b'L', b'G'];
/// A record holding a committed transaction's operations.
pub(crate) const BATCH: u8 = 1;
/// A record whose bytes never committed.
pub(crate) const VOID: u8 = 2;

/// Operation tags (module docs).
pub(crate) mod tag {
    pub(crate) const APPEND: u8 = 1;
    pub(crate) const REMOVE: u8 = 2;
    pub(crate) const MOVE: u8 = 3;
    pub(crate) const PUT_DEPARTURE: u8 = 4;
    pub(crate) const REMOVE_DEPARTURE: u8 = 5;
    pub(crate) const SCHEDULE: u8 = 6;
    pub(crate) const UNSCHEDULE: u8 = 7;
    pub(crate) const ELASTIC: u8 = 8;
    pub(crate) const QUARANTINE: u8 = 9;
    pub(crate) const NEXT_SEQ: u8 = 10;
    pub(crate) const PUT_BINDING: u8 = 20;
    pub(crate) const REMOVE_BINDING: u8 = 21;
    pub(crate) const PUT_TOMBSTONE: u8 = 22;
    pub(crate) const REMOVE_TOMBSTONE: u8 = 23;
    pub(crate) const PUT_DECLARATION: u8 = 24;
}

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub(crate) id: u64,
    pub(crate) store_id: [u8; 16],
    /// `(previous segment, the offset its log ended at)`; `(0, 0)` for the
    /// store's first segment.
    pub(crate) prev: (u64, u64),
}

impl SegmentHeader {
    pub(crate) fn encode(&self) -> [u8; SEGMENT_HEADER as usize] {
        let mut h = [0u8; SEGMENT_HEADER as usize];
        h[..8].copy_from_slice(&SEGMENT_MAGIC);
        h[8..16].copy_from_slice(&self.id.to_be_bytes());
        h[16..32].copy_from_slice(&self.store_id);
        h[32..40].copy_from_slice(&self.prev.0.to_be_bytes());
        h[40..48].copy_from_slice(&self.prev.1.to_be_bytes());
        let crc = crc32fast::hash(&h[..60]);
        h[60..].copy_from_slice(&crc.to_be_bytes());
        h
    }

    /// The header in `h`, if it is one (`None`: zeros, torn, foreign bytes).
    pub(crate) fn decode(h: &[u8]) -> Option<SegmentHeader> {
        let h = h.get(..SEGMENT_HEADER as usize)?;
        if h[..8] != SEGMENT_MAGIC || crc32fast::hash(&h[..60]).to_be_bytes() != h[60..64] {
            return None;
        }
        let u64_at = |at: usize| u64::from_be_bytes(h[at..at + 8].try_into().unwrap_or_default());
        Some(SegmentHeader {
            id: u64_at(8),
            store_id: h[16..32].try_into().unwrap_or_default(),
            prev: (u64_at(32), u64_at(40)),
        })
    }

    /// Reads the header of `file` (`None` if it holds none).
    ///
    /// # Errors
    /// I/O errors other than a file too short to hold one.
    pub(crate) fn read(file: &dyn StoreFile) -> StoreResult<Option<SegmentHeader>> {
        if file.len()? < SEGMENT_HEADER {
            return Ok(None);
        }
        let mut h = [0u8; SEGMENT_HEADER as usize];
        file.read_exact_at(&mut h, 0)?;
        Ok(SegmentHeader::decode(&h))
    }
}

fn prefix(kind: u8, segment: u64, at: u64, body_len: u32) -> [u8; 28] {
    let mut p = [0u8; 28];
    p[..4].copy_from_slice(&RECORD_MAGIC);
    p[4] = kind;
    p[8..16].copy_from_slice(&segment.to_be_bytes());
    p[16..24].copy_from_slice(&at.to_be_bytes());
    p[24..28].copy_from_slice(&body_len.to_be_bytes());
    p
}

/// The header of a batch record at `at` of `segment` whose body's CRC
/// state is `body` (a hasher fed with exactly the body bytes).
pub(crate) fn batch_header(
    segment: u64,
    at: u64,
    body_len: u32,
    body: &crc32fast::Hasher,
) -> [u8; RECORD_HEADER] {
    let p = prefix(BATCH, segment, at, body_len);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&p);
    crc.combine(body);
    let mut h = [0u8; RECORD_HEADER];
    h[..28].copy_from_slice(&p);
    h[28..].copy_from_slice(&crc.finalize().to_be_bytes());
    h
}

/// The header of a void record at `at` covering `body_len` bytes after it.
pub(crate) fn void_header(segment: u64, at: u64, body_len: u32) -> [u8; RECORD_HEADER] {
    let p = prefix(VOID, segment, at, body_len);
    let mut h = [0u8; RECORD_HEADER];
    h[..28].copy_from_slice(&p);
    h[28..].copy_from_slice(&crc32fast::hash(&p).to_be_bytes());
    h
}

/// A valid record.
pub(crate) struct Record {
    /// [`BATCH`] or [`VOID`].
    pub(crate) kind: u8,
    /// Offset of the record in its segment.
    pub(crate) at: u64,
    /// Offset of the first body byte.
    pub(crate) body_at: u64,
    /// The body (empty for a void).
    pub(crate) body: Vec<u8>,
    /// Offset just past the record.
    pub(crate) end: u64,
}

/// Reads the record at `at` of segment `segment` (`file`, `file_len`
/// bytes): `None` if the bytes there are not a valid record of it.
///
/// # Errors
/// [`StoreError::Io`] if reading fails.
pub(crate) fn read_record(
    file: &dyn StoreFile,
    file_len: u64,
    segment: u64,
    at: u64,
) -> StoreResult<Option<Record>> {
    let room = file_len.saturating_sub(at);
    if room < RECORD_HEADER as u64 {
        return Ok(None);
    }
    let mut h = [0u8; RECORD_HEADER];
    file.read_exact_at(&mut h, at)?;
    let kind = h[4];
    let named_segment = u64::from_be_bytes(h[8..16].try_into().unwrap_or_default());
    let named_at = u64::from_be_bytes(h[16..24].try_into().unwrap_or_default());
    let body_len = u32::from_be_bytes(h[24..28].try_into().unwrap_or_default());
    if h[..4] != RECORD_MAGIC
        || !(kind == BATCH || kind == VOID)
        || h[5..8] != [0, 0, 0]
        || named_segment != segment
        || named_at != at
        || (kind == BATCH && u64::from(body_len) > room - RECORD_HEADER as u64)
    {
        return Ok(None);
    }
    let body_at = at + RECORD_HEADER as u64;
    let end = body_at + u64::from(body_len);
    let stored = u32::from_be_bytes(h[28..32].try_into().unwrap_or_default());
    if kind == VOID {
        // Its body is never read: it may reach past the file (module docs).
        if crc32fast::hash(&h[..28]) != stored {
            return Ok(None);
        }
        return Ok(Some(Record {
            kind,
            at,
            body_at,
            body: Vec::new(),
            end,
        }));
    }
    let mut body = vec![0u8; body_len as usize];
    file.read_exact_at(&mut body, body_at)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h[..28]);
    crc.update(&body);
    if crc.finalize() != stored {
        return Ok(None);
    }
    Ok(Some(Record {
        kind,
        at,
        body_at,
        body,
        end,
    }))
}

/// The name of segment `id`.
pub(crate) fn segment_name(id: u64) -> String {
    format!("{id:016x}.log")
}

/// The segment id a file name names, if it is one.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".log")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The name of the snapshot taken at log position `(segment, offset)`.
pub(crate) fn snapshot_name(at: (u64, u64)) -> String {
    format!("{:016x}-{:016x}.snap", at.0, at.1)
}

/// The log position a snapshot file name names, if it is one.
pub(crate) fn parse_snapshot_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".snap")?;
    let (seg, off) = stem.split_once('-')?;
    if seg.len() != 16 || off.len() != 16 {
        return None;
    }
    Some((
        u64::from_str_radix(seg, 16).ok()?,
        u64::from_str_radix(off, 16).ok()?,
    ))
}

/// A cursor's error for an operation cut short.
#[cfg(test)]
fn short() -> StoreError {
    StoreError::Corrupt("log record: operation cut short".into())
}

/// Reads `len`-prefixed (u8) bytes.
pub(crate) fn take_u8_len<'a>(c: &mut Cursor<'a>) -> StoreResult<&'a [u8]> {
    let len = c.u8()?;
    c.take(usize::from(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Open, StoreFs};

    #[test]
    fn a_record_is_valid_only_whole_in_its_own_segment_and_offset() -> StoreResult<()> {
        let fs = crate::fault_fs::FaultFs::new();
        let file = fs.open(std::path::Path::new("/f"), Open::CreateNew)?;
        let body = b"\x08\0\0\0\0\0\0\0\x07".to_vec();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&body);
        let at = 64u64;
        let mut bytes = vec![0u8; 64];
        bytes.extend_from_slice(&batch_header(3, at, body.len() as u32, &crc));
        bytes.extend_from_slice(&body);
        file.write_all_at(&bytes, 0)?;
        let len = bytes.len() as u64;
        let record = read_record(&*file, len, 3, at)?.ok_or_else(short)?;
        assert_eq!((record.kind, record.body_at, record.end), (BATCH, 96, len));
        assert_eq!(record.body, body);
        assert!(
            read_record(&*file, len, 4, at)?.is_none(),
            "another segment"
        );
        assert!(read_record(&*file, len, 3, 0)?.is_none(), "zeros");
        assert!(read_record(&*file, len - 1, 3, at)?.is_none(), "torn");
        file.write_all_at(&[0x09], len - 1)?;
        assert!(read_record(&*file, len, 3, at)?.is_none(), "a flipped byte");
        Ok(())
    }

    #[test]
    fn a_void_claiming_bytes_past_the_end_of_its_file_ends_the_log_where_it_says() -> StoreResult<()>
    {
        let fs = crate::fault_fs::FaultFs::new();
        let file = fs.open(std::path::Path::new("/f"), Open::CreateNew)?;
        let mut bytes = vec![0u8; 64];
        bytes.extend_from_slice(&void_header(3, 64, 5_000));
        file.write_all_at(&bytes, 0)?;
        let len = bytes.len() as u64;
        let void = read_record(&*file, len, 3, 64)?.ok_or_else(short)?;
        assert_eq!((void.kind, void.end), (VOID, 64 + 32 + 5_000));
        assert!(read_record(&*file, len, 3, void.end)?.is_none());
        // A batch record is read only whole.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[0; 10]);
        file.write_all_at(&batch_header(3, 64, 10, &crc), 64)?;
        assert!(read_record(&*file, len, 3, 64)?.is_none());
        Ok(())
    }

    #[test]
    fn segment_headers_and_names_round_trip() {
        let h = SegmentHeader {
            id: 9,
            store_id: [7; 16],
            prev: (8, 4096),
        };
        assert_eq!(SegmentHeader::decode(&h.encode()), Some(h));
        let mut torn = h.encode();
        torn[40] ^= 1;
        assert_eq!(SegmentHeader::decode(&torn), None);
        assert_eq!(SegmentHeader::decode(&[0; 64]), None);
        assert_eq!(parse_segment_name(&segment_name(0xab)), Some(0xab));
        assert_eq!(parse_segment_name("0000000000000001.seg"), None);
        assert_eq!(
            parse_snapshot_name(&snapshot_name((5, 1 << 40))),
            Some((5, 1 << 40))
        );
        assert_eq!(parse_snapshot_name("x.snap"), None);
    }
}
