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
//! - `stats` — the [`counts::Counts`] lines.
//!
//! Protocol: the client sends one line (`backup` or `stats`); the server
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
pub const CONTROL_SOCKET: &str = "control.sock";

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
}

impl Request {
    /// The request line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Request::Backup => "backup",
            Request::Stats => "stats",
        }
    }

    /// Parses a request line (without its newline).
    pub fn parse(line: &str) -> Option<Request> {
        [Request::Backup, Request::Stats]
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

/// Wall-clock ms since the Unix epoch.
pub(crate) fn now_ms() -> rltp_storage::Ms {
    use crate::engine::clock::Clock as _;
    crate::engine::clock::SystemClock.now()
}
