//! Backup archives (`rltp-backup/1`): one consistent copy of an embedded
//! store, taken while the carrier keeps serving, plus whatever files the
//! caller adds (the carrier adds its declaration key and TLS identity).
//!
//! An archive describes a carrier **data directory**: the store in
//! `store/`, other files beside it. Its manifest names the store's layout
//! (`layout log`: the log store, the default; `layout redb`, or no such
//! line in archives made before it: the redb store).
//!
//! ## What is copied
//! - every row of redb's tables, as one read transaction sees them (a
//!   logical copy: the restore writes them into a fresh redb file, so the
//!   archive does not depend on redb's file layout);
//! - the log store ([`crate::log_store::LogBackup`]): its latest durable
//!   snapshot file, and every log segment a held deposit lives in or the
//!   snapshot's replay reads, the last one up to where the log stood at
//!   that read transaction (redb's `applied` row says so);
//! - the redb store ([`RedbStore::snapshot`]): every segment the snapshot
//!   references, from byte 0 up to its committed extent, and nothing past
//!   it (bytes past the extent belong to batches committed after the
//!   snapshot, or to none).
//!
//! Files are append-only below what is copied and held open, so the copy
//! is exactly what the rows reference. The writer is never paused.
//!
//! ## Format
//! All integers big-endian.
//!
//! ```text
//! magic "RLTPBAK1"
//! record*:
//!   0x01 manifest   len u32 ‖ UTF-8 lines "name value"         (first record, once)
//!   0x02 row        table_len u8 ‖ table ‖ key_len u32 ‖ key ‖ value_len u32 ‖ value
//!   0x03 file       path_len u16 ‖ path ‖ mode u32 ‖ len u64 ‖ bytes
//!   0x04 end        rows u64 ‖ files u64 ‖ sha256 (32 B)       (last record)
//! ```
//!
//! The `end` digest is the SHA-256 of every archive byte before it. A file
//! `path` is relative, `/`-separated, without `.` or `..` components; under
//! `store/` only `store/segments/<id:016x>.seg` may appear.
//!
//! ## Restoring
//! [`unpack`] writes an archive into a new directory, checking every bound
//! as it reads and the digest at the end; [`check_unpacked`] then opens the
//! store there as the log store — which upgrades a redb store's layout,
//! so an older archive restores into the current layout — and runs
//! [`LogStore::integrity_check`] (every counter, index and deposit
//! SHA-256, the index against its rebuild from the files), and compares
//! the counts with the manifest. Only then may the caller swap the
//! directory in.

use crate::fs::StoreFile;
use crate::log_store::{LogStore, is_store_file};
use crate::redb_store::{Importer, RedbStore, parse_segment_file_name, segment_file_name};
use crate::store_id::{IntegrityReport, StoreId};
use crate::{Ms, Occupancy, ReadTxn, StoreError, StoreResult};
use sha2::{Digest as _, Sha256};
use std::fs::OpenOptions;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first 8 bytes of every archive.
pub const MAGIC: [u8; 8] = *b"RLTPBAK1";
/// The store's directory inside a data directory (and an archive).
pub use crate::store_id::STORE_DIR;
/// The archive format name written in the manifest.
pub const FORMAT: &str = "rltp-backup/1";

const TAG_MANIFEST: u8 = 1;
const TAG_ROW: u8 = 2;
const TAG_FILE: u8 = 3;
const TAG_END: u8 = 4;

/// Bounds checked while reading, before the bytes they bound are read.
const MAX_MANIFEST: u32 = 64 << 10;
const MAX_TABLE_NAME: u8 = 64;
const MAX_KEY: u32 = 4 << 10;
const MAX_VALUE: u32 = 16 << 20;
const MAX_PATH: u16 = 1024;

/// Why a backup could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// Reading or writing a file or stream failed.
    #[error("backup i/o error: {0}")]
    Io(#[from] io::Error),
    /// The store failed (or a restored store failed its integrity check).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The input is not a complete, intact `rltp-backup/1` archive.
    #[error("not a valid rltp-backup/1 archive: {0}")]
    Format(String),
    /// The restored store's counts differ from the archive's manifest.
    #[error("the restored store does not match its manifest: {0}")]
    Mismatch(String),
}

