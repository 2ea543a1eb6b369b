//! The PostgreSQL store's schema, as numbered migrations applied in order
//! at open (or by `rltp-carrier migrate`), each in one transaction.
//!
//! `rltp_meta.schema_version` records the highest applied migration. A
//! database whose version is higher than [`SCHEMA_VERSION`] belongs to a
//! newer binary and is refused by name ([`SchemaError::Newer`]); a binary
//! never runs against a schema it does not know.
//!
//! | table | key | what |
//! |---|---|---|
//! | `rltp_meta` | `name` | `schema_version` (u32 BE), `store_id` (16 bytes), `declaration` (revision u64 BE ‖ document), `seq_floor` (u64 BE) |
//! | `rltp_occupancy` | `id = 1` | the counters (s5, s6, guarantee 5) not held in a lane's share; the tombstone count, exact; its row lock is the tombstone gate (`escrow.rs`) |
//! | `rltp_pool` | `id = 1` | the capacity no node holds: bytes above the floors and binding slots (`escrow.rs`) |
//! | `rltp_lanes` | `lane` | each node's budget (bytes, slots), its epoch, and its share of the counters (`escrow.rs`) |
//! | `rltp_bindings` | `rkid` | held bindings; `closing_deadline` NULL = `live` |
//! | `rltp_tombstones` | `rkid` | released bindings; index `(released_at, rkid)` = eviction order |
//! | `rltp_queues` | `rkid` | `last_seq` (the queue's highest `seq` ever handed out, kept forever), `bytes` held |
//! | `rltp_deposits` | `(rkid, seq)` | held deposits with their envelope bytes; unique `(rkid, id)` = byte identity (s3) |
//! | `rltp_departures` | `(rkid, id)` | how a deposit left, until `forget_at` (status path) |
//! | `rltp_due` | `(at, tag, rkid, seq, id)` | the due-time index, ordered exactly like `(Ms, Due)` (`at` is the instant minus 2^63, so the whole `u64` range sorts) |
//! | `rltp_quarantine` | `(rkid, seq)` | deposits found damaged (PROTOCOL.md §12) |
//!
//! Every integer is `bigint` (a `u64` above `i64::MAX` is refused, never
//! wrapped); every key is the raw bytes (`bytea` orders as `memcmp`, so the
//! orders of the embedded store hold here too).

/// The schema this binary reads and writes.
pub const SCHEMA_VERSION: u32 = 2;

