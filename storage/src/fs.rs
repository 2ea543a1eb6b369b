//! The file layer under the embedded store: every byte
//! [`crate::redb_store::RedbStore`] reads or writes — its segment files,
//! their directory, and redb's own file (through redb's
//! [`redb::StorageBackend`]) — goes through one [`StoreFs`].
//!
//! [`RealFs`] is the operating system's file system, what the carrier
//! runs on. [`crate::fault_fs::FaultFs`] is a simulated disk that keeps
//! what a completed `fsync` made durable apart from what is only written,
//! and builds the image a power loss would leave (the power-loss harness,
//! `storage/tests/power_loss.rs`). A store backend that wants the harness
//! to test it does all its I/O through this trait.
//!
//! The semantics are POSIX's, narrowed to what a store needs:
//! - a write reaches the file at once for every reader, but is durable
//!   only once [`StoreFile::sync_data`] returned `Ok` for that file;
//! - a created or removed *name* is durable only once
//!   [`StoreFs::sync_dir`] of its directory returned `Ok`;
//! - a file that is removed stays readable through handles already open.

use std::fmt;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// An open file.
#[allow(clippy::len_without_is_empty)]
pub trait StoreFile: Send + Sync + fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `offset` (a short file is an
    /// [`io::ErrorKind::UnexpectedEof`] error).
    ///
    /// # Errors
    /// I/O errors.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, growing the file if needed.
    ///
    /// # Errors
    /// I/O errors (a part of `buf` may have reached the file).
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// One positional write (`pwrite`): writes a prefix of `buf` at
    /// `offset` and returns its length, which is short when the file
    /// system has no room for more (the next call then fails with
    /// [`io::ErrorKind::StorageFull`]).
    ///
    /// # Errors
    /// I/O errors: nothing of `buf` reached the file by this call.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, counting what reached the file: on
    /// an error, the prefix of `buf` that is in the file (a full disk
    /// takes a write part of the way) and the error.
    ///
    /// # Errors
    /// [`ShortWrite`]: how much was written, and why no more.
    fn write_all_counted(&self, buf: &[u8], offset: u64) -> Result<(), ShortWrite> {
        let mut done = 0usize;
        while done < buf.len() {
            match self.write_at(&buf[done..], offset + done as u64) {
                Ok(0) => {
                    return Err(ShortWrite {
                        written: done,
                        error: io::ErrorKind::WriteZero.into(),
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(ShortWrite {
                        written: done,
                        error,
                    });
                }
            }
        }
        Ok(())
    }
    /// Makes every byte written so far durable (`fdatasync`).
    ///
    /// # Errors
    /// I/O errors: what reached the disk is then unknown.
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length in bytes.
    ///
    /// # Errors
    /// I/O errors.
    fn len(&self) -> io::Result<u64>;
}

/// A write that failed part of the way ([`StoreFile::write_all_counted`]).
#[derive(Debug)]
pub struct ShortWrite {
    /// The bytes of the write that reached the file (a prefix).
    pub written: usize,
    /// Why no more did.
    pub error: io::Error,
}

/// How [`StoreFs::open`] treats a missing or existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The file must exist.
    Existing,
    /// The file must not exist: it is created, empty (never truncates).
    CreateNew,
}

/// A file system for a store.
pub trait StoreFs: Send + Sync + fmt::Debug + 'static {
    /// Opens `path` for reading and writing.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] / [`io::ErrorKind::AlreadyExists`] as
    /// `mode` says; other I/O errors.
    fn open(&self, path: &Path, mode: Open) -> io::Result<Arc<dyn StoreFile>>;
    /// The length of the file at `path`, `None` if there is none.
    ///
    /// # Errors
    /// I/O errors other than a missing file.
    fn file_len(&self, path: &Path) -> io::Result<Option<u64>>;
    /// Removes the name `path` (already gone is an error of kind
    /// [`io::ErrorKind::NotFound`]).
    ///
    /// # Errors
    /// I/O errors.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// The names in directory `dir` (files and directories), unordered.
    ///
    /// # Errors
    /// I/O errors, [`io::ErrorKind::NotFound`] if `dir` does not exist.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates `dir` and its missing parents.
    ///
    /// # Errors
    /// I/O errors.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes the names created in or removed from `dir` durable.
    ///
    /// # Errors
    /// I/O errors.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// A redb storage backend over the file at `path`, created empty if
    /// there is none.
    ///
    /// # Errors
    /// I/O errors.
    fn redb_backend(&self, path: &Path) -> io::Result<Box<dyn redb::StorageBackend>>;
    /// Bytes free for this process on the file system of `dir`, if known
    /// (the default: unknown).
    ///
    /// # Errors
    /// I/O errors.
    fn available_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        let _ = dir;
        Ok(None)
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// A [`std::fs::File`] as a [`StoreFile`].
#[derive(Debug)]
struct RealFile(std::fs::File);

impl StoreFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl StoreFs for RealFs {
    fn open(&self, path: &Path, mode: Open) -> io::Result<Arc<dyn StoreFile>> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true);
        if mode == Open::CreateNew {
            options.create_new(true);
        }
        Ok(Arc::new(RealFile(options.open(path)?)))
    }
    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
    fn available_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        fs4::available_space(dir).map(Some)
    }
    fn redb_backend(&self, path: &Path) -> io::Result<Box<dyn redb::StorageBackend>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let backend = redb::backends::FileBackend::new(file).map_err(io::Error::other)?;
        Ok(Box::new(backend))
    }
}

/// The shared default file system.
pub fn real() -> Arc<dyn StoreFs> {
    Arc::new(RealFs)
}
