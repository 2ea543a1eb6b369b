//! The log store's in-memory index: every queue, deposit, departure record
//! and due entry, in chunked slabs with hash indexes over them
//! (`storage/README.md`, "The log store: in memory").
//!
//! ## Layout and its byte budget (asserted below)
//! - a queue (any rkid with a binding, a deposit, a due entry or a
//!   departure, or that ever held a deposit: its `seq` is never reused):
//!   [`QueueRec`], 52 B, plus one `u32` in the rkid hash;
//! - a held deposit: [`DepRec`], 80 B (the full id, so that listing a
//!   queue reads no file), a `u32` in the identity hash on
//!   `(queue, id)`, and, for its give-up entry, a `u32` in the due index;
//!   the queue's deposits form a circular doubly linked list in `seq`
//!   order (the head's `prev` is the tail);
//! - a departure record: [`DepartRec`], 48 B, a `u32` in its hash, a
//!   `u32` in the due index for its forget entry;
//! - a due entry: a `u32` reference in the bucket of its instant
//!   (`BTreeMap<Ms, Vec<u32>>`): to a deposit (its own give-up instant),
//!   a queue (orphan expiry, deadline), a departure (its own forget
//!   instant), or, for anything else, a spilled full entry.
//!
//! A `seq` is found from a per-queue *finger* (the last deposit a lookup
//! touched in that queue, a cache validated on use) by walking the list:
//! O(1) for every pattern the engine has (paging a queue in order,
//! concluding what a collect returned, giving up the oldest), O(distance)
//! otherwise.
//!
//! ## Transactions and snapshots
//! Every mutation records how to undo it ([`Undo`]) in the open
//! transaction's log: an abort replays it backwards; slots a transaction
//! frees are released only at its commit. A read snapshot at version `v`
//! sees the current state with the changes of every later transaction
//! taken back: at commit, while snapshots are live, the undo log becomes a
//! map of *before-images* per key ([`History`], the first image of each
//! key wins), and a reader overlays the images of versions above its own
//! (and of the open transaction) on what it reads ([`View`]).

use crate::{DepartureRecord, Deposit, DepositId, Due, Ms, Occupancy, StoreError, StoreResult};
use hashbrown::HashTable;
use rltp_proofs::multikey::Rkid;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// No slot.
mod check;
mod departures;
mod deposits;
mod due;
mod hashes;
mod history;
mod load;
mod queue_list;
mod queues;
mod records;
mod slab;
mod undo;

pub(crate) use check::Canonical;
use due::*;
pub(crate) use hashes::IdentityBuilder;
use hashes::*;
pub(crate) use history::{History, View};
use records::*;
pub(crate) use records::{DepImage, DepRec, DepartRec, MAX_SLOTS, NIL, QueueImage, QueueRec};
pub(crate) use slab::Slab;
pub(crate) use undo::Undo;

/// Per-segment live deposits (compaction and reclamation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegStat {
    pub(crate) live: u64,
    pub(crate) bytes: u64,
}

// ---------------------------------------------------------------------------

/// The in-memory state (module docs).
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) deps: Slab<DepRec>,
    pub(crate) queues: Slab<QueueRec>,
    pub(crate) departs: Slab<DepartRec>,
    spill: Slab<SpillRec>,
    by_rkid: Table,
    by_id: Table,
    depart_by_id: Table,
    due: BTreeMap<Ms, Bucket>,
    due_len: u64,
    /// The spilled entries, by what they stand for.
    spill_index: HashMap<(Ms, Due), u32>,
    /// Deposits the open transaction removed whose give-up entry is still
    /// their compact reference (the engine unschedules it right after):
    /// `(queue, seq) → slot`. What is left at commit is spilled then.
    removed_flagged: HashMap<(u32, u64), u32>,
    pub(crate) quarantine: BTreeMap<(Rkid, u64), Vec<u8>>,
    pub(crate) occupancy: Occupancy,
    pub(crate) segs: HashMap<u32, SegStat>,
    fingers: Vec<AtomicU64>,
    hasher: hashbrown::DefaultHashBuilder,
    /// The version of the last committed transaction.
    pub(crate) committed: u64,
    /// The open transaction's undo log.
    open: Vec<Undo>,
    /// Whether it saved the occupancy's before-image already.
    occupancy_saved: bool,
    /// Slots it freed: released at commit (kind, slot).
    deferred: Vec<(u8, u32)>,
    /// Committed transactions' before-images, oldest first, kept while a
    /// snapshot older than them lives.
    history: std::collections::VecDeque<(u64, std::sync::Arc<History>)>,
    /// A snapshot is being loaded: nothing to undo, and due entries are
    /// gathered here and built into the index at once when it ends.
    loading: bool,
    staged: Vec<(Ms, u32)>,
    /// Deposits loaded whose identity entry a helper thread inserts:
    /// `(hash, slot)` ([`Index::take_identity_work`]).
    id_pending: Vec<(u64, u32)>,
}

