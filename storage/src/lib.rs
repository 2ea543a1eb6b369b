//! # rltp-storage: the carrier's store backends
//!
//! The backends behind `rltp-store`'s [`Store`] traits (re-exported here,
//! so that `rltp_storage::Store`, `rltp_storage::mem::MemStore` and the
//! model keep their paths):
//! - [`log_store`], the embedded default: the queue data a log, its
//!   indexes in memory, redb for the bindings;
//! - [`redb_store`], the previous embedded store, kept for comparison and
//!   as the layout [`log_store`] upgrades from;
//! - `postgres` (feature `postgres`), the store many carrier nodes share.
//!
//! ## Layout (one mechanism per file)
//! | path | what |
//! |---|---|
//! | `log_store/` | the log store: `mod.rs` (the store, commit order), `write.rs`, `read.rs`, `record.rs` (the log's record format), `recovery.rs` (open: every file accounted for, then the replay), `snapshot.rs`, `housekeeping.rs`, `integrity.rs`, `migrate.rs` (the upgrade from the redb layout), `backup.rs`, `kill.rs`, and `index/` (the in-memory index: records, slab, hashes, queues, queue list, deposits, departures, due, undo, history, check, load) |
//! | `redb_store/` | the legacy redb-layout store, kept for the upgrade path and comparison: open, log, replay, txn, check, compact, backup, `oplog.rs` (its record format) |
//! | `schema/` | the redb tables both layouts keep, their keys and codecs, the `Tables` view, the queries, both layouts' format numbers |
//! | `store_id.rs` | a store's identity, its index file and data-dir names, `inspect`, `store_in_use` |
//! | `failure.rs` | error helpers (each keeps its source), the fatal log-sync failure |
//! | `log_sync.rs` | how far an embedded log is durable, and the one way it is synced |
//! | `segment.rs`, `cursor.rs`, `fs.rs`, `fault_fs.rs`, `contain.rs` | the segment writer, the record-body cursor, the file layer and the simulated disk, panic containment |
//! | `postgres/` | the PostgreSQL store |
//! | `backup.rs` | the backup archive (both embedded layouts) |
//!
//! Only `log_store/migrate.rs` and `backup.rs` reach into `redb_store/`.
//!
//! What this crate does **not** do: it decides nothing about requests (the
//! rules are `rltp-engine`'s, which drives the store through the traits),
//! runs no thread of its own for writes and reads no clock (the carrier's
//! group-commit writer sequences write transactions and hands every
//! instant in); only the PostgreSQL store runs an async runtime, inside.

pub mod backup;
mod contain;
mod cursor;
mod failure;
pub mod fault_fs;
pub mod fs;
pub mod log_store;
mod log_sync;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod redb_store;
mod schema;
mod segment;
pub mod store_id;
mod throttle;

pub use rltp_store::*;

/// Deposits one background maintenance step of an embedded store examines
/// ([`Store::maintenance_step`]: a bounded compaction step, one short
/// write transaction serialized with the writer).
pub(crate) const MAINTENANCE_SCAN: usize = 4_096;
pub use store_id::{INDEX_FILE, Inspection, IntegrityReport, StoreId, store_in_use};
pub use throttle::LogThrottle;

/// Reads `len` bytes at `offset` of `file` and checks that they hash to
/// `id`: a file cut short or other bytes are [`StoreError::Corrupt`]
/// (`what` names the deposit), any other read error is the disk's.
pub(crate) fn read_checked(
    file: &dyn fs::StoreFile,
    offset: u64,
    len: u32,
    id: &DepositId,
    what: &str,
) -> StoreResult<Vec<u8>> {
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            StoreError::Corrupt(format!("{what}: the segment is cut short ({e})"))
        } else {
            StoreError::Io(e)
        }
    })?;
    if DepositId::of(&bytes) != *id {
        return Err(StoreError::Corrupt(format!(
            "{what}: bytes do not match their id"
        )));
    }
    Ok(bytes)
}
