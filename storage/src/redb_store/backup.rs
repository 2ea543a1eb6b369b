//! A consistent export of one read snapshot of the legacy store, its
//! segment naming, and the import of rows into a fresh store (a restore).

use super::*;

// ---------------------------------------------------------------------------
// Backup: a consistent export of one read snapshot, and its import
// ---------------------------------------------------------------------------

/// A read snapshot held for a backup ([`crate::backup`]): every table row
/// as the snapshot sees it, and the segment extents it references.
///
/// While it lives, no segment it references is unlinked (it is registered
/// like any read snapshot, see "Commit order"), and the bytes below a
/// segment's committed extent never change (segments are append-only), so
/// copying each referenced segment up to its extent is consistent with the
/// rows. Holding it never blocks the writer (redb read transactions are
/// MVCC snapshots); it only delays reclaiming space until it is dropped.
pub struct Snapshot<'a> {
    read: RedbRead<'a>,
}

impl RedbStore {
    /// Takes a consistent snapshot for a backup (see [`Snapshot`]).
    ///
    /// # Errors
    /// [`StoreError`] if the read transaction cannot begin.
    pub fn snapshot(&self) -> StoreResult<Snapshot<'_>> {
        let read = self.read()?;
        // Nothing the backup holds may be a batch a crash could undo.
        self.sync_visible()?;
        Ok(Snapshot { read })
    }
}

impl Snapshot<'_> {
    /// The snapshot as a [`ReadTxn`] (occupancy, declaration, …).
    pub fn read(&self) -> &RedbRead<'_> {
        &self.read
    }

    /// Calls `f(table, key, value)` for every row of every table, table by
    /// table, in key order.
    ///
    /// # Errors
    /// The first error of `f`, or a [`StoreError`] from the reads.
    pub fn for_each_row(
        &self,
        mut f: impl FnMut(&str, &[u8], &[u8]) -> StoreResult<()>,
    ) -> StoreResult<()> {
        for def in ALL_TABLES {
            let name = redb::TableHandle::name(&def).to_owned();
            self.read
                .txn
                .scan(def, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                    f(&name, k, v)?;
                    Ok(true)
                })?;
        }
        Ok(())
    }

    /// The segments the snapshot references: `(id, committed extent in
    /// bytes)`, ascending by id. Deposits stored inline reference none.
    ///
    /// # Errors
    /// [`StoreError`] from the read.
    pub fn segments(&self) -> StoreResult<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        self.read
            .txn
            .scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                out.push((u64_at(k, 0)?, decode_seg(v)?.end));
                Ok(true)
            })?;
        Ok(out)
    }

    /// The file of segment `id`.
    pub fn segment_path(&self, id: u64) -> PathBuf {
        segment::segment_path(&self.read.store.segments_dir, id)
    }

    /// Segment `id`, opened through the store's file layer.
    ///
    /// # Errors
    /// [`StoreError::Io`] if it cannot be opened.
    pub fn segment_file(&self, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
        Ok(segment::open_for_read(
            &*self.read.store.options.fs,
            &self.read.store.segments_dir,
            id,
        )?)
    }
}

/// The file name of segment `id` inside `segments/` (`<id:016x>.seg`).
pub fn segment_file_name(id: u64) -> String {
    format!("{id:016x}.seg")
}

/// The segment id a file name inside `segments/` names, if it is one.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    segment::parse_segment_name(name)
}

/// Rows written into a fresh store directory (a restore, [`crate::backup`]):
/// committed in chunks, the last one durable.
pub struct Importer {
    db: Database,
    txn: Option<WriteTransaction>,
    pending_bytes: usize,
    rows: u64,
}

/// A chunk of imported rows is committed past this many bytes, so an
/// import never holds a whole store in one transaction.
const IMPORT_CHUNK_BYTES: usize = 32 << 20;

impl Importer {
    /// Creates `<dir>/carrier.redb`, which must not exist yet, and the
    /// `segments/` directory.
    ///
    /// # Errors
    /// [`StoreError::Io`] if it exists or cannot be created.
    pub fn create(dir: &Path) -> StoreResult<Importer> {
        let path = dir.join(INDEX_FILE);
        if path.exists() {
            return Err(StoreError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", path.display()),
            )));
        }
        std::fs::create_dir_all(segment::segments_dir(dir))?;
        let db = Database::builder().create(path).map_err(db_error)?;
        Ok(Importer {
            db,
            txn: None,
            pending_bytes: 0,
            rows: 0,
        })
    }

    /// Inserts one row into `table`, which must be one of the store's
    /// tables.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an unknown table; engine errors.
    pub fn row(&mut self, table: &str, key: &[u8], value: &[u8]) -> StoreResult<()> {
        let def = ALL_TABLES
            .into_iter()
            .find(|d| redb::TableHandle::name(d) == table)
            .ok_or_else(|| corrupt(format!("unknown table {table:?}")))?;
        if self.txn.is_none() {
            let mut txn = self.db.begin_write().map_err(db_error)?;
            txn.set_durability(Durability::None).map_err(db_error)?;
            self.txn = Some(txn);
        }
        let txn = self.txn.as_ref().ok_or(StoreError::Closed)?;
        if put(txn, def, key, value)?.is_some() {
            return Err(corrupt(format!("duplicate key in table {table}")));
        }
        self.rows += 1;
        self.pending_bytes += key.len() + value.len();
        if self.pending_bytes >= IMPORT_CHUNK_BYTES {
            self.commit_chunk()?;
        }
        Ok(())
    }

    fn commit_chunk(&mut self) -> StoreResult<()> {
        if let Some(txn) = self.txn.take() {
            txn.commit().map_err(db_error)?;
        }
        self.pending_bytes = 0;
        Ok(())
    }

    /// Commits the rest durably and closes the database; returns the rows
    /// imported.
    ///
    /// # Errors
    /// Engine errors.
    pub fn finish(mut self) -> StoreResult<u64> {
        self.commit_chunk()?;
        let mut txn = self.db.begin_write().map_err(db_error)?;
        txn.set_durability(Durability::Immediate)
            .map_err(db_error)?;
        txn.commit().map_err(db_error)?;
        Ok(self.rows)
    }
}
