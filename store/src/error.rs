//! Why a store operation failed: [`StoreError`] for what a transaction,
//! a sync or a read can meet, [`OpenError`] for what only opening (or
//! checking, or migrating) a store can meet — redb's own split between
//! `TransactionError`/`CommitError`/`StorageError` and `DatabaseError`.
//! Each keeps its source: the I/O error, the storage engine's (redb) or
//! the database's (PostgreSQL) error, boxed here because this crate
//! depends on neither.

/// The error a storage engine or a database reported, kept whole (its
/// chain reads through [`std::error::Error::source`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the store could not complete an operation. None of them is a
/// verdict about a request: the engine changes nothing and answers the
/// retriable transport-level `unavailable` (`PROTOCOL.md` §6), never a
/// capacity refusal; a [`StoreError::Corrupt`] record met by an operation
/// is quarantined instead (`rltp_engine`, `queue::quarantine`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error from the file system (disk full included).
    #[error("storage i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The embedded stores' storage engine (redb) failed the operation;
    /// nothing of the transaction is durable.
    #[error("storage engine error: {0}")]
    Redb(#[source] BoxError),
    /// PostgreSQL failed the operation (the connection, a statement or the
    /// commit; the source names the statement and the SQLSTATE); nothing of
    /// the transaction may be assumed durable.
    #[error("storage engine error: {0}")]
    Postgres(#[source] BoxError),
    /// The store cannot serve right now, for the reason given (its
    /// database is being reopened after an i/o error, or is held by an
    /// integrity check); nothing was done, and a later try may succeed.
    #[error("storage engine error: {0}")]
    Unavailable(&'static str),
    /// The database aborted the transaction as a serialization failure
    /// or a deadlock (SQLSTATE 40001, 40P01): nothing of it was written,
    /// and running it again may succeed (the writer does, a bounded number
    /// of times).
    #[error("storage conflict, nothing written: {0}")]
    Conflict(#[source] BoxError),
    /// Stored bytes failed an integrity check (never silently repaired);
    /// what failed, where.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store is shutting down or its writer has stopped.
    #[error("store is closed")]
    Closed,
    /// A store could not be opened ([`OpenError`]), met by a caller that
    /// opens a store and then works on it in one go (a backup, a restore,
    /// an admin tool). A transaction never returns it.
    #[error(transparent)]
    Open(Box<OpenError>),
}

/// Why a store was not opened (or checked, or migrated): nothing was
/// written. The embedded stores refuse damage here, before anything else
/// happens; the PostgreSQL store refuses a database it cannot trust.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The store's files are missing, empty, inconsistent with each other
    /// or with the data dir (another store's id, an index older than its
    /// log), or its engine failed on damaged pages: it was not opened and
    /// nothing was written. The way back is a restore from a backup
    /// (`deploy/OPERATIONS.md`, "damaged data dir").
    #[error("the store is damaged: {0}")]
    Damaged(String),
    /// The database cannot hold this carrier's store as it is, and what to
    /// do about it (durability off, no carrier schema yet, a schema newer
    /// than this binary's, a store of another id).
    #[error("storage engine error: {0}")]
    Refused(#[source] BoxError),
    /// The connection settings cannot be used (`what`: which one: a CA
    /// file, the TLS setup, the URL).
    #[error("storage engine error: postgres {what}: {source}")]
    Settings {
        /// The setting, for the message.
        what: String,
        /// Why it cannot be used.
        #[source]
        source: BoxError,
    },
    /// Opening met an error an operation can meet too (I/O, the storage
    /// engine, the database).
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for OpenError {
    /// A store error met while opening: the open error it carries
    /// ([`StoreError::Open`]), or [`OpenError::Store`].
    fn from(error: StoreError) -> OpenError {
        match error {
            StoreError::Open(error) => *error,
            other => OpenError::Store(other),
        }
    }
}

impl From<std::io::Error> for OpenError {
    fn from(error: std::io::Error) -> OpenError {
        OpenError::Store(StoreError::Io(error))
    }
}

impl From<OpenError> for StoreError {
    /// An open error met after the open: the store error it wraps, or
    /// [`StoreError::Open`].
    fn from(error: OpenError) -> StoreError {
        match error {
            OpenError::Store(error) => error,
            other => StoreError::Open(Box::new(other)),
        }
    }
}

/// Result alias for store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// Result alias for opening a store.
pub type OpenResult<T> = Result<T, OpenError>;