fn format_error(what: impl Into<String>) -> BackupError {
    BackupError::Format(what.into())
}

/// What an archive says about itself (its first record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The clock reading (ms since the Unix epoch) taken just **before**
    /// the snapshot began: every deposit admitted before this instant is in
    /// the archive; anything admitted after it may not be.
    pub taken_at: Ms,
    /// What wrote the archive (e.g. `rltp-carrier 0.1.0`).
    pub producer: String,
    /// The snapshot's counters (bindings, tombstones, deposits, bytes).
    pub occupancy: Occupancy,
    /// The declaration revision the snapshot holds, if any.
    pub declaration_revision: Option<u64>,
    /// Store files copied (segments, the snapshot), a count.
    pub segments: u64,
    /// Their bytes.
    pub segment_bytes: u64,
    /// The store's layout: `log` or `redb`.
    pub layout: String,
}

impl Manifest {
    fn render(&self) -> String {
        let o = &self.occupancy;
        let revision = self
            .declaration_revision
            .map_or_else(|| "none".to_owned(), |r| r.to_string());
        format!(
            "format {FORMAT}\nproducer {}\ntaken-at-ms {}\nbindings {}\ntombstones {}\n\
             deposits {}\ndeposit-bytes {}\nelastic-bytes {}\ndeclaration-revision {revision}\n\
             segments {}\nsegment-bytes {}\nlayout {}\n",
            self.producer.replace('\n', " "),
            self.taken_at,
            o.bindings,
            o.tombstones,
            o.deposits,
            o.total_bytes,
            o.elastic_bytes,
            self.segments,
            self.segment_bytes,
            self.layout,
        )
    }

    fn parse(text: &str) -> Result<Manifest, BackupError> {
        let mut fields = std::collections::HashMap::new();
        for line in text.lines() {
            let (name, value) = line
                .split_once(' ')
                .ok_or_else(|| format_error(format!("manifest line {line:?}")))?;
            if fields.insert(name, value).is_some() {
                return Err(format_error(format!("manifest names {name} twice")));
            }
        }
        let get = |name: &str| {
            fields
                .get(name)
                .copied()
                .ok_or_else(|| format_error(format!("manifest lacks {name}")))
        };
        let number = |name: &str| -> Result<u64, BackupError> {
            let text = get(name)?;
            text.parse()
                .map_err(|_| format_error(format!("manifest {name} {text:?} is not a count")))
        };
        if get("format")? != FORMAT {
            return Err(format_error(format!("format {:?}", get("format")?)));
        }
        let declaration_revision = match get("declaration-revision")? {
            "none" => None,
            _ => Some(number("declaration-revision")?),
        };
        Ok(Manifest {
            taken_at: number("taken-at-ms")?,
            producer: get("producer")?.to_owned(),
            occupancy: Occupancy {
                total_bytes: number("deposit-bytes")?,
                bindings: number("bindings")?,
                deposits: number("deposits")?,
                tombstones: number("tombstones")?,
                elastic_bytes: number("elastic-bytes")?,
            },
            declaration_revision,
            segments: number("segments")?,
            segment_bytes: number("segment-bytes")?,
            // Archives made before the log store name no layout.
            layout: match fields.get("layout").copied() {
                None | Some("redb") => "redb".to_owned(),
                Some("log") => "log".to_owned(),
                Some(other) => return Err(format_error(format!("manifest layout {other:?}"))),
            },
        })
    }
}

