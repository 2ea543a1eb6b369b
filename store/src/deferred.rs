//! What a commit or a read leaves for later: the sync a deferred commit
//! still waits for ([`PendingSync`]) and envelope bytes to be read after
//! the transaction ended ([`DeferredBytes`]). Both are opaque here: the
//! backend that made one knows what it holds (a file and an offset, for
//! the log store), and this crate touches no file.

use crate::StoreResult;
use std::any::Any;

/// What a transaction committed with [`crate::Store::commit_deferred`]
/// still waits for before it is durable (opaque: the backend's own sync
/// point; default: nothing, durable already).
#[derive(Default)]
pub struct PendingSync(Option<Box<dyn Any + Send + Sync>>);

impl PendingSync {
    /// Nothing to wait for: durable already.
    pub fn durable() -> PendingSync {
        PendingSync(None)
    }

    /// A backend's sync point `at` (what its [`crate::Store::sync`] reads
    /// back with [`PendingSync::take`]).
    pub fn at<T: Any + Send + Sync>(at: T) -> PendingSync {
        PendingSync(Some(Box::new(at)))
    }

    /// The sync point, if this holds one of type `T` (`None`: durable
    /// already, or another backend's).
    pub fn take<T: Any>(self) -> Option<T> {
        self.0?.downcast::<T>().ok().map(|at| *at)
    }
}

impl std::fmt::Debug for PendingSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "PendingSync(waiting)",
            None => "PendingSync(durable)",
        })
    }
}

/// A read of envelope bytes put off until [`DeferredBytes::read`].
type Later = Box<dyn FnOnce() -> StoreResult<Vec<u8>> + Send>;

/// Envelope bytes handed out by [`crate::ReadTxn::deposit_bytes_deferred`].
pub struct DeferredBytes(Deferred);

enum Deferred {
    Ready(StoreResult<Vec<u8>>),
    Later(Later),
}

impl DeferredBytes {
    /// Bytes already read (or the error reading them gave).
    pub fn ready(bytes: StoreResult<Vec<u8>>) -> DeferredBytes {
        DeferredBytes(Deferred::Ready(bytes))
    }

    /// Bytes `read` reads (and checks against the deposit's id) when
    /// [`DeferredBytes::read`] is called, outside the transaction.
    pub fn later(read: impl FnOnce() -> StoreResult<Vec<u8>> + Send + 'static) -> DeferredBytes {
        DeferredBytes(Deferred::Later(Box::new(read)))
    }

    /// Reads the bytes and checks them against the deposit's id.
    ///
    /// # Errors
    /// [`crate::StoreError::Corrupt`] for bytes that are not the ones the
    /// id names (or a file cut short); [`crate::StoreError::Io`] otherwise.
    pub fn read(self) -> StoreResult<Vec<u8>> {
        match self.0 {
            Deferred::Ready(bytes) => bytes,
            Deferred::Later(read) => read(),
        }
    }
}

impl std::fmt::Debug for DeferredBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeferredBytes")
    }
}
