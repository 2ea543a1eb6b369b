//! `backup`, `restore` and `restore --verify` over `rltp-backup/1`
//! archives ([`rltp_storage::backup`]) of a carrier data directory.
//!
//! An archive holds one consistent snapshot of the store plus the files
//! that make the restored carrier the same carrier: the declaration key
//! (so the restored declaration keeps its issuer) and the generated TLS
//! identity (so pinned clients still connect) — [`DATA_FILES`], those
//! present. **It therefore holds private keys**: store it like them.
//! A CA-issued certificate configured outside the data directory is not
//! included.
//!
//! ## What a restore means for the contract
//! A restored carrier holds exactly the snapshot: every deposit admitted
//! before the archive's `taken-at` instant, the bindings, generations and
//! tombstones of that instant. Deposits admitted after it are lost to that
//! copy, though their senders were told `admitted` — which the contract
//! forbids ("nothing admitted is silently lost"). A restore is therefore
//! for disasters only (the store is gone), never a rollback tool.

use super::{AdminError, Request, ask, io_error, now_ms};
use rltp_storage::Ms;
use rltp_storage::backup::{self as archive, ArchiveSummary, ExtraFile};
use rltp_storage::log_store::{IntegrityReport, LogStore};
use rltp_storage::redb_store::store_in_use;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Files of the data directory an archive carries beside the store
/// (paths relative to the data directory), when present.
pub use crate::data_dir::BACKED_UP as DATA_FILES;

/// What wrote an archive.
pub fn producer() -> String {
    format!("rltp-carrier {}", env!("CARGO_PKG_VERSION"))
}

/// The [`DATA_FILES`] present in `data_dir`, read for an archive.
///
/// # Errors
/// [`AdminError::Io`] if one exists but cannot be read.
pub fn extra_files(data_dir: &Path) -> Result<Vec<ExtraFile>, AdminError> {
    let mut files = Vec::new();
    for name in DATA_FILES {
        let path = name
            .split('/')
            .fold(data_dir.to_path_buf(), |p, c| p.join(c));
        match std::fs::read(&path) {
            Ok(bytes) => files.push(ExtraFile {
                path: name.to_owned(),
                mode: 0o600,
                bytes,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(format!("reading {}", path.display()))(e)),
        }
    }
    Ok(files)
}

/// Writes an archive of `store` with the data files `extra` to `out`:
/// `clock` is read for `taken-at` just before the snapshot is taken.
///
/// # Errors
/// [`AdminError::Backup`].
pub fn write_archive(
    store: &LogStore,
    extra: &[ExtraFile],
    clock: &dyn Fn() -> Ms,
    out: impl Write,
) -> Result<ArchiveSummary, AdminError> {
    Ok(archive::write_backup(
        store,
        clock,
        &producer(),
        extra,
        out,
    )?)
}

/// Opens the store of `data_dir` when no carrier serves it (a store in the
/// redb store's layout is upgraded as it opens).
///
/// # Errors
/// [`AdminError::Io`] if there is no store, [`AdminError::InUse`] if
/// another process holds it, [`AdminError::Store`].
pub fn open_offline(data_dir: &Path) -> Result<LogStore, AdminError> {
    let dir = archive::store_path(data_dir);
    if !dir.join(rltp_storage::redb_store::INDEX_FILE).exists() {
        return Err(AdminError::Io {
            what: format!("opening {}", dir.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no carrier store there"),
        });
    }
    if store_in_use(&dir) {
        return Err(AdminError::InUse(dir));
    }
    Ok(LogStore::open(&dir).map_err(rltp_storage::StoreError::from)?)
}

/// A finished backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupDone {
    /// What the archive holds.
    pub summary: ArchiveSummary,
    /// Taken by a running carrier (through the control socket), or
    /// directly from a stopped carrier's store.
    pub online: bool,
}

fn create_private(path: &Path) -> Result<File, AdminError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .map_err(io_error(format!("creating {}", path.display())))
}

fn sync_parent(path: &Path) -> Result<(), AdminError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!("syncing {}", parent.display())))
}