/// A file the caller adds to an archive, relative to the data directory
/// (never under `store/`).
#[derive(Clone, PartialEq, Eq)]
pub struct ExtraFile {
    /// Relative `/`-separated path, e.g. `declaration.key`.
    pub path: String,
    /// Unix permission bits to restore it with (e.g. `0o600`).
    pub mode: u32,
    /// Its contents.
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ExtraFile {
    // Keys travel in here: never print the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtraFile")
            .field("path", &self.path)
            .field("mode", &format_args!("{:o}", self.mode))
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// What an archive held (written or read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// The manifest.
    pub manifest: Manifest,
    /// Table rows, a count.
    pub rows: u64,
    /// Files (segments and extra files), a count.
    pub files: u64,
    /// Archive length, bytes.
    pub archive_bytes: u64,
    /// The extra files' paths (not under `store/`).
    pub extra_files: Vec<String>,
}

/// Counts and hashes every byte that passes.
struct Hashing<T> {
    inner: T,
    sha: Sha256,
    bytes: u64,
}

impl<T> Hashing<T> {
    fn new(inner: T) -> Self {
        Hashing {
            inner,
            sha: Sha256::new(),
            bytes: 0,
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

fn u16_len(n: usize, what: &str) -> Result<u16, BackupError> {
    u16::try_from(n).map_err(|_| format_error(format!("{what} of {n} bytes")))
}

fn u32_len(n: usize, what: &str) -> Result<u32, BackupError> {
    u32::try_from(n).map_err(|_| format_error(format!("{what} of {n} bytes")))
}

/// What a backup copies of a store ([`BackupSource::backup_image`]).
pub struct BackupImage<'a> {
    layout: &'static str,
    occupancy: Occupancy,
    declaration_revision: Option<u64>,
    rows: Rows<'a>,
    /// `(path inside the store dir, file, bytes to copy)`.
    files: Vec<(String, Arc<dyn StoreFile>, u64)>,
}

type Rows<'a> =
    Box<dyn FnOnce(&mut dyn FnMut(&str, &[u8], &[u8]) -> StoreResult<()>) -> StoreResult<()> + 'a>;

/// An embedded store a backup can be taken of.
pub trait BackupSource {
    /// A consistent copy, taken without pausing the writer.
    ///
    /// # Errors
    /// [`StoreError`] if it cannot be taken.
    fn backup_image(&self) -> StoreResult<BackupImage<'_>>;
}

impl BackupSource for LogStore {
    fn backup_image(&self) -> StoreResult<BackupImage<'_>> {
        let copy = self.backup_source()?;
        let files = copy.files().to_vec();
        Ok(BackupImage {
            layout: "log",
            occupancy: copy.occupancy(),
            declaration_revision: copy.declaration_revision(),
            rows: Box::new(move |f| copy.for_each_row(f)),
            files,
        })
    }
}

impl BackupSource for RedbStore {
    fn backup_image(&self) -> StoreResult<BackupImage<'_>> {
        let snapshot = self.snapshot()?;
        let mut files = Vec::new();
        for (id, extent) in snapshot.segments()? {
            files.push((
                format!("segments/{}", segment_file_name(id)),
                snapshot.segment_file(id)?,
                extent,
            ));
        }
        Ok(BackupImage {
            layout: "redb",
            occupancy: snapshot.read().occupancy()?,
            declaration_revision: snapshot.read().declaration()?.map(|d| d.revision),
            rows: Box::new(move |f| snapshot.for_each_row(f)),
            files,
        })
    }
}

/// Writes a consistent backup of `store` to `out`: reads `clock` (ms since
/// the Unix epoch) for the manifest's `taken_at`, then takes the copy (so
/// everything admitted before `taken_at` is in it), then writes the rows,
/// the store's files, and `extra` files. Never pauses the store's writer.
///
/// # Errors
/// [`BackupError`]; `out` then holds no `end` record and is not a valid
/// archive.
pub fn write_backup(
    store: &dyn BackupSource,
    clock: &dyn Fn() -> Ms,
    producer: &str,
    extra: &[ExtraFile],
    out: impl Write,
) -> Result<ArchiveSummary, BackupError> {
    for file in extra {
        check_path(&file.path, false)?;
    }
    let taken_at = clock();
    let image = store.backup_image()?;
    let manifest = Manifest {
        taken_at,
        producer: producer.to_owned(),
        occupancy: image.occupancy,
        declaration_revision: image.declaration_revision,
        segments: image.files.len() as u64,
        segment_bytes: image.files.iter().map(|(_, _, len)| len).sum(),
        layout: image.layout.to_owned(),
    };
    let mut w = Hashing::new(BufWriter::with_capacity(1 << 20, out));
    w.write_all(&MAGIC)?;
    let text = manifest.render();
    w.write_all(&[TAG_MANIFEST])?;
    w.write_all(&u32_len(text.len(), "manifest")?.to_be_bytes())?;
    w.write_all(text.as_bytes())?;

    let mut rows = 0u64;
    let BackupImage {
        rows: write_rows,
        files: store_files,
        ..
    } = image;
    write_rows(&mut |table, key, value| {
        let mut put = || -> Result<(), BackupError> {
            let name = u8::try_from(table.len())
                .map_err(|_| format_error(format!("table name {table:?}")))?;
            w.write_all(&[TAG_ROW, name])?;
            w.write_all(table.as_bytes())?;
            w.write_all(&u32_len(key.len(), "key")?.to_be_bytes())?;
            w.write_all(key)?;
            w.write_all(&u32_len(value.len(), "value")?.to_be_bytes())?;
            w.write_all(value)?;
            Ok(())
        };
        put().map_err(|e| match e {
            BackupError::Io(e) => StoreError::Io(e),
            other => StoreError::Corrupt(other.to_string()),
        })?;
        rows += 1;
        Ok(())
    })?;

    let mut files = 0u64;
    for (path, file, extent) in &store_files {
        let path = format!("{STORE_DIR}/{path}");
        write_file_header(&mut w, &path, 0o600, *extent)?;
        let mut copied = 0u64;
        let mut chunk = vec![0u8; 1 << 20];
        while copied < *extent {
            let n = (*extent - copied).min(chunk.len() as u64) as usize;
            if file.read_exact_at(&mut chunk[..n], copied).is_err() {
                break;
            }
            w.write_all(&chunk[..n])?;
            copied += n as u64;
        }
        if copied != *extent {
            return Err(BackupError::Store(StoreError::Corrupt(format!(
                "{path} is {copied} bytes, the copy needs {extent}"
            ))));
        }
        files += 1;
    }
    drop(store_files);
    for file in extra {
        write_file_header(&mut w, &file.path, file.mode, file.bytes.len() as u64)?;
        w.write_all(&file.bytes)?;
        files += 1;
    }
    w.write_all(&[TAG_END])?;
    w.write_all(&rows.to_be_bytes())?;
    w.write_all(&files.to_be_bytes())?;
    let digest = w.sha.clone().finalize();
    w.inner.write_all(&digest)?;
    w.inner.flush()?;
    Ok(ArchiveSummary {
        manifest,
        rows,
        files,
        archive_bytes: w.bytes + digest.len() as u64,
        extra_files: extra.iter().map(|f| f.path.clone()).collect(),
    })
}

fn write_file_header(
    w: &mut impl Write,
    path: &str,
    mode: u32,
    len: u64,
) -> Result<(), BackupError> {
    w.write_all(&[TAG_FILE])?;
    w.write_all(&u16_len(path.len(), "path")?.to_be_bytes())?;
    w.write_all(path.as_bytes())?;
    w.write_all(&mode.to_be_bytes())?;
    w.write_all(&len.to_be_bytes())?;
    Ok(())
}

/// Checks a file path of an archive: relative, `/`-separated, no empty,
/// `.` or `..` component; under `store/` only a segment file (and only
/// when `store_allowed`).
fn check_path(path: &str, store_allowed: bool) -> Result<(), BackupError> {
    let parts: Vec<&str> = path.split('/').collect();
    let bad = path.is_empty()
        || path.len() > usize::from(MAX_PATH)
        || parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('\0'));
    if bad {
        return Err(format_error(format!("file path {path:?}")));
    }
    if parts.first() == Some(&STORE_DIR) {
        let segment = matches!(
            parts.as_slice(),
            [_, "segments", name] if parse_segment_file_name(name).is_some()
        ) || matches!(parts.as_slice(), [_, dir, name] if is_store_file(&format!("{dir}/{name}")));
        if !(store_allowed && segment) {
            return Err(format_error(format!("file path {path:?} inside the store")));
        }
    }
    Ok(())
}

