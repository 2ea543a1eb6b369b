//! A consistent copy of a log store, taken without pausing the writer.

use super::*;

/// What a backup of a [`LogStore`] copies, consistent without pausing the
/// writer: redb's rows as of one commit (a read transaction; `applied`
/// rewritten to where the log stood then), the latest durable snapshot,
/// and every log segment a held deposit lives in or the snapshot's replay
/// reads, the last one up to where the log stood at that commit. Restored,
/// the store opens by loading the snapshot and replaying the log up to
/// that commit. The files are held open, so none that the copy needs goes
/// away while it lives; the in-memory index is not held (a long backup
/// retains nothing of the writer's).
pub struct LogBackup {
    redb: ReadTransaction,
    end: (u64, u64),
    occupancy: Occupancy,
    declaration: Option<u64>,
    /// `(path relative to the store dir, file, bytes to copy)`.
    files: Vec<(String, Arc<dyn StoreFile>, u64)>,
}

impl LogBackup {
    pub(super) fn take(store: &LogStore) -> StoreResult<LogBackup> {
        let inner = &*store.inner;
        let state = inner.gate();
        let end = (state.active.id, state.active.end());
        let base = state.latest_snapshot;
        let redb = {
            let _ix = inner.index_read();
            inner.db()?.begin_read().map_err(db_error)?
        };
        let occupancy = inner.index_read().occupancy;
        let mut files = Vec::new();
        if let Some((name, file)) = housekeeping::snapshot_file(inner, base)? {
            let len = file.len()?;
            files.push((format!("snap/{name}"), file, len));
        }
        for id in housekeeping::live_segments(inner, base, end.0)? {
            let file = inner.file(id)?;
            let len = if id == end.0 { end.1 } else { file.len()? };
            files.push((format!("log/{}", record::segment_name(id)), file, len));
        }
        drop(state);
        // Nothing the backup holds may be a batch a crash could undo.
        store.sync_visible()?;
        let declaration = query::declaration(&redb)?.map(|d| d.revision);
        Ok(LogBackup {
            redb,
            end,
            occupancy,
            declaration,
            files,
        })
    }

    /// The counters as of the copy.
    pub fn occupancy(&self) -> Occupancy {
        self.occupancy
    }

    /// The declaration revision as of the copy.
    pub fn declaration_revision(&self) -> Option<u64> {
        self.declaration
    }

    /// Calls `f(table, key, value)` for every row of redb's tables (with
    /// `applied` naming where the copied log ends).
    ///
    /// # Errors
    /// The first error of `f`, or a [`StoreError`] from the reads.
    pub fn for_each_row(
        &self,
        mut f: impl FnMut(&str, &[u8], &[u8]) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let applied = rs::cat(&[&self.end.0.to_be_bytes(), &self.end.1.to_be_bytes()]);
        for def in [BINDINGS, TOMBSTONES, EVICTION, META] {
            let name = redb::TableHandle::name(&def).to_owned();
            self.redb.scan(
                def,
                (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
                |k, v| {
                    let v = if name == "meta" && k == rs::META_APPLIED {
                        &applied[..]
                    } else {
                        v
                    };
                    f(&name, k, v)?;
                    Ok(true)
                },
            )?;
        }
        Ok(())
    }

    /// The files to copy: `(path relative to the store dir, file, bytes)`.
    pub fn files(&self) -> &[(String, Arc<dyn StoreFile>, u64)] {
        &self.files
    }
}

/// Whether a store file name (relative, `/`-separated, inside the store
/// dir) is one a log store backup may hold.
pub fn is_store_file(path: &str) -> bool {
    match path.split_once('/') {
        Some(("log", name)) => record::parse_segment_name(name).is_some(),
        Some(("snap", name)) => record::parse_snapshot_name(name).is_some(),
        _ => false,
    }
}