/// Migration `n` (1-based) is `MIGRATIONS[n - 1]`.
pub const MIGRATIONS: [&str; 2] = [
    r"
CREATE TABLE rltp_meta (
    name text PRIMARY KEY,
    value bytea NOT NULL
);
CREATE TABLE rltp_occupancy (
    id smallint PRIMARY KEY CHECK (id = 1),
    total_bytes bigint NOT NULL,
    bindings bigint NOT NULL,
    deposits bigint NOT NULL,
    tombstones bigint NOT NULL,
    elastic_bytes bigint NOT NULL,
    quarantined bigint NOT NULL
);
INSERT INTO rltp_occupancy VALUES (1, 0, 0, 0, 0, 0, 0);
CREATE TABLE rltp_bindings (
    rkid bytea PRIMARY KEY,
    closing_deadline bigint,
    generation bigint NOT NULL,
    principal bytea NOT NULL,
    last_collection_at bigint NOT NULL
);
CREATE TABLE rltp_tombstones (
    rkid bytea PRIMARY KEY,
    generation bigint NOT NULL,
    released_at bigint NOT NULL
);
CREATE INDEX rltp_tombstones_eviction ON rltp_tombstones (released_at, rkid);
CREATE TABLE rltp_queues (
    rkid bytea PRIMARY KEY,
    last_seq bigint NOT NULL,
    bytes bigint NOT NULL
);
CREATE TABLE rltp_deposits (
    rkid bytea NOT NULL,
    seq bigint NOT NULL,
    id bytea NOT NULL,
    len integer NOT NULL,
    admitted_at bigint NOT NULL,
    give_up_at bigint NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (rkid, seq)
);
ALTER TABLE rltp_deposits ALTER COLUMN bytes SET STORAGE EXTERNAL;
CREATE UNIQUE INDEX rltp_deposits_identity ON rltp_deposits (rkid, id);
CREATE TABLE rltp_departures (
    rkid bytea NOT NULL,
    id bytea NOT NULL,
    concluded boolean NOT NULL,
    forget_at bigint NOT NULL,
    PRIMARY KEY (rkid, id)
);
CREATE TABLE rltp_due (
    at bigint NOT NULL,
    tag smallint NOT NULL,
    rkid bytea NOT NULL,
    seq bigint NOT NULL,
    id bytea NOT NULL,
    PRIMARY KEY (at, tag, rkid, seq, id)
);
CREATE TABLE rltp_quarantine (
    rkid bytea NOT NULL,
    seq bigint NOT NULL,
    id bytea NOT NULL,
    len integer NOT NULL,
    admitted_at bigint NOT NULL,
    give_up_at bigint NOT NULL,
    at bigint NOT NULL,
    reason text NOT NULL,
    PRIMARY KEY (rkid, seq)
);
",
    // 2: escrowed budgets (issue 23): the pool and the lanes; the pool is
    // filled by the first rebalance (`escrow::rebalance`), when a node
    // stores or finds the limits.
    r"
CREATE TABLE rltp_pool (
    id smallint PRIMARY KEY CHECK (id = 1),
    bytes bigint NOT NULL,
    slots bigint NOT NULL
);
INSERT INTO rltp_pool VALUES (1, 0, 0);
CREATE TABLE rltp_lanes (
    lane integer PRIMARY KEY,
    epoch bigint NOT NULL,
    bytes bigint NOT NULL,
    slots bigint NOT NULL,
    total_bytes bigint NOT NULL,
    deposits bigint NOT NULL,
    bindings bigint NOT NULL,
    elastic_bytes bigint NOT NULL,
    quarantined bigint NOT NULL
);
",
];

/// Why the schema cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The database was migrated by a newer binary.
    #[error(
        "the database has rltp schema version {found}, newer than this binary's {supported}: \
         run the newer rltp-carrier, or restore the database from before its migration"
    )]
    Newer {
        /// The database's version.
        found: u32,
        /// This binary's [`SCHEMA_VERSION`].
        supported: u32,
    },
    /// `schema_version` is not 4 bytes.
    #[error("rltp_meta.schema_version is not a 4-byte version ({0} bytes)")]
    Unreadable(usize),
}

/// What to apply to a database at `version` (0: none of ours): the
/// migrations after it, in order, with the version each one reaches.
///
/// # Errors
/// [`SchemaError::Newer`] for a database newer than this binary.
pub fn pending(version: u32) -> Result<Vec<(u32, &'static str)>, SchemaError> {
    if version > SCHEMA_VERSION {
        return Err(SchemaError::Newer {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(MIGRATIONS
        .iter()
        .enumerate()
        .map(|(i, sql)| (u32::try_from(i + 1).unwrap_or(u32::MAX), *sql))
        .filter(|(n, _)| *n > version)
        .collect())
}

/// Reads a stored `schema_version` value.
///
/// # Errors
/// [`SchemaError::Unreadable`].
pub fn decode_version(bytes: &[u8]) -> Result<u32, SchemaError> {
    <[u8; 4]>::try_from(bytes)
        .map(u32::from_be_bytes)
        .map_err(|_| SchemaError::Unreadable(bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_after_the_held_version_and_a_newer_schema_is_refused() {
        assert_eq!(pending(0).unwrap().len(), MIGRATIONS.len());
        assert!(pending(SCHEMA_VERSION).unwrap().is_empty());
        assert_eq!(
            pending(SCHEMA_VERSION + 1),
            Err(SchemaError::Newer {
                found: SCHEMA_VERSION + 1,
                supported: SCHEMA_VERSION
            })
        );
        assert_eq!(
            SchemaError::Newer {
                found: 2,
                supported: 1
            }
            .to_string(),
            "the database has rltp schema version 2, newer than this binary's 1: run the newer \
             rltp-carrier, or restore the database from before its migration"
        );
        assert_eq!(decode_version(&7u32.to_be_bytes()), Ok(7));
        assert_eq!(decode_version(b"x"), Err(SchemaError::Unreadable(1)));
    }
}