fn read_array<const N: usize>(r: &mut impl Read) -> Result<[u8; N], BackupError> {
    let mut buf = [0u8; N];
    r.read_exact(&mut buf).map_err(truncated)?;
    Ok(buf)
}

fn read_vec(r: &mut impl Read, len: usize) -> Result<Vec<u8>, BackupError> {
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).map_err(truncated)?;
    Ok(buf)
}

fn truncated(e: io::Error) -> BackupError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        format_error("truncated (no end record)")
    } else {
        BackupError::Io(e)
    }
}

/// Reads an archive into `dest`, which must not exist (it is created):
/// the store rows into a fresh `dest/store/carrier.redb`, the segments
/// into `dest/store/segments/`, the extra files beside them (with their
/// modes). Every length is checked against its bound before the bytes it
/// bounds are read; the digest is checked at the end and nothing may
/// follow it. On an error `dest` holds a partial copy: the caller removes
/// it.
///
/// # Errors
/// [`BackupError::Format`] for anything but an intact archive;
/// [`BackupError::Io`], [`BackupError::Store`].
pub fn unpack(input: impl Read, dest: &Path) -> Result<ArchiveSummary, BackupError> {
    read_archive(input, Some(dest))
}

/// Reads a whole archive and checks its structure, bounds and digest
/// without writing anything (a downloaded backup's completeness check).
/// The store inside is not opened: [`unpack`] and [`check_unpacked`] do
/// that.
///
/// # Errors
/// As [`unpack`].
pub fn scan(input: impl Read) -> Result<ArchiveSummary, BackupError> {
    read_archive(input, None)
}