const FINGERS: usize = 4096;
const K_DEP: u8 = 0;
const K_QUEUE: u8 = 1;
const K_DEPART: u8 = 2;
const K_SPILL: u8 = 3;

impl Index {
    /// An empty index.
    pub(crate) fn new() -> Index {
        Index {
            deps: Slab::new(),
            queues: Slab::new(),
            departs: Slab::new(),
            spill: Slab::new(),
            by_rkid: Table::new(),
            by_id: Table::new(),
            depart_by_id: Table::new(),
            due: BTreeMap::new(),
            due_len: 0,
            spill_index: HashMap::new(),
            removed_flagged: HashMap::new(),
            quarantine: BTreeMap::new(),
            occupancy: Occupancy::default(),
            segs: HashMap::new(),
            fingers: (0..FINGERS).map(|_| AtomicU64::new(u64::MAX)).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            committed: 0,
            open: Vec::new(),
            occupancy_saved: false,
            deferred: Vec::new(),
            history: std::collections::VecDeque::new(),
            loading: false,
            staged: Vec::new(),
            id_pending: Vec::new(),
        }
    }

    /// The identity entries loaded deposits still need.
    pub(crate) fn take_identity_work(&mut self) -> Vec<(u64, u32)> {
        std::mem::take(&mut self.id_pending)
    }

    /// Builds an identity hash from `(hash, slot)` pairs, apart from the
    /// index (a helper thread of a load); [`Index::install_identity`]
    /// puts it in.
    pub(crate) fn identity_builder(expected: usize) -> IdentityBuilder {
        let mut table = Table::new();
        table.reserve(expected, |_| 0);
        IdentityBuilder {
            table,
            hashes: Vec::new(),
        }
    }

    /// Installs a built identity hash (the index's own must be empty).
    pub(crate) fn install_identity(&mut self, builder: IdentityBuilder) {
        self.by_id = builder.table;
    }

    /// Pre-sizes the hash indexes (a restart knows its sizes).
    pub(crate) fn reserve(&mut self, queues: usize, deposits: usize, departures: usize) {
        let (h, qs, ds, ps) = (&self.hasher, &self.queues, &self.deps, &self.departs);
        self.by_rkid
            .reserve(queues, |&s| h.hash_one(qs.get(s).rkid));
        self.by_id.reserve(deposits, |&s| {
            let d = ds.get(s);
            h.hash_one((d.qid, d.id))
        });
        self.depart_by_id.reserve(departures, |&s| {
            let d = ps.get(s);
            h.hash_one((d.qid, d.id))
        });
    }

