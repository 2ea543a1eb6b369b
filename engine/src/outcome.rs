//! What the engine's operations return besides the closed verdicts of
//! [`rltp_wire::verdict`]: payloads and the errors that are not
//! verdicts.

use rltp_proofs::{DepositId, Ms};
use rltp_store::StoreError;
use rltp_wire::verdict::Verdict;
use std::sync::Arc;

/// One deposit handed out by `collect` (§5a.7, §5a.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedDeposit {
    /// Position in the queue's admission order: pass the last one as
    /// `after` to page on.
    pub seq: u64,
    /// The deposit id (SHA-256 of the bytes; on the wire the sha2-256
    /// multihash, [`DepositId::to_multibase`]) that `conclude` names.
    pub id: DepositId,
    /// The sealed-envelope bytes exactly as admitted.
    pub bytes: Vec<u8>,
    /// When it was admitted (ms).
    pub admitted_at: Ms,
}

/// A served `collect` (§5a.8): held deposits in admission order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Collected {
    /// Up to the requested page size, in admission order.
    pub deposits: Vec<CollectedDeposit>,
    /// Whether more deposits follow the last one returned.
    pub more: bool,
}

/// A served `collect` (§5a.8) as the writer decided it: the page's held
/// deposits in admission order, their envelope bytes still to be read and
/// checked outside the writer ([`rltp_store::DeferredBytes::read`]), so
/// that a drain does not serialize on reading pages. A deposit whose bytes
/// fail their check is quarantined in the writer, which judges them again
/// ([`crate::Engine::quarantine_if_damaged`]); the rest of the page is
/// served.
#[derive(Debug)]
pub struct CollectPage {
    /// Up to the requested page size, in admission order, each with where
    /// its bytes are.
    pub deposits: Vec<(rltp_store::Deposit, rltp_store::DeferredBytes)>,
    /// Whether more deposits follow the last one returned.
    pub more: bool,
}

/// A served `conclude` (§5a.8): the verdict is `served`; `removed` counts
/// the named ids that were held (ids not held are not an error: conclusion
/// is idempotent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concluded {
    /// Deposits removed by this conclusion.
    pub removed: usize,
}

/// Why a `challenge`, `collect` or `conclude` was not served.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A verdict of the §5a.3 closed set (`refused(malformed)`,
    /// `refused(admission-resource)`, `refused(possession-failed)`,
    /// `refused(no-such-queue)`); `Display` is its exact spelling.
    #[error("{0}")]
    Refused(Verdict),
    /// The store could not complete the operation; nothing changed. A
    /// transport-level, retriable condition: it is not a verdict about the
    /// request (collect/conclude have no capacity verdict in §5a.3).
    #[error("carrier storage unavailable, retry: {0}")]
    Unavailable(Arc<StoreError>),
}

impl SessionError {
    /// The verdict, if this is one.
    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            SessionError::Refused(v) => Some(*v),
            SessionError::Unavailable(_) => None,
        }
    }
}

/// Why an engine-level operation (start, status, sweep, constants) failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The store failed; nothing of the operation took effect. Retriable.
    #[error("carrier storage unavailable: {0}")]
    Unavailable(Arc<StoreError>),
    /// A declaration revision was refused by the generic revision rule
    /// (§4.4): an equivocation or a rollback. State is kept.
    #[error("declaration revision {offered} refused against held revision {held}")]
    Revision {
        /// The revision held.
        held: u64,
        /// The revision offered.
        offered: u64,
    },
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> EngineError {
        EngineError::Unavailable(Arc::new(e))
    }
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> SessionError {
        SessionError::Unavailable(Arc::new(e))
    }
}