/// A row record after its tag: table name, key, value.
fn read_row(r: &mut impl Read) -> Result<(String, Vec<u8>, Vec<u8>), BackupError> {
    let name_len = read_array::<1>(r)?[0];
    if name_len == 0 || name_len > MAX_TABLE_NAME {
        return Err(format_error(format!("table name of {name_len} bytes")));
    }
    let name = String::from_utf8(read_vec(r, usize::from(name_len))?)
        .map_err(|_| format_error("table name is not UTF-8"))?;
    let key_len = u32::from_be_bytes(read_array(r)?);
    if key_len > MAX_KEY {
        return Err(format_error(format!("key of {key_len} bytes")));
    }
    let key = read_vec(r, key_len as usize)?;
    let value_len = u32::from_be_bytes(read_array(r)?);
    if value_len > MAX_VALUE {
        return Err(format_error(format!("value of {value_len} bytes")));
    }
    let value = read_vec(r, value_len as usize)?;
    Ok((name, key, value))
}

/// A file record's header after its tag: path (checked), mode, length.
fn read_file_header(r: &mut impl Read) -> Result<(String, u32, u64), BackupError> {
    let path_len = u16::from_be_bytes(read_array(r)?);
    if path_len > MAX_PATH {
        return Err(format_error(format!("path of {path_len} bytes")));
    }
    let path = String::from_utf8(read_vec(r, usize::from(path_len))?)
        .map_err(|_| format_error("path is not UTF-8"))?;
    check_path(&path, true)?;
    let mode = u32::from_be_bytes(read_array(r)?) & 0o777;
    let len = u64::from_be_bytes(read_array(r)?);
    Ok((path, mode, len))
}

