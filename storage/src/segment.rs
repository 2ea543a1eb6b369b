//! Append-only segment files: where [`crate::redb_store::RedbStore`] keeps
//! envelope bytes (key–value separation).
//!
//! ## File format
//! `<dir>/segments/<id as 16 lowercase hex digits>.seg`:
//!
//! | offset | bytes | content |
//! |---|---|---|
//! | 0 | 8 | magic `RLTPSEG1` |
//! | 8 | 8 | segment id, u64 big-endian |
//! | 16 | … | operation-log records ([`crate::oplog`]), back to back |
//!
//! A segment file is created once, with `O_EXCL`, and never truncated: an
//! existing file of the same id is adopted only if it holds its header and
//! nothing else ([`ActiveSegment::create`]).
//!
//! Envelope bytes live inside the records of the transactions that
//! admitted them. A deposit is located by `(segment, offset, len)` held in
//! redb; its integrity is the deposit id (SHA-256), verified on every read.
//! (Stores written before the operation log hold bare envelope bytes,
//! which stay readable the same way.)
//!
//! ## Writing
//! Exactly one segment is *active*: the write transaction appends into an
//! in-memory buffer ([`ActiveSegment::append`]), spilled to the file with
//! positional writes once it holds [`SPILL_BYTES`]; at commit the rest is
//! written and the file is `fdatasync`ed ([`ActiveSegment::sync`]) before
//! the redb commit that references the bytes. Offsets are assigned from
//! [`ActiveSegment::end`]; after a transaction that is not committed the end
//! falls back to what reached the file, so only bytes that were never written
//! are reused, never bytes that a (possibly) durable commit references.

use crate::fs::{Open, StoreFile, StoreFs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first 8 bytes of every segment file.
pub(crate) const MAGIC: [u8; 8] = *b"RLTPSEG1";
/// Bytes before the first envelope: magic ‖ id (u64 BE).
pub(crate) const HEADER_LEN: u64 = 16;
/// The write buffer is spilled to the file (without sync) past this size,
/// so a large batch does not hold all its bytes in memory.
pub(crate) const SPILL_BYTES: usize = 1 << 20;

/// The sub-directory of the store directory that holds segment files.
pub(crate) fn segments_dir(store_dir: &Path) -> PathBuf {
    store_dir.join("segments")
}

/// The path of segment `id`.
pub(crate) fn segment_path(segments_dir: &Path, id: u64) -> PathBuf {
    segments_dir.join(format!("{id:016x}.seg"))
}

/// Parses a segment file name back to its id (`None` for other files).
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".seg")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The header every segment `id` starts with.
pub(crate) fn header(id: u64) -> [u8; HEADER_LEN as usize] {
    let mut header = [0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..].copy_from_slice(&id.to_be_bytes());
    header
}

/// Opens an existing segment for reading.
pub(crate) fn open_for_read(
    fs: &dyn StoreFs,
    segments_dir: &Path,
    id: u64,
) -> io::Result<Arc<dyn StoreFile>> {
    fs.open(&segment_path(segments_dir, id), Open::Existing)
}

/// Reads `len` bytes at `offset` (a short file is an error: the bytes a
/// committed transaction references must be there).
pub(crate) fn read_at(file: &dyn StoreFile, offset: u64, len: u32) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, offset)?;
    Ok(bytes)
}

