//! When an embedded store's log is durable: the position every byte
//! before which is `fdatasync`ed, the sync that makes the last visible
//! commit durable, and the one way a log sync is run — under the durable
//! lock, skipped when an earlier sync covered it, and fatal when it fails
//! ([`crate::failure::fatal_sync_failure`]). Both embedded stores (the log
//! store and the legacy redb store) keep their log this way.

use crate::failure::{fatal_sync_failure, lock};
use crate::fs::StoreFile;
use crate::segment::ActiveSegment;
use crate::{PendingSync, StoreResult};
use std::sync::{Arc, Mutex};

/// A position in the log and the file to `fdatasync` to make it durable
/// (what a [`PendingSync`] of an embedded store holds).
#[derive(Clone)]
pub(crate) struct SyncAt {
    file: Arc<dyn StoreFile>,
    segment: u64,
    end: u64,
}

/// A log's durability: `(segment, offset)` before which every byte is
/// durable, shared by the writer and the syncer and held across every
/// `fdatasync` of the log; and the sync that makes the last visible commit
/// durable.
pub(crate) struct LogSync {
    durable: Mutex<(u64, u64)>,
    visible: Mutex<Option<SyncAt>>,
}

impl std::fmt::Debug for LogSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSync")
            .field("durable", &*lock(&self.durable))
            .finish_non_exhaustive()
    }
}

impl LogSync {
    /// A log durable `through` `(segment, offset)`.
    pub(crate) fn new(through: (u64, u64)) -> LogSync {
        LogSync {
            durable: Mutex::new(through),
            visible: Mutex::new(None),
        }
    }

    /// What a commit ending at `end` of `segment` (in `file`) waits for.
    pub(crate) fn pending(file: &Arc<dyn StoreFile>, segment: u64, end: u64) -> PendingSync {
        PendingSync::at(SyncAt {
            file: Arc::clone(file),
            segment,
            end,
        })
    }

    /// Records the sync of a commit about to become visible (before it
    /// does: a reader that sees it finds its sync here).
    pub(crate) fn set_visible(&self, file: &Arc<dyn StoreFile>, segment: u64, end: u64) {
        *lock(&self.visible) = Some(SyncAt {
            file: Arc::clone(file),
            segment,
            end,
        });
    }

    /// `fdatasync`s the log up to `pending`, unless an earlier sync covered
    /// it; a failed sync stops the process.
    pub(crate) fn sync(&self, pending: PendingSync) {
        if let Some(at) = pending.take::<SyncAt>() {
            self.sync_at(&at);
        }
    }

    fn sync_at(&self, at: &SyncAt) {
        let mut durable = lock(&self.durable);
        if *durable >= (at.segment, at.end) {
            return;
        }
        if let Err(error) = at.file.sync_data() {
            fatal_sync_failure(&error);
        }
        *durable = (at.segment, at.end);
    }

    /// Makes every commit visible now durable.
    pub(crate) fn sync_visible(&self) {
        let visible = lock(&self.visible).clone();
        if let Some(at) = visible {
            self.sync_at(&at);
        }
    }

    /// Writes out and `fdatasync`s `active` under the durable lock (before
    /// a durable redb commit, which must never reference log bytes that
    /// are not durable). A write error is returned (an ordinary failed
    /// batch); a failed sync stops the process.
    ///
    /// # Errors
    /// [`crate::StoreError::Io`] if the buffered bytes cannot be written.
    pub(crate) fn sync_active(&self, active: &mut ActiveSegment) -> StoreResult<()> {
        let mut durable = lock(&self.durable);
        active.flush()?;
        if let Err(error) = active.sync() {
            fatal_sync_failure(&error);
        }
        *durable = (active.id, active.end());
        Ok(())
    }

    /// The log is durable through `(segment, offset)` (a fresh or reopened
    /// segment, synced by whoever made it).
    pub(crate) fn set_durable(&self, through: (u64, u64)) {
        *lock(&self.durable) = through;
    }
}