/// `rltp-carrier backup`: an archive of `data_dir` written to `out`
/// (mode 0600; it must not exist yet). From the running carrier through
/// the control socket if one answers, else directly from the stopped
/// carrier's store. Written to `<out>.partial` first, checked complete
/// (structure and digest), then renamed into place.
///
/// # Errors
/// [`AdminError`]; no file is left at `out`.
pub fn backup(data_dir: &Path, out: &Path) -> Result<BackupDone, AdminError> {
    if out.exists() {
        return Err(AdminError::Io {
            what: format!("writing {}", out.display()),
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
        });
    }
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let result = (|| {
        let file = create_private(&partial)?;
        let online = match ask(data_dir, Request::Backup)? {
            Some(mut body) => {
                let mut writer = BufWriter::new(&file);
                std::io::copy(&mut body, &mut writer).map_err(io_error("receiving the backup"))?;
                writer
                    .flush()
                    .map_err(io_error(format!("writing {}", partial.display())))?;
                true
            }
            None => {
                let store = open_offline(data_dir)?;
                let extra = extra_files(data_dir)?;
                write_archive(&store, &extra, &now_ms, BufWriter::new(&file))?;
                false
            }
        };
        file.sync_all()
            .map_err(io_error(format!("syncing {}", partial.display())))?;
        let read =
            File::open(&partial).map_err(io_error(format!("reading {}", partial.display())))?;
        let summary = archive::scan(read)?;
        std::fs::rename(&partial, out)
            .map_err(io_error(format!("renaming to {}", out.display())))?;
        sync_parent(out)?;
        Ok(BackupDone { summary, online })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// An archive that unpacked and passed the integrity check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// What the archive holds.
    pub summary: ArchiveSummary,
    /// The restored store's integrity report.
    pub report: IntegrityReport,
}

fn unpack_checked(from: &Path, dest: &Path) -> Result<Checked, AdminError> {
    let input = File::open(from).map_err(io_error(format!("reading {}", from.display())))?;
    let summary = archive::unpack(input, dest)?;
    let report = archive::check_unpacked(dest, &summary.manifest)?;
    Ok(Checked { summary, report })
}

/// The `seq` floor a restore at `now` gives the restored store: the
/// instant (never earlier than the archive's `taken-at` or the data dir's
/// recorded clock) times [`SEQ_PER_MS`]. A queue cannot have been handed
/// more than [`SEQ_PER_MS`] seqs per millisecond between the snapshot and
/// this instant (its meter and the writer admit far fewer), so no seq
/// handed out after the snapshot is handed out again (`PROTOCOL.md` §7);
/// the floor stays below 2^53 until the year 2248.
pub fn restore_seq_floor(now: Ms, taken_at: Ms, recorded_clock: Option<Ms>) -> u64 {
    now.max(taken_at)
        .max(recorded_clock.unwrap_or(0))
        .saturating_mul(SEQ_PER_MS)
}

/// Seqs per millisecond a restore's floor allows for ([`restore_seq_floor`]).
pub const SEQ_PER_MS: u64 = 1024;

/// `restore --verify`: unpacks `from` into a temporary directory, runs the
/// integrity check, and reports what the archive holds; changes nothing.
///
/// # Errors
/// [`AdminError`] naming the first defect.
pub fn verify(from: &Path) -> Result<Checked, AdminError> {
    let tmp = tempfile::Builder::new()
        .prefix("rltp-verify-")
        .tempdir()
        .map_err(io_error("creating a temporary directory"))?;
    unpack_checked(from, &tmp.path().join("data"))
}

/// A finished restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The archive and the restored store's integrity report.
    pub checked: Checked,
    /// Where what the data directory held before was moved, if anything.
    pub replaced: Option<PathBuf>,
    /// The restored store's `seq` floor ([`restore_seq_floor`]).
    pub seq_floor: u64,
}

/// `restore --from FILE --data-dir DIR`: refuses while a carrier serves
/// `data_dir`; unpacks the archive into a staging directory inside
/// `data_dir`, raises the restored store's `seq` floor
/// ([`restore_seq_floor`]) and checks it (digest, bounds,
/// `integrity_check`, counts against the manifest), and only then swaps it
/// in: the store and the archived [`DATA_FILES`] replace what `data_dir`
/// held, which is moved to `data_dir/replaced-<ms>/` (never deleted) —
/// except a `declaration.signed` newer than the archive's, which stays (no
/// revision is ever signed twice). Then the data dir's lineage is written
/// for the restored store and its clock file stamped with it (never
/// earlier than `taken-at`).
///
/// # Errors
/// [`AdminError`]; before the swap nothing in `data_dir` changed (the
/// staging directory is removed, and a `data_dir` this call created is
/// removed again).
pub fn restore(from: &Path, data_dir: &Path) -> Result<Restored, AdminError> {
    if ask(data_dir, Request::Stats)?.is_some() || store_in_use(&archive::store_path(data_dir)) {
        return Err(AdminError::Serving(data_dir.to_owned()));
    }
    let existed = data_dir.exists();
    crate::tls::create_private_dir(data_dir)
        .map_err(|e| AdminError::Carrier(format!("preparing {}: {e}", data_dir.display())))?;
    let stamp = now_ms();
    let staging = data_dir.join(format!(".restore-{stamp}"));
    let staged = (|| {
        let input = File::open(from).map_err(io_error(format!("reading {}", from.display())))?;
        let summary = archive::unpack(input, &staging)?;
        if let Some(unexpected) = summary
            .extra_files
            .iter()
            .find(|f| !DATA_FILES.contains(&f.as_str()))
        {
            return Err(AdminError::UnexpectedFile(unexpected.clone()));
        }
        let floor = restore_seq_floor(
            stamp,
            summary.manifest.taken_at,
            crate::service::clock::recorded(data_dir),
        );
        let ready = archive::prepare_restore(&staging, &summary.manifest, floor)?;
        Ok((summary, ready))
    })();
    let (summary, ready) = match staged {
        Ok(staged) => staged,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            if !existed {
                // Only the directory this call made, and only if empty.
                let _ = std::fs::remove_dir(data_dir);
            }
            return Err(e);
        }
    };
    let moved = data_dir.join(format!("replaced-{stamp}"));
    let mut replaced = None;
    let signed = crate::service::declaration::SIGNED_FILE;
    let newer_signed_held = crate::service::declaration::read_signed(data_dir)
        .zip(crate::service::declaration::read_signed(&staging))
        .is_some_and(|(held, archived)| held.revision > archived.revision);
    let items = std::iter::once(archive::STORE_DIR.to_owned())
        .chain(summary.extra_files.iter().cloned())
        .filter(|item| !(newer_signed_held && item == signed))
        .chain([
            lineage::LINEAGE_FILE.to_owned(),
            crate::service::clock::HIGH_WATER_FILE.to_owned(),
        ]);
    for item in items {
        let rel = |root: &Path| item.split('/').fold(root.to_path_buf(), |p, c| p.join(c));
        let (target, source, aside) = (rel(data_dir), rel(&staging), rel(&moved));
        if target.exists() {
            make_parent(&aside)?;
            let keep = item == crate::service::clock::HIGH_WATER_FILE;
            if keep {
                // The clock's instant carries over (stamped below).
                std::fs::copy(&target, &aside)
                    .map_err(io_error(format!("copying {} aside", target.display())))?;
            } else {
                std::fs::rename(&target, &aside)
                    .map_err(io_error(format!("moving {} aside", target.display())))?;
            }
            replaced = Some(moved.clone());
        }
        if source.exists() {
            make_parent(&target)?;
            std::fs::rename(&source, &target)
                .map_err(io_error(format!("installing {}", target.display())))?;
        }
    }
    std::fs::remove_dir_all(&staging)
        .map_err(io_error(format!("removing {}", staging.display())))?;
    sync_parent(&data_dir.join(archive::STORE_DIR))?;
    // The restored data dir's life: its store, its key and identity.
    use crate::service::lineage;
    let lineage_error = |e: lineage::LineageError| AdminError::Carrier(e.to_string());
    lineage::stamp_clock(
        data_dir,
        ready.store_id,
        stamp.max(summary.manifest.taken_at),
    )
    .map_err(lineage_error)?;
    if data_dir
        .join(crate::service::declaration::KEY_FILE)
        .exists()
    {
        lineage::describe(data_dir, ready.store_id, stamp)
            .and_then(|l| l.write(data_dir))
            .map_err(lineage_error)?;
    }
    Ok(Restored {
        checked: Checked {
            summary,
            report: ready.report,
        },
        replaced,
        seq_floor: ready.seq_floor,
    })
}

