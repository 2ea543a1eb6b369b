//! Shared helpers of the storage tests: fixed rkids and records, a full
//! observable-state dump used to compare stores, and store constructors.
#![allow(dead_code, clippy::panic)]

use rltp_proofs::multikey::Rkid;
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::redb_store::{Placement, RedbOptions, RedbStore};
use rltp_storage::{
    Binding, DeclarationRecord, DepartureRecord, Deposit, DepositId, Due, Ms, Occupancy, Phase,
    ReadTxn, Store, StoreResult, Tombstone,
};

/// Runs `f` in one write transaction of `store` and commits it.
pub fn write<S: Store, R>(
    store: &S,
    f: impl FnOnce(&mut S::Write<'_>) -> StoreResult<R>,
) -> StoreResult<R> {
    let mut txn = store.begin_write()?;
    let out = f(&mut txn)?;
    store.commit(txn)?;
    Ok(out)
}

/// An rkid whose key bytes are `first` followed by zeros and `last`: tests
/// of the eviction order need rkids that differ only in late bytes.
pub fn rkid2(first: u8, last: u8) -> Rkid {
    let mut bytes = [0u8; 32];
    bytes[0] = first;
    bytes[31] = last;
    Rkid::from_bytes(bytes)
}

/// `rkid2(n, n)`.
pub fn rkid(n: u8) -> Rkid {
    rkid2(n, n)
}

/// A live binding with generation `generation`.
pub fn live(generation: u64, last_collection_at: Ms) -> Binding {
    Binding {
        phase: Phase::Live,
        generation,
        principal: [generation as u8; 32],
        last_collection_at,
    }
}

/// A closing binding.
pub fn closing(generation: u64, deadline: Ms) -> Binding {
    Binding {
        phase: Phase::Closing { deadline },
        generation,
        principal: [0xc1; 32],
        last_collection_at: 1,
    }
}

/// A tombstone.
pub fn tomb(generation: u64, released_at: Ms) -> Tombstone {
    Tombstone {
        generation,
        released_at,
    }
}

/// Deterministic envelope bytes of length `len` for `seed`.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The default redb options of the tests: tiny segments so that rotation,
/// reclamation and compaction happen in small tests.
pub fn small_segments() -> RedbOptions {
    RedbOptions {
        segment_bytes: 4096,
        ..RedbOptions::default()
    }
}

/// Inline placement (the benchmark's comparison design).
pub fn inline() -> RedbOptions {
    RedbOptions {
        placement: Placement::Inline,
        ..RedbOptions::default()
    }
}

/// A PostgreSQL store on a fresh throwaway cluster (kept alive by the
/// guard); a missing PostgreSQL fails the test, naming the package.
pub fn postgres() -> (rltp_pgtest::Cluster, rltp_storage::postgres::PgStore) {
    let cluster = rltp_pgtest::Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let store = rltp_storage::postgres::PgStore::open(rltp_storage::postgres::PgOptions::new(
        cluster.conninfo(),
    ))
    .unwrap_or_else(|e| panic!("open the postgres store: {e}"));
    (cluster, store)
}

/// A redb store in a fresh temporary directory (kept alive by the guard).
pub fn redb(options: RedbOptions) -> (tempfile::TempDir, RedbStore) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = RedbStore::open_with(dir.path(), options).expect("open redb store");
    (dir, store)
}

/// Log store options for tests: tiny segments and snapshot intervals, so
/// that rotation, snapshots and reclaiming happen in small tests.
pub fn small_log() -> LogOptions {
    LogOptions {
        segment_bytes: 4096,
        snapshot_log_bytes: 8192,
        redb_checkpoint_ops: 16,
        ..LogOptions::default()
    }
}

/// A log store in a fresh temporary directory (kept alive by the guard).
pub fn log(options: LogOptions) -> (tempfile::TempDir, LogStore) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = LogStore::open_with(dir.path(), options).expect("open log store");
    (dir, store)
}

/// Everything a caller can observe about the queues of `rkids` and the
/// deposit ids of `ids`, as one comparable value.
#[derive(Debug, PartialEq, Eq)]
pub struct Dump {
    pub bindings: Vec<Option<Binding>>,
    pub tombstones: Vec<Option<Tombstone>>,
    pub oldest_tombstone: Option<(Rkid, Tombstone)>,
    pub deposits: Vec<Vec<(Deposit, Vec<u8>)>>,
    pub pages: Vec<Vec<Deposit>>,
    pub by_id: Vec<Option<Deposit>>,
    pub queue_bytes: Vec<u64>,
    pub departures: Vec<Option<DepartureRecord>>,
    pub due: Vec<(Ms, Due)>,
    pub next_due: Option<Ms>,
    pub occupancy: Occupancy,
    pub declaration: Option<DeclarationRecord>,
}

/// Reads a [`Dump`] through the trait.
pub fn dump(r: &impl ReadTxn, rkids: &[Rkid], ids: &[DepositId]) -> StoreResult<Dump> {
    let mut d = Dump {
        bindings: Vec::new(),
        tombstones: Vec::new(),
        oldest_tombstone: r.oldest_tombstone()?,
        deposits: Vec::new(),
        pages: Vec::new(),
        by_id: Vec::new(),
        queue_bytes: Vec::new(),
        departures: Vec::new(),
        due: r.due(Ms::MAX, usize::MAX)?,
        next_due: r.next_due()?,
        occupancy: r.occupancy()?,
        declaration: r.declaration()?,
    };
    for rkid in rkids {
        d.bindings.push(r.binding(rkid)?);
        d.tombstones.push(r.tombstone(rkid)?);
        let held = r.deposits(rkid, None, usize::MAX)?;
        let mut with_bytes = Vec::new();
        for deposit in &held {
            with_bytes.push((*deposit, r.deposit_bytes(rkid, deposit)?));
        }
        d.deposits.push(with_bytes);
        // A page from the middle, to compare the `after` cursor.
        let middle = held.get(held.len() / 2).map(|x| x.seq);
        d.pages.push(r.deposits(rkid, middle, 2)?);
        d.queue_bytes.push(r.queue_bytes(rkid)?);
        for id in ids {
            d.by_id.push(r.deposit_by_id(rkid, id)?);
            d.departures.push(r.departure(rkid, id)?);
        }
    }
    Ok(d)
}
