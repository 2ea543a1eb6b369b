//! How the stores fail: the error helpers every backend file uses (each
//! keeps the engine's error as its source), the lock that survives a
//! panicked holder, and the one answer to a failed `fdatasync` of the log
//! (stop the process).

use crate::{BoxError, OpenError, StoreError};
use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking over the data of a holder that panicked (every
/// critical section leaves its data consistent before it can panic).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A redb error, kept whole ([`StoreError::Redb`]).
pub(crate) fn db_error<E: std::error::Error + Send + Sync + 'static>(error: E) -> StoreError {
    StoreError::Redb(Box::new(error))
}

/// An error and what was being done when it happened (the message reads
/// `what: error`; the error stays the source).
#[derive(Debug)]
pub(crate) struct Context {
    what: String,
    source: BoxError,
}

impl Context {
    /// `source`, met while doing `what`.
    pub(crate) fn new(what: impl Into<String>, source: impl Into<BoxError>) -> Box<Context> {
        Box::new(Context {
            what: what.into(),
            source: source.into(),
        })
    }
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Context {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// An `fdatasync` of the operation log failed. What reached the disk is
/// then unknown (the kernel may have dropped the dirty pages), while
/// transactions after the last durable one are already visible and redb
/// would make them durable when it closes. So the process stops at once,
/// without closing anything (as PostgreSQL does on a failed fsync): the
/// restart recovers exactly the durable log (`storage/README.md`, "Commit
/// order"), and the supervisor restarts it (`Restart=on-failure`).
pub(crate) fn fatal_sync_failure(error: &std::io::Error) -> ! {
    tracing::error!(%error, "fdatasync of the operation log failed: stopping the carrier; the restart recovers what is durable");
    eprintln!("rltp-storage: fdatasync of the operation log failed ({error}); aborting");
    std::process::abort()
}

/// Stored bytes that fail a check ([`StoreError::Corrupt`]).
pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Corrupt(what.into())
}

/// The refusal to open a damaged store ([`OpenError::Damaged`]).
pub(crate) fn damaged(what: impl Into<String>) -> OpenError {
    OpenError::Damaged(what.into())
}
