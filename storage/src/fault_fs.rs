//! A simulated disk for power-loss tests: a [`StoreFs`] in memory that
//! keeps what a completed `fsync` made durable apart from what was only
//! written, and builds the image a power loss at this instant would leave
//! ([`FaultFs::crash`]). The power-loss harness
//! (`storage/tests/power_loss.rs`) runs the embedded store on it; any
//! store backend that does its I/O through [`StoreFs`] (redb's file
//! included, through [`redb::StorageBackend`]) can be run on it the same
//! way. Never used by a carrier.
//!
//! ## What survives a crash
//! - **File contents.** Every byte a completed [`StoreFile::sync_data`]
//!   covered survives. Each write (and each length change) issued after
//!   the file's last completed sync is, independently and at random:
//!   *dropped* (if it grew the file, the growth may survive as zeros, as
//!   when the size reached the disk but the data did not), *torn* (only
//!   some of its 512-byte sectors reached the disk, or only a prefix), or
//!   *kept* whole. Writes to the same bytes are applied in issue order, so
//!   a kept later write is never undone by an earlier one.
//! - **Names.** A file created or removed since the last completed
//!   [`StoreFs::sync_dir`] of its directory may or may not exist. Directories
//!   are durable once created.
//!
//! The crash image is a new [`FaultFs`] in which everything is durable; the
//! disk the crash was taken from carries on (writers still running against
//! it are simply no longer observed).
//!
//! ## A full disk
//! [`FaultFs::set_room`] bounds the pages (4 KiB) the files may take, as a
//! small file system such as tmpfs does (`ENOSPC`): a write takes the pages
//! it touches that no write took before; one that does not fit writes the
//! prefix that does (a short `pwrite`) and then fails with
//! [`io::ErrorKind::StorageFull`]. Overwriting taken pages always fits; a
//! length change takes no page (the file is sparse); removing a file gives
//! its pages back at once.

use crate::fs::{Open, StoreFile, StoreFs};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The simulated disk. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    disk: Arc<Mutex<Disk>>,
}

/// A crash armed to happen inside a later write ([`FaultFs::arm_crash`]).
struct Armed {
    at_write: u64,
    rng: Rng,
    mark: Box<dyn FnOnce() -> u64 + Send>,
}

impl std::fmt::Debug for Armed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Armed")
            .field("at_write", &self.at_write)
            .finish_non_exhaustive()
    }
}

/// A crash taken inside a write: the image, what it did, and the mark.
pub type Cut = (FaultFs, CrashReport, u64);

#[derive(Debug, Default)]
struct Disk {
    armed: Option<Armed>,
    cut: Option<Cut>,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    /// The namespace as readers see it: path → inode (files only).
    names: BTreeMap<PathBuf, u64>,
    /// The namespace as a crash would find it (before undecided changes).
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: std::collections::BTreeSet<PathBuf>,
    stats: FsStats,
    /// The most bytes the named files may hold together (`None`: no bound).
    capacity: Option<u64>,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Changes since the last completed sync, in issue order.
    pending: Vec<Change>,
    /// The pages writes took ("A full disk" in the module docs).
    pages: std::collections::BTreeSet<u64>,
}

/// The unit in which a full disk is counted.
const PAGE: u64 = 4096;

impl Inode {
    /// A file holding `content`, every page of it taken.
    fn whole(content: Vec<u8>) -> Inode {
        let pages = (0..(content.len() as u64).div_ceil(PAGE)).collect();
        Inode {
            live: content.clone(),
            durable: content,
            pending: Vec::new(),
            pages,
        }
    }

    /// How much of a write of `len` bytes at `offset` fits in `room`
    /// pages; takes the pages of that prefix.
    fn take_pages(&mut self, offset: u64, len: u64, room: Option<u64>) -> u64 {
        let Some(mut room) = room else {
            self.pages
                .extend(offset / PAGE..(offset + len).div_ceil(PAGE));
            return len;
        };
        let mut page = offset / PAGE;
        while page * PAGE < offset + len {
            if !self.pages.contains(&page) {
                if room == 0 {
                    return (page * PAGE).saturating_sub(offset);
                }
                room -= 1;
                self.pages.insert(page);
            }
            page += 1;
        }
        len
    }
}

