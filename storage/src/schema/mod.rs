//! The redb tables both embedded stores keep (the log store: bindings,
//! tombstones, eviction order, the declaration and `meta`; the legacy
//! redb store: all of them), their keys, and the format numbers of both
//! layouts.
//!
//! ## Tables and their encodings
//! Every key and value is a byte string written big-endian, so that redb's
//! lexicographic key order is the numeric order the store needs.
//! `rkid` is the 32 raw X25519 key bytes, `id` the 32 SHA-256 bytes of the
//! envelope, `seq`/instants/counters are u64 BE, `len` is u32 BE.
//!
//! | table | key | value |
//! |---|---|---|
//! | `bindings` | rkid | phase u8 (0 live, 1 closing) ‖ deadline u64 (0 when live) ‖ generation u64 ‖ principal \[32\] ‖ last_collection_at u64 (57 B) |
//! | `tombstones` | rkid | generation u64 ‖ released_at u64 (16 B) |
//! | `eviction` | released_at u64 ‖ rkid (40 B) | empty — eviction order (§5a.3) |
//! | `deposits` | rkid ‖ seq u64 (40 B) | segment u64 ‖ offset u64 ‖ len u32 ‖ id \[32\] ‖ admitted_at u64 ‖ give_up_at u64 (68 B) \[‖ envelope bytes when inline\] |
//! | `identity` | rkid ‖ id (64 B) | seq u64 |
//! | `queues` | rkid | next_seq u64 (last seq handed out) ‖ bytes u64 |
//! | `departures` | rkid ‖ id (64 B) | kind u8 (0 concluded, 1 given-up) ‖ forget_at u64 |
//! | `due` | at u64 ‖ tag u8 ‖ rkid ‖ extra | empty; tag 0 `OrphanExpiry`, 1 `Deadline`, 2 `GiveUp` (extra = seq u64), 3 `Forget` (extra = id) |
//! | `segments` | segment u64 | live_count u64 ‖ live_bytes u64 ‖ end u64 (committed extent) |
//! | `segment_gc` | segment u64 | empty — segments to unlink (pending deletions) |
//! | `quarantine` | rkid ‖ seq u64 | id \[32\] ‖ len u32 ‖ admitted_at u64 ‖ give_up_at u64 ‖ detected_at u64 ‖ segment u64 ‖ offset u64 ‖ reason (UTF-8) — deposits found damaged and given up (`WriteTxn::quarantine`) |
//! | `meta` | ASCII name | `format` u32 = 2 (1: before the operation log, upgraded on open); `applied` segment u64 ‖ offset u64 (the log records before it are in this state); `occupancy` total_bytes ‖ bindings ‖ deposits ‖ tombstones ‖ elastic_bytes (5×u64); `declaration` revision u64 ‖ document; `active_segment` u64; `next_segment` u64; `store_id` \[16\]; `seq_floor` u64 (every next `seq` is above it; raised by a restore) |
//!
//! The `due` key order equals the order of `(Ms, Due)` (variant order, then
//! fields), and the `eviction` key order equals `(released_at, rkid)`, so
//! both indexes are read front to back. A deposit stored inline (the
//! benchmark's comparison design, [`Placement::Inline`]) has segment
//! `u64::MAX` and offset 0.
//!

mod access;
mod codec;
pub(crate) mod query;
mod rows;

pub(crate) use access::*;
pub(crate) use codec::*;
pub(crate) use rows::*;

use crate::failure::{corrupt, db_error};
use crate::fs::StoreFs;
use crate::{
    Binding, BindingPhases, DeclarationRecord, Departure, DepartureRecord, Deposit, DepositId, Due,
    Ms, Occupancy, Phase, StoreResult, Tombstone,
};
use redb::{
    Database, Durability, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction,
};
use rltp_proofs::multikey::Rkid;
use std::ops::Bound;
use std::path::Path;

pub(crate) type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

pub(crate) const BINDINGS: Def = TableDefinition::new("bindings");
pub(crate) const TOMBSTONES: Def = TableDefinition::new("tombstones");
pub(crate) const EVICTION: Def = TableDefinition::new("eviction");
pub(crate) const DEPOSITS: Def = TableDefinition::new("deposits");
pub(crate) const IDENTITY: Def = TableDefinition::new("identity");
pub(crate) const QUEUES: Def = TableDefinition::new("queues");
pub(crate) const DEPARTURES: Def = TableDefinition::new("departures");
pub(crate) const DUE: Def = TableDefinition::new("due");
pub(crate) const SEGMENTS: Def = TableDefinition::new("segments");
pub(crate) const SEGMENT_GC: Def = TableDefinition::new("segment_gc");
pub(crate) const META: Def = TableDefinition::new("meta");
pub(crate) const QUARANTINE: Def = TableDefinition::new("quarantine");
pub(crate) const ALL_TABLES: [Def; 12] = [
    BINDINGS, TOMBSTONES, EVICTION, DEPOSITS, IDENTITY, QUEUES, DEPARTURES, DUE, SEGMENTS,
    SEGMENT_GC, META, QUARANTINE,
];

pub(crate) const META_FORMAT: &[u8] = b"format";
pub(crate) const META_OCCUPANCY: &[u8] = b"occupancy";
pub(crate) const META_DECLARATION: &[u8] = b"declaration";
pub(crate) const META_ACTIVE: &[u8] = b"active_segment";
pub(crate) const META_NEXT_SEGMENT: &[u8] = b"next_segment";
pub(crate) const META_APPLIED: &[u8] = b"applied";
pub(crate) const META_STORE_ID: &[u8] = b"store_id";
pub(crate) const META_SEQ_FLOOR: &[u8] = b"seq_floor";
/// `meta` key of the log store: held bindings and tombstones (2 × u64).
pub(crate) const META_COUNTS: &[u8] = b"counts";
/// `meta` key of the log store: the redb store's `segments/` still to
/// delete after an upgrade.
pub(crate) const META_LEGACY: &[u8] = b"legacy_segments";

/// The legacy redb store's format: format 2 writes operation-log records
/// into segments; a format-1 store (bare envelope bytes in segments, every
/// commit durable) is upgraded in place on open, and an older binary
/// refuses the result.
pub(crate) const REDB_FORMAT: u32 = 2;
/// The log store's format (`meta` `format`); a store of the redb layout
/// (formats 1 and 2) is upgraded to it on open.
pub const LOG_FORMAT: u32 = 3;
