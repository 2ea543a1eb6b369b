//! Why a store operation failed ([`StoreError`]).

/// Why the store could not complete an operation. None of them is a
/// verdict about a request: the engine changes nothing and answers the
/// retriable transport-level `unavailable` (`PROTOCOL.md` §6), never a
/// capacity refusal; a [`StoreError::Corrupt`] record met by an operation
/// is quarantined instead (`rltp_carrier` engine, `queue::quarantine`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error from the file system (disk full included).
    #[error("storage i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The storage engine reported an error.
    #[error("storage engine error: {0}")]
    Engine(String),
    /// The database aborted the transaction as a serialization failure
    /// or a deadlock (SQLSTATE 40001, 40P01): nothing of it was written,
    /// and running it again may succeed (the writer does, a bounded number
    /// of times).
    #[error("storage conflict, nothing written: {0}")]
    Conflict(String),
    /// Stored bytes failed an integrity check (never silently repaired).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store is shutting down or its writer has stopped.
    #[error("store is closed")]
    Closed,
    /// The store's files are missing, empty, inconsistent with each other
    /// or with the data dir, or its engine failed on damaged pages: it was
    /// not opened and nothing was written. The way back is a restore from
    /// a backup (`deploy/OPERATIONS.md`, "damaged data dir").
    #[error("the store is damaged: {0}")]
    Damaged(String),
}

/// Result alias for store operations.
pub type StoreResult<T> = Result<T, StoreError>;