#[derive(Debug, Clone)]
enum Change {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// Counters of a [`FaultFs`] (for a harness's figures).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Writes issued.
    pub writes: u64,
    /// Completed file syncs.
    pub syncs: u64,
    /// Completed directory syncs.
    pub dir_syncs: u64,
}

/// What one [`FaultFs::crash`] did to the writes it found pending.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CrashReport {
    /// Writes (and length changes) not covered by a completed sync.
    pub pending: u64,
    /// … of which dropped.
    pub dropped: u64,
    /// … of which torn (some sectors, or a prefix).
    pub torn: u64,
    /// … of which kept whole.
    pub kept: u64,
    /// Names whose creation or removal was not yet durable.
    pub undecided_names: u64,
}

impl std::ops::AddAssign for CrashReport {
    fn add_assign(&mut self, o: CrashReport) {
        self.pending += o.pending;
        self.dropped += o.dropped;
        self.torn += o.torn;
        self.kept += o.kept;
        self.undecided_names += o.undecided_names;
    }
}

/// A small deterministic generator (xorshift64*), so that a failing crash
/// image can be rebuilt from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A value in `0..n` (`n ≥ 1`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const SECTOR: u64 = 512;

fn apply(content: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write { offset, data } => {
            let start = *offset as usize;
            let end = start + data.len();
            if content.len() < end {
                content.resize(end, 0);
            }
            content[start..end].copy_from_slice(data);
        }
        Change::SetLen(len) => content.resize(*len as usize, 0),
    }
}

impl Disk {
    /// Pages the named files took (each file once).
    fn used(&self) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.names
            .values()
            .filter(|&&inode| seen.insert(inode))
            .filter_map(|inode| self.inodes.get(inode))
            .map(|i| i.pages.len() as u64)
            .sum()
    }

    /// Pages the files may still take (`None`: no bound).
    fn room(&self) -> Option<u64> {
        self.capacity.map(|c| c.saturating_sub(self.used()))
    }

    /// The image of a crash now (module docs).
    fn image(&self, rng: &mut Rng) -> (FaultFs, CrashReport) {
        let disk = self;
        let mut report = CrashReport::default();
        let mut image = Disk {
            dirs: disk.dirs.clone(),
            ..Disk::default()
        };
        let mut paths: Vec<&PathBuf> = disk.names.keys().chain(disk.durable_names.keys()).collect();
        paths.sort();
        paths.dedup();
        let mut contents: HashMap<u64, u64> = HashMap::new();
        for path in paths {
            let live = disk.names.get(path).copied();
            let durable = disk.durable_names.get(path).copied();
            let chosen = if live == durable {
                live
            } else {
                report.undecided_names += 1;
                if rng.below(2) == 0 { live } else { durable }
            };
            let Some(inode) = chosen else { continue };
            let new = match contents.get(&inode) {
                Some(&new) => new,
                None => {
                    let content = disk
                        .inodes
                        .get(&inode)
                        .map(|i| i.crash(rng, &mut report))
                        .unwrap_or_default();
                    let new = image.next_inode;
                    image.next_inode += 1;
                    image.inodes.insert(new, Inode::whole(content));
                    contents.insert(inode, new);
                    new
                }
            };
            image.names.insert(path.clone(), new);
            image.durable_names.insert(path.clone(), new);
        }
        (
            FaultFs {
                disk: Arc::new(Mutex::new(image)),
            },
            report,
        )
    }

    /// Takes the armed crash if this write reached its count.
    fn maybe_cut(&mut self) {
        if self
            .armed
            .as_ref()
            .is_some_and(|a| self.stats.writes >= a.at_write)
            && let Some(mut armed) = self.armed.take()
        {
            let (image, report) = self.image(&mut armed.rng);
            self.cut = Some((image, report, (armed.mark)()));
        }
    }
}