fn read_archive(input: impl Read, dest: Option<&Path>) -> Result<ArchiveSummary, BackupError> {
    let store_dir = dest.map(|d| d.join(STORE_DIR));
    if let (Some(dest), Some(store_dir)) = (dest, &store_dir) {
        std::fs::create_dir(dest)?;
        std::fs::create_dir(store_dir)?;
    }
    let mut r = Hashing::new(BufReader::with_capacity(1 << 20, input));
    if read_array::<8>(&mut r)? != MAGIC {
        return Err(format_error("wrong magic (not an rltp backup)"));
    }
    if read_array::<1>(&mut r)? != [TAG_MANIFEST] {
        return Err(format_error("the manifest is not the first record"));
    }
    let len = u32::from_be_bytes(read_array(&mut r)?);
    if len > MAX_MANIFEST {
        return Err(format_error(format!("manifest of {len} bytes")));
    }
    let text = String::from_utf8(read_vec(&mut r, len as usize)?)
        .map_err(|_| format_error("manifest is not UTF-8"))?;
    let manifest = Manifest::parse(&text)?;

    let mut importer = match &store_dir {
        Some(dir) => Some(Some(Importer::create(dir)?)),
        None => Some(None),
    };
    let (mut rows, mut files) = (0u64, 0u64);
    let mut extra_files = Vec::new();
    loop {
        match read_array::<1>(&mut r)?[0] {
            TAG_ROW => {
                let (name, key, value) = read_row(&mut r)?;
                match importer.as_mut() {
                    None => return Err(format_error("a row after the files")),
                    Some(Some(importer)) => importer.row(&name, &key, &value)?,
                    Some(None) => {}
                }
                rows += 1;
            }
            TAG_FILE => {
                if let Some(Some(done)) = importer.take() {
                    done.finish()?;
                }
                let (path, mode, len) = read_file_header(&mut r)?;
                match dest {
                    Some(dest) => {
                        let target = path.split('/').fold(dest.to_path_buf(), |p, c| p.join(c));
                        write_unpacked(&mut r, &target, mode, len)?;
                    }
                    None => {
                        let skipped = io::copy(&mut (&mut r).take(len), &mut io::sink())?;
                        if skipped != len {
                            return Err(format_error("truncated (inside a file)"));
                        }
                    }
                }
                if !path.starts_with("store/") {
                    extra_files.push(path);
                }
                files += 1;
            }
            TAG_END => {
                let rows_said = u64::from_be_bytes(read_array(&mut r)?);
                let files_said = u64::from_be_bytes(read_array(&mut r)?);
                let digest = r.sha.clone().finalize();
                let mut stored = [0u8; 32];
                r.inner.read_exact(&mut stored).map_err(truncated)?;
                if stored[..] != digest[..] {
                    return Err(format_error("sha-256 digest mismatch (corrupted archive)"));
                }
                if (rows_said, files_said) != (rows, files) {
                    return Err(format_error(format!(
                        "end record says {rows_said} rows and {files_said} files, read {rows} and {files}"
                    )));
                }
                let mut probe = [0u8; 1];
                if r.inner.read(&mut probe)? != 0 {
                    return Err(format_error("bytes after the end record"));
                }
                if let Some(Some(done)) = importer.take() {
                    done.finish()?;
                }
                if let (Some(dest), Some(store_dir)) = (dest, &store_dir) {
                    let fs = crate::fs::RealFs;
                    crate::fs::StoreFs::sync_dir(&fs, &crate::segment::segments_dir(store_dir))?;
                    crate::fs::StoreFs::sync_dir(&fs, store_dir)?;
                    crate::fs::StoreFs::sync_dir(&fs, dest)?;
                }
                return Ok(ArchiveSummary {
                    manifest,
                    rows,
                    files,
                    archive_bytes: r.bytes + 32,
                    extra_files,
                });
            }
            other => return Err(format_error(format!("unknown record tag {other}"))),
        }
    }
}

fn write_unpacked(
    r: &mut impl Read,
    target: &Path,
    mode: u32,
    len: u64,
) -> Result<(), BackupError> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    let mut file = options.open(target).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            format_error(format!("{} appears twice", target.display()))
        } else {
            BackupError::Io(e)
        }
    })?;
    let copied = io::copy(&mut r.take(len), &mut file)?;
    if copied != len {
        return Err(format_error("truncated (inside a file)"));
    }
    file.sync_all()?;
    Ok(())
}

