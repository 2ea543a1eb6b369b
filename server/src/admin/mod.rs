//! Operator commands beside a carrier: `rltp-carrier backup`, `restore`
//! and `admin stats` (`deploy/OPERATIONS.md`).
//!
//! ## Counts only (§5a.1)
//! Every answer here is a count or a whole-store copy for the operator's
//! own disaster recovery. There is **no** command, control request or page
//! that lists the `rkid`s of a principal or the principal of an `rkid`:
//! "a convenience query returning every key of this person is the whole
//! failure this section exists to prevent" (§5a.1).
//!
//! ## The control socket
//! A running carrier holds its store's redb file exclusively, so another
//! process cannot read it. `serve` therefore listens on a Unix socket,
//! `<data-dir>/control.sock` ([`CONTROL_SOCKET`]), and performs the two
//! requests itself:
//!
//! - `backup` — streams an `rltp-backup/1` archive
//!   ([`rltp_storage::backup`]) of one consistent snapshot, taken while it
//!   keeps serving (one redb read transaction: admission never waits);
//! - `stats` — the [`counts::Counts`] lines;
//! - `store` — the store-growth lines ([`counts::Counts::size_lines`]).
//!
//! Protocol: the client sends one line (`backup`, `stats` or `store`); the server
//! answers `ok` and the body, or `error <text>`, then closes. Only local
//! users reach it: the data directory is mode 0700, and the server serves
//! only peers whose uid owns the data directory, or root.
//!
//! When no carrier answers on the socket, the commands open the store
//! directly (the carrier is stopped).

pub mod backup;
pub mod counts;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The control socket's file name inside the data directory.
pub use crate::data_dir::CONTROL_SOCKET;

/// Why an operator command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] rltp_storage::StoreError),
    /// Writing, reading or checking an archive failed.
    #[error(transparent)]
    Backup(#[from] rltp_storage::backup::BackupError),
    /// The running carrier answered with an error.
    #[error("the carrier answered: {0}")]
    Carrier(String),
    /// The store is held open but no carrier answers on the control socket.
    #[error(
        "the store in {0} is in use by another process and no carrier answers on its control socket"
    )]
    InUse(PathBuf),
    /// A carrier is serving the data directory (restore needs it stopped).
    #[error("a carrier is serving {0}: stop it before restoring")]
    Serving(PathBuf),
    /// The archive holds a file a restore does not install.
    #[error("the archive holds {0:?}, which a restore does not install")]
    UnexpectedFile(String),
}

/// `AdminError::Io` naming `what`.
pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AdminError {
    let what = what.into();
    move |source| AdminError::Io { what, source }
}

/// `<data_dir>/control.sock`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(CONTROL_SOCKET)
}

/// A control request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Stream a backup archive.
    Backup,
    /// The counts.
    Stats,
    /// The store's size.
    Store,
    /// Enter lame-duck mode (as SIGUSR2 does).
    LameDuck,
}

impl Request {
    /// The request line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Request::Backup => "backup",
            Request::Stats => "stats",
            Request::Store => "store",
            Request::LameDuck => "lame-duck",
        }
    }

    /// Parses a request line (without its newline).
    pub fn parse(line: &str) -> Option<Request> {
        [
            Request::Backup,
            Request::Stats,
            Request::Store,
            Request::LameDuck,
        ]
        .into_iter()
        .find(|r| r.as_str() == line)
    }
}

/// Sends `request` to the carrier serving `data_dir`. `Ok(None)`: no
/// carrier answers there (no socket, or a stale one). `Ok(Some(body))`:
/// the carrier accepted; read the body to its end.
///
/// # Errors
/// [`AdminError::Io`] (e.g. permission denied: run as the service user or
/// root), [`AdminError::Carrier`] if the carrier answered `error`.
pub fn ask(data_dir: &Path, request: Request) -> Result<Option<BufReader<UnixStream>>, AdminError> {
    let path = socket_path(data_dir);
    let mut stream = match UnixStream::connect(&path) {
        Ok(stream) => stream,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(io_error(format!("connecting to {}", path.display()))(e)),
    };
    stream
        .write_all(format!("{}\n", request.as_str()).as_bytes())
        .map_err(io_error("sending the control request"))?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader
        .read_line(&mut status)
        .map_err(io_error("reading the control answer"))?;
    match status.trim_end_matches('\n') {
        "ok" => Ok(Some(reader)),
        other => Err(AdminError::Carrier(
            other
                .strip_prefix("error ")
                .unwrap_or(if other.is_empty() {
                    "the control connection closed without an answer (the carrier serves \
                     only the data directory's owner and root)"
                } else {
                    other
                })
                .to_owned(),
        )),
    }
}

