//! How the embedded stores fail: the error helpers every backend file
//! uses, the lock that survives a panicked holder, and the one answer to a
//! failed `fdatasync` of the log (stop the process).

use crate::StoreError;
use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking over the data of a holder that panicked (every
/// critical section leaves its data consistent before it can panic).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn engine<E: std::fmt::Display>(error: E) -> StoreError {
    StoreError::Engine(error.to_string())
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

pub(crate) fn corrupt(what: impl Into<String>) -> StoreError {
    StoreError::Corrupt(what.into())
}

pub(crate) fn damaged(what: impl Into<String>) -> StoreError {
    StoreError::Damaged(what.into())
}
