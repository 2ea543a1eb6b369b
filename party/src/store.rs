//! The party store: the completed-effect cache with its kept
//! acknowledgements (Delivery §6.2 stages 4 and 9, §4.2) and the
//! sent-register (§4.2, §6.1), behind one trait so the pipeline never knows
//! what holds them. [`MemStore`] is the in-memory implementation for tests
//! and simulations; the durable one lives in the shell.
//!
//! **One transaction** ([`PartyStore::commit`]): the effect, the cache
//! entry and the acknowledgement document commit together or not at all
//! (§6.2 stage 9, §4.2) — a crash between commit and transmission leaves
//! the kept acknowledgement to be re-sent byte-identical on redelivery.
//! **Retention**: entry and acknowledgement live together at least
//! `key-retention` after commit ([`Retention`], §7), and may be dropped only
//! together after it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;

use crate::sender::{SenderFailure, SenderStatus, SentEntry, Transition};

/// §7: the floor of `key-retention`, P90D, in milliseconds.
pub const KEY_RETENTION_FLOOR_MS: u64 = 90 * 24 * 60 * 60 * 1000;

/// §7 `key-retention` = max(P90D, the longest give-up horizon of any
/// adapter in the deployment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    ms: u64,
}

impl Retention {
    /// The retention for a deployment whose longest adapter give-up
    /// horizon is `longest_give_up_ms`.
    pub fn new(longest_give_up_ms: u64) -> Retention {
        Retention {
            ms: longest_give_up_ms.max(KEY_RETENTION_FLOOR_MS),
        }
    }

    /// The bound, in milliseconds (never below P90D).
    pub fn ms(self) -> u64 {
        self.ms
    }

    /// Whether something recorded at `at` may be dropped at `now`.
    pub fn expired(self, at: Ms, now: Ms) -> bool {
        now.saturating_sub(at) >= self.ms
    }
}

/// §4.2: an acknowledgement kept with its cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAck {
    /// The ack document's JCS bytes — re-sent exactly these (§6.2 stage 4).
    pub document: Vec<u8>,
    /// The ack document's digest.
    pub digest: String,
    /// The `rkid` to seal it to (the acknowledged document's issuer's
    /// key-agreement key, from its card), when known.
    pub seal_to: Option<Rkid>,
}

/// §6.2 stage 4: a completed-effect cache entry — only ever written by a
/// completed stage 9.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedEntry {
    /// The document digest.
    pub digest: String,
    /// Its `type`.
    pub type_uri: String,
    /// When stage 9 committed.
    pub committed_at: Ms,
    /// The kept acknowledgement; `None` for a terminal document (§4.2).
    pub ack: Option<StoredAck>,
}

/// A registered type's defined effect, as data the store commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// §4.3: durable buffering of the enclosed credential for Encounter
    /// acceptance (which runs separately and never acknowledges).
    Buffered {
        /// The credential's JCS bytes.
        credential: Vec<u8>,
    },
    /// §4.1: the application's bundle effect — the record it wants written
    /// (enactment record, accepted credential with direction and digest),
    /// opaque here ([`crate::bundle::BundleHandler`]).
    Application {
        /// The application's record bytes.
        record: Vec<u8>,
    },
    /// §4.2: the sender-status update of the acknowledged sent document.
    SenderStatus {
        /// The acknowledged document's digest (`ref`).
        acked: String,
    },
}

/// One stage-9 transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The cache entry, with the kept acknowledgement.
    pub entry: CompletedEntry,
    /// The effect.
    pub effect: Effect,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Written; for an acknowledgement, the status transition it made.
    Fresh {
        /// The §6.1 transition, for [`Effect::SenderStatus`].
        transition: Option<Transition>,
    },
    /// The digest was already completed: nothing written; the held entry.
    AlreadyCompleted(CompletedEntry),
}

/// A store that could not answer: every evaluation it touches is
/// **transient** (§5a.8) — not concluded, redelivered later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("party store unavailable: {0}")]
pub struct StoreError(pub String);

/// The party store.
pub trait PartyStore {
    /// §6.2 stage 4: the completed entry of `digest`, if any.
    ///
    /// # Errors
    /// [`StoreError`] (transient).
    fn completed(&self, digest: &str) -> Result<Option<CompletedEntry>, StoreError>;

    /// §6.2 stage 9: commits effect, cache entry and acknowledgement as one
    /// transaction — all of it or nothing. A digest already completed is
    /// [`Committed::AlreadyCompleted`] and writes nothing.
    ///
    /// # Errors
    /// [`StoreError`] (transient): nothing was written.
    fn commit(&self, commit: Commit) -> Result<Committed, StoreError>;

    /// The sent-register entry of `digest`, if any.
    ///
    /// # Errors
    /// [`StoreError`] (transient).
    fn sent(&self, digest: &str) -> Result<Option<SentEntry>, StoreError>;

    /// Records a sent document (status `accepted`); an entry already held
    /// for the digest is kept unchanged.
    ///
    /// # Errors
    /// [`StoreError`] (transient).
    fn record_sent(&self, entry: SentEntry) -> Result<(), StoreError>;