/// Creates the parent directories of `path` (mode 0700).
fn make_parent(path: &Path) -> Result<(), AdminError> {
    match path.parent() {
        Some(parent) => crate::tls::create_private_dir(parent)
            .map_err(|e| AdminError::Carrier(format!("preparing {}: {e}", parent.display()))),
        None => Ok(()),
    }
}

/// `name value` lines describing an archive (the output of `backup` and
/// `restore --verify`): when it was taken and what it holds. The `taken-at`
/// line is the contract's boundary: deposits admitted after it are not in
/// the archive.
pub fn describe(summary: &ArchiveSummary) -> String {
    let m = &summary.manifest;
    let o = &m.occupancy;
    let revision = m
        .declaration_revision
        .map_or_else(|| "none".to_owned(), |r| r.to_string());
    format!(
        "taken-at {}\ntaken-at-ms {}\nproducer {}\ndeclaration-revision {revision}\n\
         bindings {}\ntombstones {}\ndeposits {}\ndeposit-bytes {}\nsegments {}\n\
         segment-bytes {}\nkey-files {}\narchive-bytes {}\n",
        rltp_proofs::declaration::rfc3339_utc(m.taken_at),
        m.taken_at,
        m.producer,
        o.bindings,
        o.tombstones,
        o.deposits,
        o.total_bytes,
        m.segments,
        m.segment_bytes,
        summary.extra_files.join(","),
        summary.archive_bytes,
    )
}