/// Deletes segment `id` (already gone is fine: deletion is idempotent so it
/// can be retried after a crash).
pub(crate) fn remove(fs: &dyn StoreFs, segments_dir: &Path, id: u64) -> io::Result<()> {
    match fs.remove_file(&segment_path(segments_dir, id)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// What [`scan`] found: segment files `(id, length)`, ascending by id,
/// and the names of anything else there.
pub(crate) type Scan = (Vec<(u64, u64)>, Vec<String>);

/// The segment files in `segments_dir` and anything else there.
pub(crate) fn scan(fs: &dyn StoreFs, segments_dir: &Path) -> io::Result<Scan> {
    let mut found = Vec::new();
    let mut strays = Vec::new();
    for name in fs.list(segments_dir)? {
        match parse_segment_name(&name) {
            Some(id) => {
                let len = fs
                    .file_len(&segment_path(segments_dir, id))?
                    .unwrap_or_default();
                found.push((id, len));
            }
            None => strays.push(name),
        }
    }
    found.sort_unstable();
    Ok((found, strays))
}

/// The segment appends go to, owned by the (single) writer.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    /// Segment id.
    pub(crate) id: u64,
    /// The file, shared with readers.
    pub(crate) file: Arc<dyn StoreFile>,
    /// The next offset to assign.
    end: u64,
    /// Bytes that reached the file (`written ≤ end`); `buffer` holds
    /// `[written, end)`.
    written: u64,
    /// Bytes known durable (`synced ≤ written`).
    synced: u64,
    buffer: Vec<u8>,
}

impl ActiveSegment {
    /// Creates segment `id`, writes its header and makes the file and its
    /// directory entry durable. **Never truncates anything**: if a file of
    /// that id exists, it is adopted only if it holds nothing but the same
    /// header (or a prefix of it: the orphan of a rotation whose
    /// transaction never committed, see the module docs of
    /// `redb_store`); anything else is refused, because it holds log
    /// records this store does not know of.
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] for a file that holds more;
    /// other I/O errors.
    pub(crate) fn create(
        fs: &dyn StoreFs,
        segments_dir: &Path,
        id: u64,
    ) -> io::Result<ActiveSegment> {
        let path = segment_path(segments_dir, id);
        let header = header(id);
        let file = match fs.open(&path, Open::CreateNew) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let file = fs.open(&path, Open::Existing)?;
                let len = file.len()?;
                let mut held = vec![0u8; len.min(HEADER_LEN + 1) as usize];
                file.read_exact_at(&mut held, 0)?;
                // A header cut short, or one whose sectors never reached
                // the disk (zeros), is that orphan too.
                let orphan = held[..] == header[..held.len()] || held.iter().all(|&b| b == 0);
                if len > HEADER_LEN || !orphan {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!(
                            "segment file {} already exists and holds {len} bytes",
                            path.display()
                        ),
                    ));
                }
                file
            }
            Err(e) => return Err(e),
        };
        file.write_all_at(&header, 0)?;
        file.sync_data()?;
        fs.sync_dir(segments_dir)?;
        Ok(ActiveSegment {
            id,
            file,
            end: HEADER_LEN,
            written: HEADER_LEN,
            synced: HEADER_LEN,
            buffer: Vec::new(),
        })
    }

    /// Opens existing segment `id` to append from `at` (what follows `at`
    /// is overwritten), after `fdatasync`ing what the file holds, so that
    /// bytes a crashed process left in the page cache are durable before
    /// anything is built on them.
    pub(crate) fn reopen(
        fs: &dyn StoreFs,
        segments_dir: &Path,
        id: u64,
        at: u64,
    ) -> io::Result<ActiveSegment> {
        let file = fs.open(&segment_path(segments_dir, id), Open::Existing)?;
        file.sync_data()?;
        Ok(ActiveSegment {
            id,
            file,
            end: at,
            written: at,
            synced: at,
            buffer: Vec::new(),
        })
    }

    /// Appends to `file` (segment `id`) from `at` on; the bytes before `at`
    /// are taken as durable (the log store's segments, whose header the
    /// caller wrote and whose first sync covers it).
    pub(crate) fn over(id: u64, file: Arc<dyn StoreFile>, at: u64) -> ActiveSegment {
        ActiveSegment {
            id,
            file,
            end: at,
            written: at,
            synced: at,
            buffer: Vec::new(),
        }
    }

    /// The next offset to assign (the extent once everything is synced).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Bytes that reached the file (`≤ end`).
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Continues appending at `at` (after a replay found the log's end
    /// there); nothing may be buffered.
    pub(crate) fn resume_at(&mut self, at: u64) {
        self.buffer.clear();
        self.end = at;
        self.written = at;
        self.synced = self.synced.min(at);
    }

    /// Overwrites `bytes` at `offset`, which was handed out by
    /// [`ActiveSegment::append`] (a record header reserved earlier): in the
    /// buffer if it is still there, else in the file.
    pub(crate) fn overwrite(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        if offset >= self.written {
            let start = usize::try_from(offset - self.written).map_err(io::Error::other)?;
            let stop = start + bytes.len();
            if let Some(slot) = self.buffer.get_mut(start..stop) {
                slot.copy_from_slice(bytes);
                return Ok(());
            }
        }
        self.file.write_all_at(bytes, offset)
    }

    /// Writes `bytes` at `offset` below [`ActiveSegment::written`], in the
    /// file (voiding a record that reached it); the caller syncs.
    pub(crate) fn overwrite_in_file(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, offset)
    }

    /// Appends `bytes` (buffered); returns their offset.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let offset = self.end;
        self.buffer.extend_from_slice(bytes);
        self.end += bytes.len() as u64;
        if self.buffer.len() >= SPILL_BYTES {
            self.spill()?;
        }
        Ok(offset)
    }

    /// Bytes at `[offset, offset+len)` that are still in the buffer, if
    /// the range lies entirely there (appended by the open transaction).
    pub(crate) fn buffered(&self, offset: u64, len: u32) -> Option<Vec<u8>> {
        let start = usize::try_from(offset.checked_sub(self.written)?).ok()?;
        let stop = start.checked_add(len as usize)?;
        self.buffer.get(start..stop).map(<[u8]>::to_vec)
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let at = self.written;
        match self.file.write_all_counted(&self.buffer, at) {
            Ok(()) => {
                self.written = self.end;
                self.buffer.clear();
                Ok(())
            }
            Err(short) => {
                // Only what reached the file counts as written (a full
                // disk takes a write part of the way): never a byte past
                // the file's end, so that whatever later claims the range
                // (a void record) claims bytes that are there. A byte the
                // file may hold though the write failed (it lies within
                // the file's length: a zero-filled segment) counts too, so
                // that it is never handed out again.
                let reached = at + short.written as u64;
                let within = self.file.len().map_or(reached, |len| len.min(self.end));
                self.written = reached.max(within);
                let kept = usize::try_from(self.written - at).map_err(io::Error::other)?;
                self.buffer.drain(..kept.min(self.buffer.len()));
                Err(short.error)
            }
        }
    }

    /// Writes the buffer to the file, without syncing it (a deferred
    /// commit: the syncer `fdatasync`s the file later).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.spill()
    }

    /// Writes the buffer and `fdatasync`s the file: every byte appended so
    /// far is durable when this returns `Ok`. Called before the redb commit.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.spill()?;
        if self.written > self.synced {
            self.file.sync_data()?;
            self.synced = self.written;
        }
        Ok(())
    }

    /// Forgets the buffer of a transaction that will not commit. Offsets
    /// that never reached the file are handed out again; those that did are
    /// dead tail bytes.
    pub(crate) fn abandon(&mut self) {
        self.buffer.clear();
        self.end = self.written;
    }

    /// Abandons a transaction whose log record starts at `start` (if it
    /// opened one): returns the `[start, end)` of it that reached the file
    /// already, which must be voided before anything else is written. A
    /// part shorter than `min_void` (a record header: too short to hold a
    /// record, or a void) is no record: the offsets from `start` on are
    /// handed out again, and the next record's header overwrites it.
    pub(crate) fn abandon_record(
        &mut self,
        start: Option<u64>,
        min_void: u64,
    ) -> Option<(u64, u64)> {
        let reached = start
            .filter(|&start| self.written() > start)
            .map(|start| (start, self.written()));
        self.abandon();
        match reached {
            Some((start, written)) if written - start < min_void => {
                self.resume_at(start);
                None
            }
            reached => reached,
        }
    }
}

/// Segment `id`'s file from `files`, opened with `open` and kept there on
/// first use; a file that is gone is damage ([`crate::StoreError::Corrupt`]).
///
/// # Errors
/// [`crate::StoreError::Corrupt`] for a missing file, I/O errors otherwise.
pub(crate) fn cached_file(
    files: &std::sync::Mutex<std::collections::HashMap<u64, Arc<dyn StoreFile>>>,
    id: u64,
    open: impl FnOnce() -> io::Result<Arc<dyn StoreFile>>,
) -> crate::StoreResult<Arc<dyn StoreFile>> {
    let mut files = crate::failure::lock(files);
    if let Some(file) = files.get(&id) {
        return Ok(Arc::clone(file));
    }
    let file = open().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            crate::failure::corrupt(format!("segment {id:016x} is missing: {e}"))
        } else {
            crate::StoreError::Io(e)
        }
    })?;
    files.insert(id, Arc::clone(&file));
    Ok(file)
}