    /// Bytes the index holds on the heap (records and hashes; an estimate
    /// for the operator, exact for the slabs).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.deps.heap_bytes()
            + self.queues.heap_bytes()
            + self.departs.heap_bytes()
            + self.by_rkid.heap_bytes()
            + self.by_id.heap_bytes()
            + self.depart_by_id.heap_bytes()
            + self.due.values().map(Bucket::heap_bytes).sum::<usize>()
    }

    fn hash_rkid(&self, rkid: &[u8; 32]) -> u64 {
        self.hasher.hash_one(rkid)
    }
    fn hash_qid(&self, qid: u32, id: &[u8; 32]) -> u64 {
        self.hasher.hash_one((qid, id))
    }

    pub(crate) fn occupancy_mut(&mut self) -> &mut Occupancy {
        if !self.occupancy_saved {
            self.occupancy_saved = true;
            self.undo_push(Undo::Occupancy(self.occupancy));
        }
        &mut self.occupancy
    }

    pub(crate) fn put_quarantine(&mut self, key: (Rkid, u64), value: Vec<u8>) {
        let before = self.quarantine.insert(key, value);
        self.undo_push(Undo::Quarantine { key, before });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rkid(n: u8) -> Rkid {
        Rkid::from_bytes([n; 32])
    }

    fn deposit(seq: u64, n: u8) -> Deposit {
        Deposit {
            seq,
            id: DepositId([n; 32]),
            len: 10,
            admitted_at: 1,
            give_up_at: 100 + seq,
        }
    }

    #[test]
    fn an_aborted_transaction_leaves_the_index_as_it_was() -> StoreResult<()> {
        let mut ix = Index::new();
        let a = rkid(1);
        for seq in 1..=3 {
            ix.add_deposit(&a, &deposit(seq, seq as u8), 1, 64)?;
            ix.schedule(100 + seq, &Due::GiveUp(a, seq))?;
        }
        ix.commit(false, None)?;
        ix.check()?;
        let before = (ix.occupancy, ix.due_upto(u64::MAX, 100));
        let q = ix.queue(&a).ok_or(StoreError::Closed)?;
        let two = ix.find_seq(q, 2).ok_or(StoreError::Closed)?;
        ix.remove_deposit(two)?;
        ix.unschedule(102, &Due::GiveUp(a, 2));
        ix.add_deposit(&a, &deposit(4, 4), 2, 64)?;
        ix.schedule(7, &Due::OrphanExpiry(rkid(9)))?;
        ix.put_departure(
            &a,
            &DepositId([2; 32]),
            &DepartureRecord {
                departure: crate::Departure::Concluded,
                forget_at: 5,
            },
        )?;
        ix.schedule(5, &Due::Forget(a, DepositId([2; 32])))?;
        ix.rollback();
        ix.check()?;
        assert_eq!((ix.occupancy, ix.due_upto(u64::MAX, 100)), before);
        let seqs: Vec<u64> = ix
            .list(q, None, 10)
            .iter()
            .map(|&s| ix.deps.get(s).seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert!(ix.queue(&rkid(9)).is_none());
        Ok(())
    }

    #[test]
    fn a_snapshot_sees_its_version_through_later_changes() -> StoreResult<()> {
        let mut ix = Index::new();
        let a = rkid(1);
        for seq in 1..=3 {
            ix.add_deposit(&a, &deposit(seq, seq as u8), 1, 64)?;
        }
        let v = ix.commit(false, None)?;
        let q = ix.queue(&a).ok_or(StoreError::Closed)?;
        let one = ix.find_seq(q, 1).ok_or(StoreError::Closed)?;
        ix.remove_deposit(one)?;
        ix.add_deposit(&a, &deposit(4, 4), 1, 64)?;
        // The open transaction is invisible to it …
        let seqs = |ix: &Index| -> Vec<u64> {
            ix.view(v)
                .deposits(&a, None, 10)
                .iter()
                .map(|d| d.deposit.seq)
                .collect()
        };
        assert_eq!(seqs(&ix), [1, 2, 3]);
        ix.commit(true, Some(v))?;
        // … and so is the committed one.
        assert_eq!(seqs(&ix), [1, 2, 3]);
        assert_eq!(ix.view(v).occupancy().deposits, 3);
        assert!(ix.view(v).deposit_by_id(&a, &DepositId([1; 32])).is_some());
        assert!(ix.view(v).deposit_by_id(&a, &DepositId([4; 32])).is_none());
        assert_eq!(ix.view(v + 1).deposits(&a, None, 10).len(), 3);
        ix.prune(None);
        assert_eq!(seqs(&ix), [2, 3, 4]);
        Ok(())
    }
}