/// The counts of the store in `data_dir`: from the serving carrier if one
/// answers, else read directly (the carrier is stopped).
///
/// # Errors
/// [`AdminError`].
pub fn stats(data_dir: &Path) -> Result<String, AdminError> {
    if let Some(mut body) = ask(data_dir, Request::Stats)? {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut body, &mut text)
            .map_err(io_error("reading the stats"))?;
        return Ok(text);
    }
    let store = backup::open_offline(data_dir)?;
    let read = rltp_storage::Store::read(&store)?;
    Ok(counts::Counts::read(&read, now_ms())?.to_lines())
}

/// The size of the store in `data_dir` ([`counts::Counts::size_lines`]):
/// from the serving carrier if one answers, else read directly.
///
/// # Errors
/// [`AdminError`].
pub fn store(data_dir: &Path) -> Result<String, AdminError> {
    if let Some(mut body) = ask(data_dir, Request::Store)? {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut body, &mut text)
            .map_err(io_error("reading the store's size"))?;
        return Ok(text);
    }
    let store = backup::open_offline(data_dir)?;
    let size = rltp_storage::Store::size(&store)?;
    Ok(counts::Counts::size_lines(&size, now_ms()))
}

/// What `admin renew` replaces deliberately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renew {
    /// `declaration.key`: a new key; the next start signs revision + 1
    /// under its `did:key` (publish it, `deploy/OPERATIONS.md` §4).
    DeclarationKey,
    /// `tls/`: a new self-signed identity (publish its pin first).
    TlsIdentity,
    /// `clock`: the carrier's time starts again from the wall clock.
    Clock,
}

/// `rltp-carrier admin renew`: replaces one of the data dir's files on
/// purpose, with the carrier stopped — the old one is moved aside
/// (`<name>.replaced-<ms>`, never deleted), a new one is made, and the
/// data dir's lineage records it (`crate::service::lineage`). Returns
/// `name value` lines describing what was done.
///
/// # Errors
/// [`AdminError`]: a carrier serves the data dir, or it has no lineage
/// (start it once first), or a file cannot be moved or made.
pub fn renew(data_dir: &Path, what: Renew) -> Result<String, AdminError> {
    use crate::service::{clock, declaration, lineage};
    let store_dir = rltp_storage::backup::store_path(data_dir);
    if ask(data_dir, Request::Stats)?.is_some()
        || rltp_storage::redb_store::store_in_use(&store_dir)
    {
        return Err(AdminError::Serving(data_dir.to_owned()));
    }
    let lineage_error = |e: lineage::LineageError| AdminError::Carrier(e.to_string());
    let mut lineage = lineage::Lineage::read(data_dir)
        .map_err(lineage_error)?
        .ok_or_else(|| {
            AdminError::Carrier(format!(
                "{} has no lineage file: there is nothing to renew in it",
                data_dir.display()
            ))
        })?;
    let stamp = now_ms();
    let aside = |name: &str| -> Result<Option<PathBuf>, AdminError> {
        let path = data_dir.join(name);
        if !path.exists() {
            return Ok(None);
        }
        let moved = data_dir.join(format!("{name}.replaced-{stamp}"));
        std::fs::rename(&path, &moved)
            .map_err(io_error(format!("moving {} aside", path.display())))?;
        Ok(Some(moved))
    };
    let (moved, made) = match what {
        Renew::DeclarationKey => {
            let moved = aside(declaration::KEY_FILE)?;
            let key = declaration::load_or_create_key(data_dir)
                .map_err(|e| AdminError::Carrier(e.to_string()))?;
            lineage.declaration_issuer =
                rltp_proofs::multikey::DidKey::from_verifying_key(&key.verifying_key())
                    .to_did_key();
            (
                moved,
                format!("declaration-issuer {}", lineage.declaration_issuer),
            )
        }
        Renew::TlsIdentity => {
            let moved = aside(crate::data_dir::TLS)?;
            let identity = crate::tls::load_or_generate(&crate::data_dir::tls(data_dir))
                .map_err(|e| AdminError::Carrier(e.to_string()))?;
            lineage.tls_identity = Some(identity.fingerprint.to_string());
            (moved, format!("fingerprint {}", identity.fingerprint))
        }
        Renew::Clock => {
            let moved = aside(clock::HIGH_WATER_FILE)?;
            lineage::stamp_clock(data_dir, lineage.store_id, stamp).map_err(lineage_error)?;
            (moved, format!("clock {stamp}"))
        }
    };
    lineage.write(data_dir).map_err(lineage_error)?;
    let mut out = String::new();
    if let Some(moved) = moved {
        out.push_str(&format!("moved-aside {}\n", moved.display()));
    }
    out.push_str(&format!("{made}\nlineage updated\n"));
    Ok(out)
}

/// Wall-clock ms since the Unix epoch.
pub(crate) fn now_ms() -> rltp_storage::Ms {
    use crate::clock::Clock as _;
    crate::clock::SystemClock.now()
}