/// Opens the store [`unpack`] wrote under `dest` and checks it: the log
/// store's integrity check ([`LogStore::integrity_check`]), and the counts
/// against `manifest`. A redb store's layout is upgraded as it opens
/// (`crate::log_store`), so an archive from before the log store restores
/// into today's layout.
///
/// # Errors
/// [`BackupError::Store`] from the integrity check,
/// [`BackupError::Mismatch`] if the counts differ from the manifest.
pub fn check_unpacked(dest: &Path, manifest: &Manifest) -> Result<IntegrityReport, BackupError> {
    check_counts(
        &mut LogStore::open(store_path(dest)).map_err(StoreError::from)?,
        manifest,
    )
}

/// What a restore needs of the checked store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restorable {
    /// Its integrity report.
    pub report: IntegrityReport,
    /// Its id (the data dir's lineage names it).
    pub store_id: StoreId,
    /// The `seq` floor it now has.
    pub seq_floor: u64,
}

/// [`check_unpacked`] for a restore: first raises the store's `seq` floor
/// to `floor` ([`LogStore::raise_seq_floor`]), so that no `seq` the
/// carrier handed out after the archive's snapshot is handed out again.
///
/// # Errors
/// As [`check_unpacked`].
pub fn prepare_restore(
    dest: &Path,
    manifest: &Manifest,
    floor: u64,
) -> Result<Restorable, BackupError> {
    let mut store = LogStore::open(store_path(dest)).map_err(StoreError::from)?;
    store.raise_seq_floor(floor)?;
    let report = check_counts(&mut store, manifest)?;
    Ok(Restorable {
        report,
        store_id: store.store_id(),
        seq_floor: store.seq_floor(),
    })
}

/// The integrity check, then the counts against `manifest`.
fn check_counts(store: &mut LogStore, manifest: &Manifest) -> Result<IntegrityReport, BackupError> {
    let report = store.integrity_check()?;
    if let Some(first) = report.damaged.first() {
        return Err(BackupError::Store(StoreError::Corrupt(format!(
            "{} damaged deposit(s), the first: {first}",
            report.damaged.len()
        ))));
    }
    let o = &manifest.occupancy;
    let held = (
        report.bindings,
        report.tombstones,
        report.deposits,
        report.bytes,
    );
    let said = (o.bindings, o.tombstones, o.deposits, o.total_bytes);
    if held != said {
        return Err(BackupError::Mismatch(format!(
            "(bindings, tombstones, deposits, bytes) held {held:?}, manifest {said:?}"
        )));
    }
    Ok(report)
}

/// `dir/store`.
pub fn store_path(dir: &Path) -> PathBuf {
    dir.join(STORE_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked() {
        for bad in [
            "",
            "/abs",
            "a//b",
            "../x",
            "a/./b",
            "store/carrier.redb",
            "store/segments/x",
        ] {
            assert!(check_path(bad, true).is_err(), "{bad}");
        }
        assert!(check_path("store/segments/0000000000000001.seg", true).is_ok());
        assert!(check_path("store/log/0000000000000001.log", true).is_ok());
        assert!(check_path("store/snap/0000000000000001-0000000000000040.snap", true).is_ok());
        assert!(check_path("store/log/x.log", true).is_err());
        assert!(check_path("store/segments/0000000000000001.seg", false).is_err());
        assert!(check_path("tls/cert.der", false).is_ok());
        assert!(check_path("declaration.key", false).is_ok());
    }

    #[test]
    fn manifest_round_trips() {
        let manifest = Manifest {
            taken_at: 1_788_177_600_123,
            producer: "rltp-carrier 0.1.0".into(),
            occupancy: Occupancy {
                total_bytes: 10,
                bindings: 2,
                deposits: 3,
                tombstones: 4,
                elastic_bytes: 5,
            },
            declaration_revision: Some(7),
            segments: 2,
            segment_bytes: 99,
            layout: "log".into(),
        };
        assert_eq!(Manifest::parse(&manifest.render()).unwrap(), manifest);
        let none = Manifest {
            declaration_revision: None,
            ..manifest
        };
        assert_eq!(Manifest::parse(&none.render()).unwrap(), none);
        assert!(matches!(
            Manifest::parse("format rltp-backup/2\n"),
            Err(BackupError::Format(_))
        ));
    }
}