    /// §6.1: the service gave up on `digest` with `reason`; returns the
    /// status after (unchanged unless it was `accepted`).
    ///
    /// # Errors
    /// [`StoreError`] (transient).
    fn give_up(
        &self,
        digest: &str,
        reason: SenderFailure,
    ) -> Result<Option<SenderStatus>, StoreError>;

    /// Drops, together, every cache entry and kept acknowledgement, and
    /// every sent-register entry, older than `retention` at `now`; returns
    /// how many records went.
    ///
    /// # Errors
    /// [`StoreError`] (transient).
    fn expire(&self, now: Ms, retention: Retention) -> Result<usize, StoreError>;
}

#[derive(Debug, Default)]
struct MemInner {
    completed: BTreeMap<String, CompletedEntry>,
    effects: Vec<(String, Effect)>,
    sent: BTreeMap<String, SentEntry>,
    fail_next: bool,
}

/// The in-memory [`PartyStore`]: one mutex, so every commit is atomic.
#[derive(Debug, Default)]
pub struct MemStore {
    inner: Mutex<MemInner>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemInner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the next [`PartyStore::commit`] fail (a storage fault), for tests.
    pub fn fail_next_commit(&self) {
        self.lock().fail_next = true;
    }

    /// Every committed effect, in commit order, with its document digest.
    pub fn effects(&self) -> Vec<(String, Effect)> {
        self.lock().effects.clone()
    }

    /// How many completed-effect cache entries are held.
    pub fn completed_len(&self) -> usize {
        self.lock().completed.len()
    }
}

impl PartyStore for MemStore {
    fn completed(&self, digest: &str) -> Result<Option<CompletedEntry>, StoreError> {
        Ok(self.lock().completed.get(digest).cloned())
    }

    fn commit(&self, commit: Commit) -> Result<Committed, StoreError> {
        let mut inner = self.lock();
        if std::mem::take(&mut inner.fail_next) {
            return Err(StoreError("injected commit failure".into()));
        }
        if let Some(held) = inner.completed.get(&commit.entry.digest) {
            return Ok(Committed::AlreadyCompleted(held.clone()));
        }
        let mut transition = None;
        if let Effect::SenderStatus { acked } = &commit.effect
            && let Some(sent) = inner.sent.get_mut(acked)
        {
            let (status, t) = sent.status.on_valid_ack();
            sent.status = status;
            transition = Some(t);
        }
        let digest = commit.entry.digest.clone();
        inner.effects.push((digest.clone(), commit.effect));
        inner.completed.insert(digest, commit.entry);
        Ok(Committed::Fresh { transition })
    }

    fn sent(&self, digest: &str) -> Result<Option<SentEntry>, StoreError> {
        Ok(self.lock().sent.get(digest).cloned())
    }

    fn record_sent(&self, entry: SentEntry) -> Result<(), StoreError> {
        self.lock()
            .sent
            .entry(entry.digest.clone())
            .or_insert(entry);
        Ok(())
    }

    fn give_up(
        &self,
        digest: &str,
        reason: SenderFailure,
    ) -> Result<Option<SenderStatus>, StoreError> {
        Ok(self.lock().sent.get_mut(digest).map(|sent| {
            sent.status = sent.status.on_give_up(reason);
            sent.status.clone()
        }))
    }

    fn expire(&self, now: Ms, retention: Retention) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let before = inner.completed.len() + inner.sent.len();
        inner
            .completed
            .retain(|_, e| !retention.expired(e.committed_at, now));
        inner.sent.retain(|_, e| !retention.expired(e.sent_at, now));
        Ok(before - inner.completed.len() - inner.sent.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_never_falls_below_p90d() {
        assert_eq!(Retention::new(0).ms(), KEY_RETENTION_FLOOR_MS);
        let year = 365 * 24 * 60 * 60 * 1000;
        assert_eq!(Retention::new(year).ms(), year);
        let r = Retention::new(0);
        assert!(!r.expired(1_000, 1_000 + KEY_RETENTION_FLOOR_MS - 1));
        assert!(r.expired(1_000, 1_000 + KEY_RETENTION_FLOOR_MS));
    }

    #[test]
    fn a_failed_commit_writes_nothing_and_a_second_commit_of_a_digest_writes_nothing() {
        let store = MemStore::new();
        let commit = Commit {
            entry: CompletedEntry {
                digest: "d".into(),
                type_uri: "t".into(),
                committed_at: 5,
                ack: None,
            },
            effect: Effect::Buffered {
                credential: b"{}".to_vec(),
            },
        };
        store.fail_next_commit();
        assert!(store.commit(commit.clone()).is_err());
        assert_eq!(store.completed("d"), Ok(None));
        assert!(store.effects().is_empty());
        assert_eq!(
            store.commit(commit.clone()),
            Ok(Committed::Fresh { transition: None })
        );
        assert_eq!(
            store.commit(commit.clone()),
            Ok(Committed::AlreadyCompleted(commit.entry.clone()))
        );
        assert_eq!(store.effects().len(), 1);
        assert_eq!(
            store.expire(5 + KEY_RETENTION_FLOOR_MS - 1, Retention::new(0)),
            Ok(0)
        );
        assert_eq!(
            store.expire(5 + KEY_RETENTION_FLOOR_MS, Retention::new(0)),
            Ok(1)
        );
        assert_eq!(store.completed("d"), Ok(None));
    }
}
