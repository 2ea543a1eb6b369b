//! Reading and writing the redb tables: one [`Tables`] view over read and
//! write transactions, the row helpers, and opening the database through
//! the store's file layer.

use super::*;

pub(crate) type Range<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// Read access to the tables of a redb transaction (read or write).
pub(crate) trait Tables {
    /// Applies `f` to the value under `key`.
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>>;
    /// Rows of table `def`.
    fn count(&self, def: Def) -> StoreResult<u64>;
    /// Calls `f` on each entry of `range` in key order until it returns
    /// `false`.
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()>;
}

pub(crate) fn get_in<T, R>(
    table: &T,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> StoreResult<R>,
) -> StoreResult<Option<R>>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    match table.get(key).map_err(db_error)? {
        Some(guard) => f(guard.value()).map(Some),
        None => Ok(None),
    }
}

pub(crate) fn scan_in<T>(
    table: &T,
    range: Range<'_>,
    mut f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
) -> StoreResult<()>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    for item in table.range::<&[u8]>(range).map_err(db_error)? {
        let (k, v) = item.map_err(db_error)?;
        if !f(k.value(), v.value())? {
            break;
        }
    }
    Ok(())
}

impl Tables for ReadTransaction {
    fn count(&self, def: Def) -> StoreResult<u64> {
        use redb::ReadableTableMetadata as _;
        self.open_table(def)
            .map_err(db_error)?
            .len()
            .map_err(db_error)
    }
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>> {
        get_in(&self.open_table(def).map_err(db_error)?, key, f)
    }
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        scan_in(&self.open_table(def).map_err(db_error)?, range, f)
    }
}

impl Tables for WriteTransaction {
    fn count(&self, def: Def) -> StoreResult<u64> {
        use redb::ReadableTableMetadata as _;
        self.open_table(def)
            .map_err(db_error)?
            .len()
            .map_err(db_error)
    }
    fn get_with<R>(
        &self,
        def: Def,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> StoreResult<R>,
    ) -> StoreResult<Option<R>> {
        get_in(&self.open_table(def).map_err(db_error)?, key, f)
    }
    fn scan(
        &self,
        def: Def,
        range: Range<'_>,
        f: impl FnMut(&[u8], &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        scan_in(&self.open_table(def).map_err(db_error)?, range, f)
    }
}

pub(crate) fn put(
    txn: &WriteTransaction,
    def: Def,
    key: &[u8],
    value: &[u8],
) -> StoreResult<Option<Vec<u8>>> {
    let mut table = txn.open_table(def).map_err(db_error)?;
    let old = table.insert(key, value).map_err(db_error)?;
    Ok(old.map(|g| g.value().to_vec()))
}

pub(crate) fn del(txn: &WriteTransaction, def: Def, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
    let mut table = txn.open_table(def).map_err(db_error)?;
    let old = table.remove(key).map_err(db_error)?;
    Ok(old.map(|g| g.value().to_vec()))
}

pub(crate) fn get_u64(t: &impl Tables, def: Def, key: &[u8]) -> StoreResult<Option<u64>> {
    t.get_with(def, key, |v| u64_at(v, 0))
}

pub(crate) fn first_key(
    t: &impl Tables,
    def: Def,
    range: Range<'_>,
) -> StoreResult<Option<Vec<u8>>> {
    let mut found = None;
    t.scan(def, range, |k, _| {
        found = Some(k.to_vec());
        Ok(false)
    })?;
    Ok(found)
}

/// Opens (or creates) the redb file through the store's file layer, with
/// the store's cache size.
pub(crate) fn open_db(fs: &dyn StoreFs, path: &Path, cache_bytes: usize) -> StoreResult<Database> {
    let backend = fs.redb_backend(path)?;
    Database::builder()
        .set_cache_size(cache_bytes)
        .create_with_backend(Boxed(backend))
        .map_err(db_error)
}

/// A boxed backend as a [`redb::StorageBackend`] (every method delegates,
/// the locks included: they make a second open of the file fail).
#[derive(Debug)]
pub(crate) struct Boxed(Box<dyn redb::StorageBackend>);

impl Boxed {
    /// `backend`, as a [`redb::StorageBackend`].
    pub(crate) fn new(backend: Box<dyn redb::StorageBackend>) -> Boxed {
        Boxed(backend)
    }
}

impl redb::StorageBackend for Boxed {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.0.write(offset, data)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.0.close()
    }
    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.0.query_lock_range(start, end)
    }
}

pub(crate) fn begin(db: &Database, quick_repair: bool) -> StoreResult<WriteTransaction> {
    let mut txn = db.begin_write().map_err(db_error)?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_error)?;
    txn.set_quick_repair(quick_repair);
    Ok(txn)
}

/// Where the log resumes: `(segment, offset)` of the first record redb's
/// state does not hold (`None` for a format-1 store).
pub(crate) fn applied(t: &impl Tables) -> StoreResult<Option<(u64, u64)>> {
    t.get_with(META, META_APPLIED, |v| Ok((u64_at(v, 0)?, u64_at(v, 8)?)))
}