impl Inode {
    /// The content a crash leaves, deciding every pending change.
    fn crash(&self, rng: &mut Rng, report: &mut CrashReport) -> Vec<u8> {
        let mut content = self.durable.clone();
        for change in &self.pending {
            report.pending += 1;
            match rng.below(3) {
                0 => {
                    report.dropped += 1;
                    // The size may have reached the disk without the data.
                    if let Change::Write { offset, data } = change
                        && rng.below(3) == 0
                    {
                        let end = (*offset as usize) + data.len();
                        if content.len() < end {
                            content.resize(end, 0);
                        }
                    }
                }
                1 => {
                    report.torn += 1;
                    match change {
                        Change::Write { offset, data } if rng.below(2) == 0 => {
                            // Some sectors reached the disk, others not.
                            let mut at = 0u64;
                            while (at as usize) < data.len() {
                                let sector_end = ((offset + at) / SECTOR + 1) * SECTOR - offset;
                                let stop = sector_end.min(data.len() as u64);
                                if rng.below(2) == 0 {
                                    apply(
                                        &mut content,
                                        &Change::Write {
                                            offset: offset + at,
                                            data: data[at as usize..stop as usize].to_vec(),
                                        },
                                    );
                                }
                                at = stop;
                            }
                        }
                        Change::Write { offset, data } => {
                            // A prefix reached the disk.
                            let cut = rng.below(data.len() as u64 + 1) as usize;
                            apply(
                                &mut content,
                                &Change::Write {
                                    offset: *offset,
                                    data: data[..cut].to_vec(),
                                },
                            );
                        }
                        Change::SetLen(_) => {}
                    }
                }
                _ => {
                    report.kept += 1;
                    apply(&mut content, change);
                }
            }
        }
        content
    }
}

impl FaultFs {
    /// An empty disk.
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        self.disk.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters so far.
    pub fn stats(&self) -> FsStats {
        self.lock().stats
    }

    /// Bounds the disk to what its files hold now plus `room` bytes,
    /// rounded down to whole pages (`None`: unbounded again); see "A full
    /// disk" in the module docs.
    pub fn set_room(&self, room: Option<u64>) {
        let mut disk = self.lock();
        disk.capacity = room.map(|room| disk.used().saturating_add(room / PAGE));
    }

    /// Bytes the files may still take (`None`: no bound).
    pub fn room(&self) -> Option<u64> {
        self.lock().room().map(|pages| pages * PAGE)
    }

    /// The disk a power loss at this instant would leave, built with the
    /// generator `rng` (see the module docs); everything in it is durable.
    pub fn crash(&self, rng: &mut Rng) -> (FaultFs, CrashReport) {
        self.lock().image(rng)
    }

    /// Arms a crash inside the write that brings the count of writes
    /// issued to `after_writes` more than now (that write itself is one of
    /// those not covered by a sync): the image is built right after it
    /// reached the file, while the writer still holds its locks, and `mark`
    /// is called at that instant (a harness reads its journal position).
    /// [`FaultFs::take_cut`] returns it.
    pub fn arm_crash(&self, after_writes: u64, rng: Rng, mark: Box<dyn FnOnce() -> u64 + Send>) {
        let mut disk = self.lock();
        disk.armed = Some(Armed {
            at_write: disk.stats.writes + after_writes.max(1),
            rng,
            mark,
        });
        disk.cut = None;
    }

    /// The crash an armed write took, if it happened yet.
    pub fn take_cut(&self) -> Option<Cut> {
        self.lock().cut.take()
    }

    /// Disarms a crash armed by [`FaultFs::arm_crash`] that has not
    /// happened yet.
    pub fn disarm(&self) {
        let mut disk = self.lock();
        disk.armed = None;
        disk.cut = None;
    }

    /// A separate disk with the same durable content (nothing pending):
    /// the image of a crash, copied before it is recovered.
    pub fn copy(&self) -> FaultFs {
        let disk = self.lock();
        let mut copy = Disk {
            inodes: disk.inodes.clone(),
            next_inode: disk.next_inode,
            names: disk.durable_names.clone(),
            durable_names: disk.durable_names.clone(),
            dirs: disk.dirs.clone(),
            capacity: disk.capacity,
            ..Disk::default()
        };
        for inode in copy.inodes.values_mut() {
            *inode = Inode::whole(inode.durable.clone());
        }
        FaultFs {
            disk: Arc::new(Mutex::new(copy)),
        }
    }

    /// Files and their bytes (live), for a harness's figures.
    pub fn usage(&self) -> (usize, usize) {
        let disk = self.lock();
        (
            disk.names.len(),
            disk.inodes.values().map(|i| i.live.len()).sum(),
        )
    }

