//! A store's identity and its index file: [`StoreId`], the index file
//! name both embedded layouts use ([`INDEX_FILE`]), a read-only look at a
//! store directory ([`inspect`], [`store_in_use`]), the refusal of a
//! missing index, and what an integrity check reports.

use crate::StoreResult;
use crate::failure::{Context, corrupt, damaged, db_error};
use crate::schema::{LOG_FORMAT, META, META_FORMAT, META_STORE_ID, REDB_FORMAT};
use crate::{OpenError, StoreError};
use redb::ReadableDatabase;
use std::path::Path;

/// The names below, spelled once (`concat!` needs literals).
macro_rules! store_dir {
    () => {
        "store"
    };
}
macro_rules! index_file {
    () => {
        "carrier.redb"
    };
}

/// The embedded store's directory inside a carrier's data directory (and
/// inside a backup archive).
pub const STORE_DIR: &str = store_dir!();
/// The redb file of an embedded store's directory (both layouts).
pub const INDEX_FILE: &str = index_file!();
/// The index file relative to a data directory (`store/carrier.redb`).
pub const STORE_INDEX: &str = concat!(store_dir!(), "/", index_file!());

/// A store's identity: 16 random bytes drawn when it is created, kept in
/// its `meta` table (and so in every backup of it). A data dir records it
/// to recognise its own store (`deploy/OPERATIONS.md`, "damaged data dir").
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreId(pub [u8; 16]);

impl StoreId {
    /// A fresh random id.
    pub fn random() -> StoreId {
        StoreId(rand::random())
    }

    /// Parses the 32 lowercase hex digits of [`StoreId`]'s `Display`.
    pub fn parse(text: &str) -> Option<StoreId> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(StoreId(bytes))
    }
}

impl std::fmt::Display for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl std::fmt::Debug for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreId({self})")
    }
}

/// What an integrity check of an embedded store counted and found
/// ([`crate::redb_store::RedbStore::integrity_check`],
/// [`crate::log_store::LogStore::integrity_check`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IntegrityReport {
    /// Held bindings.
    pub bindings: u64,
    /// Binding tombstones.
    pub tombstones: u64,
    /// Held deposits (each read back and its SHA-256 verified).
    pub deposits: u64,
    /// Σ deposit lengths (bytes), equal to the occupancy counter.
    pub bytes: u64,
    /// Recorded segments (including the active one).
    pub segments: u64,
    /// rkids holding both a binding and a tombstone (the engine must keep
    /// this 0; the store itself does not forbid it).
    pub binding_and_tombstone: u64,
    /// Held deposits whose bytes fail their check (unreadable, or not the
    /// bytes their id names), each named by seq, segment and offset: not
    /// yet met by an operation, which would quarantine them.
    pub damaged: Vec<String>,
    /// Quarantine records (deposits found damaged and given up), each
    /// named by seq, segment, offset, instant and the failed check.
    pub quarantined: Vec<String>,
}

impl IntegrityReport {
    /// Nothing damaged, nothing quarantined, no rkid with both a binding
    /// and a tombstone.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty() && self.quarantined.is_empty() && self.binding_and_tombstone == 0
    }
}

/// The refusal of an index that is missing, empty or unformatted where a
/// store is expected (module docs, "A store knows its own files").
pub(crate) fn missing_index(
    db_path: &Path,
    exists: bool,
    with_records: &[u64],
    expected: Option<StoreId>,
) -> OpenError {
    let state = if exists {
        "is empty or holds no store"
    } else {
        "is missing"
    };
    let mut why = Vec::new();
    if !with_records.is_empty() {
        let ids: Vec<String> = with_records.iter().map(|id| format!("{id:016x}")).collect();
        why.push(format!(
            "the operation log holds records in {} segment file(s) ({})",
            ids.len(),
            ids.join(", ")
        ));
    }
    if let Some(id) = expected {
        why.push(format!("this data dir's store is {id}"));
    }
    damaged(format!(
        "the index {} {state}, but {}: a fresh store here would lose what they hold, so none is made",
        db_path.display(),
        why.join(", and ")
    ))
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// What a read-only look at a store directory found ([`inspect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inspection {
    /// No index (`carrier.redb` absent or empty): the first start makes one.
    Absent,
    /// Another process (a running carrier) holds the store open: it could
    /// not be read, and that is no fault.
    InUse,
    /// The store was not closed cleanly: the next start recovers it (which
    /// writes), so it was not read further.
    NeedsRecovery,
    /// The store opened read-only.
    Held {
        /// Its identity, `None` for a store made before stores had ids.
        store_id: Option<StoreId>,
        /// Its format version, `None` for a database without a store in it.
        format: Option<u32>,
    },
}

/// Looks at the store in `dir` without writing anything: no directory,
/// file, lock upgrade or recovery is made (`rltp-carrier serve --check`).
/// It reads the index read-only (redb's [`redb::ReadOnlyDatabase`]) and
/// its `meta` table.
///
/// # Errors
/// [`StoreError::Redb`] or [`StoreError::Io`] when the index cannot be
/// read, [`StoreError::Corrupt`] for a format this build does not know.
pub fn inspect(dir: impl AsRef<Path>) -> StoreResult<Inspection> {
    let db_path = dir.as_ref().join(INDEX_FILE);
    match std::fs::metadata(&db_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Inspection::Absent),
        Err(e) => return Err(StoreError::Io(e)),
        Ok(m) if m.len() == 0 => return Ok(Inspection::Absent),
        Ok(_) => {}
    }
    let db = match redb::ReadOnlyDatabase::open(&db_path) {
        Ok(db) => db,
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Ok(Inspection::InUse),
        Err(redb::DatabaseError::RepairAborted) => return Ok(Inspection::NeedsRecovery),
        Err(e) => {
            return Err(StoreError::Redb(Context::new(
                db_path.display().to_string(),
                e,
            )));
        }
    };
    let txn = db.begin_read().map_err(db_error)?;
    let meta = match txn.open_table(META) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => {
            return Ok(Inspection::Held {
                store_id: None,
                format: None,
            });
        }
        Err(e) => return Err(db_error(e)),
    };
    let format = match meta.get(META_FORMAT).map_err(db_error)? {
        Some(v) => Some(
            <[u8; 4]>::try_from(v.value())
                .map(u32::from_be_bytes)
                .map_err(|_| corrupt("meta format is not 4 bytes"))?,
        ),
        None => None,
    };
    // Both embedded layouts keep their `meta` here: the redb store's
    // (1, 2) and the log store's, which `serve` opens (upgrading the
    // others).
    if let Some(version) = format
        && version != 1
        && version != REDB_FORMAT
        && version != LOG_FORMAT
    {
        return Err(corrupt(format!(
            "store format {version}, expected 1, {REDB_FORMAT} (the redb layout) or {} (the log store)",
            LOG_FORMAT
        )));
    }
    let store_id = meta
        .get(META_STORE_ID)
        .map_err(db_error)?
        .and_then(|v| <[u8; 16]>::try_from(v.value()).ok().map(StoreId));
    Ok(Inspection::Held { store_id, format })
}

/// Whether another process (or another handle in this one) holds the store
/// in `dir` open: redb locks its file for its single writer. Opens nothing
/// for writing and changes nothing; a missing, unreadable or uncleanly
/// closed file counts as not in use.
pub fn store_in_use(dir: &Path) -> bool {
    matches!(
        redb::ReadOnlyDatabase::open(dir.join(INDEX_FILE)),
        Err(redb::DatabaseError::DatabaseAlreadyOpen)
    )
}