    /// The current (readable) content of the file at `path`.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let disk = self.lock();
        let inode = disk.names.get(path)?;
        disk.inodes.get(inode).map(|i| i.live.clone())
    }

    /// Replaces the content of the file at `path` at once and durably (a
    /// test planting damage).
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] if there is no such file.
    pub fn overwrite(&self, path: &Path, content: Vec<u8>) -> io::Result<()> {
        let mut disk = self.lock();
        let inode = *disk.names.get(path).ok_or(io::ErrorKind::NotFound)?;
        disk.inodes.insert(inode, Inode::whole(content));
        Ok(())
    }
}

/// An open file of a [`FaultFs`].
#[derive(Debug, Clone)]
struct FaultFile {
    disk: FaultFs,
    inode: u64,
}

impl FaultFile {
    fn with<R>(&self, f: impl FnOnce(&mut Inode, &mut FsStats) -> R) -> R {
        let mut disk = self.disk.lock();
        let Disk { inodes, stats, .. } = &mut *disk;
        let out = f(inodes.entry(self.inode).or_default(), stats);
        disk.maybe_cut();
        out
    }
}

impl StoreFile for FaultFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|inode, _| {
            let start = usize::try_from(offset).map_err(io::Error::other)?;
            let slice = start
                .checked_add(buf.len())
                .and_then(|end| inode.live.get(start..end))
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(slice);
            Ok(())
        })
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_counted(buf, offset)
            .map_err(|short| short.error)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut disk = self.disk.lock();
        let room = disk.room();
        let Disk { inodes, stats, .. } = &mut *disk;
        let inode = inodes.entry(self.inode).or_default();
        let fits = inode.take_pages(offset, buf.len() as u64, room) as usize;
        if fits == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::StorageFull.into());
        }
        stats.writes += 1;
        let change = Change::Write {
            offset,
            data: buf[..fits].to_vec(),
        };
        apply(&mut inode.live, &change);
        inode.pending.push(change);
        disk.maybe_cut();
        Ok(fits)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.with(|inode, stats| {
            stats.syncs += 1;
            for change in std::mem::take(&mut inode.pending) {
                apply(&mut inode.durable, &change);
            }
            Ok(())
        })
    }
    fn len(&self) -> io::Result<u64> {
        self.with(|inode, _| Ok(inode.live.len() as u64))
    }
}

impl FaultFile {
    fn set_len(&self, len: u64) {
        self.with(|inode, _| {
            let change = Change::SetLen(len);
            apply(&mut inode.live, &change);
            inode.pending.push(change);
            // Pages wholly past the end are given back.
            inode.pages.retain(|&page| page * PAGE < len);
        });
    }
}

fn parent_exists(disk: &Disk, path: &Path) -> bool {
    path.parent()
        .is_none_or(|p| p.as_os_str().is_empty() || p == Path::new("/") || disk.dirs.contains(p))
}

impl StoreFs for FaultFs {
    fn open(&self, path: &Path, mode: Open) -> io::Result<Arc<dyn StoreFile>> {
        let mut disk = self.lock();
        let inode = match (disk.names.get(path).copied(), mode) {
            (Some(inode), Open::Existing) => inode,
            (Some(_), Open::CreateNew) => return Err(io::ErrorKind::AlreadyExists.into()),
            (None, Open::Existing) => return Err(io::ErrorKind::NotFound.into()),
            (None, Open::CreateNew) => {
                if !parent_exists(&disk, path) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                let inode = disk.next_inode;
                disk.next_inode += 1;
                disk.inodes.insert(inode, Inode::default());
                disk.names.insert(path.to_owned(), inode);
                inode
            }
        };
        Ok(Arc::new(FaultFile {
            disk: self.clone(),
            inode,
        }))
    }
    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        let disk = self.lock();
        Ok(disk
            .names
            .get(path)
            .and_then(|i| disk.inodes.get(i))
            .map(|i| i.live.len() as u64))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        match disk.names.remove(path) {
            Some(_) => Ok(()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let disk = self.lock();
        if !disk.dirs.contains(dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let names = disk.names.keys().map(PathBuf::as_path);
        let dirs = disk.dirs.iter().map(PathBuf::as_path);
        Ok(names
            .chain(dirs)
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        for ancestor in dir.ancestors() {
            if !ancestor.as_os_str().is_empty() {
                disk.dirs.insert(ancestor.to_owned());
            }
        }
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut disk = self.lock();
        disk.stats.dir_syncs += 1;
        let Disk {
            names,
            durable_names,
            ..
        } = &mut *disk;
        durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, inode) in names.iter() {
            if p.parent() == Some(dir) {
                durable_names.insert(p.clone(), *inode);
            }
        }
        Ok(())
    }
    fn available_bytes(&self, _dir: &Path) -> io::Result<Option<u64>> {
        Ok(self.room())
    }
    fn redb_backend(&self, path: &Path) -> io::Result<Box<dyn redb::StorageBackend>> {
        let file = match self.open(path, Open::Existing) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.open(path, Open::CreateNew)?,
            other => other?,
        };
        let inode = {
            let disk = self.lock();
            *disk.names.get(path).ok_or(io::ErrorKind::NotFound)?
        };
        drop(file);
        Ok(Box::new(FaultBackend(FaultFile {
            disk: self.clone(),
            inode,
        })))
    }
}

/// redb's file on a [`FaultFs`].
#[derive(Debug)]
struct FaultBackend(FaultFile);

impl redb::StorageBackend for FaultBackend {
    fn len(&self) -> Result<u64, io::Error> {
        StoreFile::len(&self.0)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.0.read_exact_at(out, offset)
    }
    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.0.set_len(len);
        Ok(())
    }
    fn sync_data(&self) -> Result<(), io::Error> {
        StoreFile::sync_data(&self.0)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.0.write_all_at(data, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_bytes_survive_and_unsynced_ones_are_decided() -> io::Result<()> {
        let fs = FaultFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all(dir)?;
        let path = dir.join("f");
        let f = fs.open(&path, Open::CreateNew)?;
        f.write_all_at(b"durable", 0)?;
        f.sync_data()?;
        fs.sync_dir(dir)?;
        f.write_all_at(&[7u8; 2000], 7)?;
        let mut kept = 0;
        let mut dropped = 0;
        for seed in 0..64 {
            let (image, report) = fs.crash(&mut Rng::new(seed));
            assert_eq!(report.pending, 1);
            let content = image.read(&path).ok_or(io::ErrorKind::NotFound)?;
            assert_eq!(&content[..7], b"durable");
            assert!(content[7..].iter().all(|&b| b == 7 || b == 0));
            kept += report.kept;
            dropped += report.dropped;
        }
        assert!(kept > 0 && dropped > 0);
        // A name not yet made durable by a directory sync may vanish.
        let other = dir.join("g");
        fs.open(&other, Open::CreateNew)?.sync_data()?;
        let vanished = (0..64).any(|seed| fs.crash(&mut Rng::new(seed)).0.read(&other).is_none());
        assert!(vanished);
        fs.sync_dir(dir)?;
        assert!((0..16).all(|seed| fs.crash(&mut Rng::new(seed)).0.read(&other).is_some()));
        Ok(())
    }

    #[test]
    fn a_full_disk_takes_a_write_part_of_the_way_and_then_refuses() -> io::Result<()> {
        let fs = FaultFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all(dir)?;
        let path = dir.join("f");
        let f = fs.open(&path, Open::CreateNew)?;
        f.write_all_at(&[1u8; 100], 0)?;
        fs.set_room(Some(PAGE + 10));
        assert_eq!(fs.available_bytes(dir)?, Some(PAGE));
        // The rest of page 0, page 1, and no room for page 2.
        let short = f
            .write_all_counted(&vec![2u8; 3 * PAGE as usize], 90)
            .expect_err("three pages do not fit in one");
        assert_eq!(
            (short.written as u64, short.error.kind()),
            (2 * PAGE - 90, io::ErrorKind::StorageFull)
        );
        let content = fs.read(&path).ok_or(io::ErrorKind::NotFound)?;
        assert_eq!(content.len() as u64, 2 * PAGE);
        assert!(content[..90].iter().all(|&b| b == 1) && content[90..].iter().all(|&b| b == 2));
        // Overwriting taken pages still fits; a new page does not.
        f.write_all_at(&[3u8; 2 * PAGE as usize], 0)?;
        assert_eq!(
            f.write_at(&[4], 2 * PAGE).map_err(|e| e.kind()),
            Err(io::ErrorKind::StorageFull)
        );
        // Removing a file gives its pages back.
        fs.remove_file(&path)?;
        assert_eq!(fs.room(), Some(2 * PAGE));
        fs.set_room(None);
        assert_eq!(fs.available_bytes(dir)?, None);
        Ok(())
    }
}
