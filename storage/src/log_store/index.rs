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
pub(crate) const NIL: u32 = u32::MAX;
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Slots are referenced from the due index in 29 bits.
const REF_BITS: u32 = 29;
const REF_MASK: u32 = (1 << REF_BITS) - 1;
/// The most slots of one kind.
pub(crate) const MAX_SLOTS: u32 = REF_MASK;

const LIVE: u32 = 1 << 31;
const FLAG: u32 = 1 << 30;
const LEN_MASK: u32 = FLAG - 1;
const BOUND: u32 = 1 << 30;
const REFS_MASK: u32 = BOUND - 1;
const GIVEN_UP: u32 = 1;

/// A held deposit (80 B).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct DepRec {
    pub(crate) id: [u8; 32],
    pub(crate) seq: u64,
    pub(crate) admitted_at: u64,
    pub(crate) give_up_at: u64,
    pub(crate) seg: u32,
    pub(crate) off: u32,
    /// Length, [`LIVE`], and [`FLAG`]: its give-up entry at its own
    /// give-up instant is a reference to it in the due index.
    len: u32,
    pub(crate) qid: u32,
    prev: u32,
    next: u32,
}

/// A queue (52 B; a queue holds at most 4 GiB, and a carrier's
/// `max-queue-bytes` is at most 1 GiB).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
pub(crate) struct QueueRec {
    pub(crate) rkid: [u8; 32],
    /// The last `seq` handed out (0: none).
    pub(crate) next_seq: u64,
    bytes: u32,
    head: u32,
    /// [`LIVE`], [`BOUND`] (the rkid holds a binding: s1 reads this, never
    /// redb), and the references to it (due entries, departure records).
    meta: u32,
}

/// A departure record (48 B).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct DepartRec {
    pub(crate) id: [u8; 32],
    pub(crate) forget_at: u64,
    pub(crate) qid: u32,
    /// [`LIVE`], [`FLAG`] (its forget entry at its own instant is a
    /// reference to it), [`GIVEN_UP`].
    meta: u32,
}

/// A due entry that no record holds (rare: the engine schedules none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpillRec {
    due: Due,
    live: bool,
}

impl Default for SpillRec {
    fn default() -> Self {
        SpillRec {
            due: Due::OrphanExpiry(Rkid::from_bytes([0; 32])),
            live: false,
        }
    }
}

const _: () = assert!(size_of::<DepRec>() == 80);
const _: () = assert!(size_of::<QueueRec>() == 52);
const _: () = assert!(size_of::<DepartRec>() == 48);

pub(crate) trait Slot: Copy + Default {
    fn live(&self) -> bool;
}
impl Slot for DepRec {
    fn live(&self) -> bool {
        self.len & LIVE != 0
    }
}
impl Slot for QueueRec {
    fn live(&self) -> bool {
        self.meta & LIVE != 0
    }
}
impl Slot for DepartRec {
    fn live(&self) -> bool {
        self.meta & LIVE != 0
    }
}
impl Slot for SpillRec {
    fn live(&self) -> bool {
        self.live
    }
}

impl DepRec {
    pub(crate) fn len(&self) -> u32 {
        self.len & LEN_MASK
    }
    fn flagged(&self) -> bool {
        self.len & FLAG != 0
    }
    pub(crate) fn deposit(&self) -> Deposit {
        Deposit {
            seq: self.seq,
            id: DepositId(self.id),
            len: self.len(),
            admitted_at: self.admitted_at,
            give_up_at: self.give_up_at,
        }
    }
    pub(crate) fn image(&self) -> DepImage {
        DepImage {
            deposit: self.deposit(),
            seg: self.seg,
            off: self.off,
        }
    }
}

impl QueueRec {
    pub(crate) fn bound(&self) -> bool {
        self.meta & BOUND != 0
    }
    fn refs(&self) -> u32 {
        self.meta & REFS_MASK
    }
    pub(crate) fn rkid(&self) -> Rkid {
        Rkid::from_bytes(self.rkid)
    }
    /// Bytes the queue holds.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.bytes)
    }
    fn image(&self) -> QueueImage {
        QueueImage {
            next_seq: self.next_seq,
            bytes: self.bytes(),
        }
    }
}

impl DepartRec {
    pub(crate) fn record(&self) -> DepartureRecord {
        DepartureRecord {
            departure: if self.meta & GIVEN_UP != 0 {
                crate::Departure::GivenUp
            } else {
                crate::Departure::Concluded
            },
            forget_at: self.forget_at,
        }
    }
    fn flagged(&self) -> bool {
        self.meta & FLAG != 0
    }
}

/// The bytes queue `q` holds with a deposit of `len` more (a queue holds
/// at most 4 GiB).
fn fits_queue(q: &QueueRec, len: u32) -> StoreResult<u32> {
    q.bytes.checked_add(len).ok_or_else(|| {
        StoreError::Corrupt(format!("queue {} would hold more than 4 GiB", q.rkid()))
    })
}

/// A held deposit as a reader sees it: its metadata and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DepImage {
    pub(crate) deposit: Deposit,
    pub(crate) seg: u32,
    pub(crate) off: u32,
}

/// A queue's counters as a reader sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QueueImage {
    pub(crate) next_seq: u64,
    pub(crate) bytes: u64,
}

// ---------------------------------------------------------------------------
// Slabs and hash tables
// ---------------------------------------------------------------------------

/// Records in chunks of 4 096 (growing never copies), with a free list.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    chunks: Vec<Box<[T]>>,
    high: u32,
    free: Vec<u32>,
    live: u64,
}

impl<T: Slot> Slab<T> {
    fn new() -> Self {
        Slab {
            chunks: Vec::new(),
            high: 0,
            free: Vec::new(),
            live: 0,
        }
    }
    fn alloc(&mut self, value: T) -> StoreResult<u32> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                if self.high >= MAX_SLOTS {
                    return Err(StoreError::Corrupt(format!(
                        "the in-memory index holds {MAX_SLOTS} records of one kind, its limit"
                    )));
                }
                let slot = self.high;
                if slot as usize >= self.chunks.len() * CHUNK {
                    self.chunks
                        .push(vec![T::default(); CHUNK].into_boxed_slice());
                }
                self.high += 1;
                slot
            }
        };
        *self.get_mut(slot) = value;
        self.live += 1;
        Ok(slot)
    }
    /// Gives a slot back (its record must no longer be live).
    fn release(&mut self, slot: u32) {
        *self.get_mut(slot) = T::default();
        self.free.push(slot);
        self.live -= 1;
    }
    pub(crate) fn get(&self, slot: u32) -> &T {
        &self.chunks[(slot >> CHUNK_BITS) as usize][slot as usize & (CHUNK - 1)]
    }
    fn get_mut(&mut self, slot: u32) -> &mut T {
        &mut self.chunks[(slot >> CHUNK_BITS) as usize][slot as usize & (CHUNK - 1)]
    }
    /// Slots handed out so far (live or free): iterate `0..high()`.
    pub(crate) fn high(&self) -> u32 {
        self.high
    }
    /// The live record at `slot`, if any.
    pub(crate) fn live_at(&self, slot: u32) -> Option<&T> {
        (slot < self.high)
            .then(|| self.get(slot))
            .filter(|r| r.live())
    }
    /// Records allocated (live, or freed by the open transaction).
    pub(crate) fn count(&self) -> u64 {
        self.live
    }
    /// Bytes held (records, free list).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.len() * CHUNK * size_of::<T>() + self.free.capacity() * 4
    }
}

/// An identity hash built apart ([`Index::identity_builder`]).
pub(crate) struct IdentityBuilder {
    table: Table,
    /// Every slot's hash, for growing the table.
    hashes: Vec<u64>,
}

impl IdentityBuilder {
    pub(crate) fn add(&mut self, work: &[(u64, u32)]) {
        for &(hash, slot) in work {
            let at = slot as usize;
            if self.hashes.len() <= at {
                self.hashes.resize(at + 1, 0);
            }
            self.hashes[at] = hash;
            let hashes = &self.hashes;
            self.table.insert(hash, slot, |&s| hashes[s as usize]);
        }
    }
}

/// Hash indexes are split in shards, so that growing one rehashes a
/// 64th of its entries (a pause of well under a millisecond at 10⁶).
const SHARDS: usize = 64;

#[derive(Debug)]
struct Table {
    shards: Vec<HashTable<u32>>,
}

fn shard(hash: u64) -> usize {
    // Neither the low bits (the bucket) nor the top 7 (hashbrown's tag).
    (hash >> 40) as usize % SHARDS
}

impl Table {
    fn new() -> Table {
        Table {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }
    fn find(&self, hash: u64, eq: impl FnMut(&u32) -> bool) -> Option<u32> {
        self.shards[shard(hash)].find(hash, eq).copied()
    }
    fn insert(&mut self, hash: u64, slot: u32, rehash: impl Fn(&u32) -> u64) {
        self.shards[shard(hash)].insert_unique(hash, slot, rehash);
    }
    fn remove(&mut self, hash: u64, slot: u32) {
        if let Ok(entry) = self.shards[shard(hash)].find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
    }
    fn reserve(&mut self, total: usize, rehash: impl Fn(&u32) -> u64) {
        for table in &mut self.shards {
            table.reserve(total / SHARDS + 1, &rehash);
        }
    }
    fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }
    fn heap_bytes(&self) -> usize {
        self.shards.iter().map(|t| t.capacity() * 5).sum()
    }
}

// ---------------------------------------------------------------------------
// The due index's references
// ---------------------------------------------------------------------------

const GIVE_UP: u32 = 0;
const ORPHAN: u32 = 1;
const DEADLINE: u32 = 2;
const FORGET: u32 = 3;
const SPILL: u32 = 4;

fn mkref(kind: u32, slot: u32) -> u32 {
    (kind << REF_BITS) | slot
}
fn kind_of(r: u32) -> u32 {
    r >> REF_BITS
}
fn slot_of(r: u32) -> u32 {
    r & REF_MASK
}

/// The references due at one instant: a vector while small, a hash set
/// past [`BIG_BUCKET`] (a mass of entries at one instant stays O(1) each).
#[derive(Debug)]
enum Bucket {
    /// Up to [`INLINE`] references, without a heap allocation (most
    /// instants hold a few).
    Inline(u8, [u32; INLINE]),
    Small(Vec<u32>),
    Big(Box<HashTable<u32>>),
}

const INLINE: usize = 6;
const BIG_BUCKET: usize = 64;
const _: () = assert!(size_of::<Bucket>() == 32);

fn ref_hash(r: u32) -> u64 {
    u64::from(r)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(29)
}

impl Bucket {
    fn one(r: u32) -> Bucket {
        Bucket::Inline(1, [r, 0, 0, 0, 0, 0])
    }
    fn contains(&self, r: u32) -> bool {
        match self {
            Bucket::Inline(n, a) => a[..usize::from(*n)].contains(&r),
            Bucket::Small(v) => v.contains(&r),
            Bucket::Big(t) => t.find(ref_hash(r), |&x| x == r).is_some(),
        }
    }
    fn push(&mut self, r: u32) {
        match self {
            Bucket::Inline(n, a) if usize::from(*n) < INLINE => {
                a[usize::from(*n)] = r;
                *n += 1;
            }
            Bucket::Inline(n, a) => {
                let mut v = a[..usize::from(*n)].to_vec();
                v.push(r);
                *self = Bucket::Small(v);
            }
            Bucket::Small(v) if v.len() < BIG_BUCKET => v.push(r),
            Bucket::Small(v) => {
                let mut t = HashTable::with_capacity(v.len() * 2);
                for &x in v.iter().chain(std::iter::once(&r)) {
                    t.insert_unique(ref_hash(x), x, |&y| ref_hash(y));
                }
                *self = Bucket::Big(Box::new(t));
            }
            Bucket::Big(t) => {
                t.insert_unique(ref_hash(r), r, |&y| ref_hash(y));
            }
        }
    }
    fn remove(&mut self, r: u32) -> bool {
        match self {
            Bucket::Inline(n, a) => match a[..usize::from(*n)].iter().position(|&x| x == r) {
                Some(i) => {
                    *n -= 1;
                    a[i] = a[usize::from(*n)];
                    true
                }
                None => false,
            },
            Bucket::Small(v) => match v.iter().position(|&x| x == r) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            Bucket::Big(t) => match t.find_entry(ref_hash(r), |&x| x == r) {
                Ok(entry) => {
                    entry.remove();
                    true
                }
                Err(_) => false,
            },
        }
    }
    fn len(&self) -> usize {
        match self {
            Bucket::Inline(n, _) => usize::from(*n),
            Bucket::Small(v) => v.len(),
            Bucket::Big(t) => t.len(),
        }
    }
    fn refs(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Bucket::Inline(n, a) => Box::new(a[..usize::from(*n)].iter().copied()),
            Bucket::Small(v) => Box::new(v.iter().copied()),
            Bucket::Big(t) => Box::new(t.iter().copied()),
        }
    }
    /// Bytes, with its share of the tree's node (about 1.5 × key and value).
    fn heap_bytes(&self) -> usize {
        48 + match self {
            Bucket::Inline(..) => 0,
            Bucket::Small(v) => v.capacity() * 4,
            Bucket::Big(t) => t.capacity() * 5,
        }
    }
}

/// A due entry no record carries, with its queue's slot when it has one.
pub(crate) type LooseDue = (Ms, Due, Option<u32>);

/// Per-segment live deposits (compaction and reclamation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegStat {
    pub(crate) live: u64,
    pub(crate) bytes: u64,
}

// ---------------------------------------------------------------------------
// Undo and history
// ---------------------------------------------------------------------------

/// How to take one mutation back (module docs).
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    DepAdded(u32),
    DepRemoved(u32),
    DepMoved {
        slot: u32,
        seg: u32,
        off: u32,
    },
    QueueCreated(u32),
    QueueFreed(u32),
    QueueFields {
        qid: u32,
        next_seq: u64,
        bytes: u32,
        meta: u32,
    },
    DueAdded {
        at: Ms,
        r: u32,
    },
    DueRemoved {
        at: Ms,
        r: u32,
    },
    DepartAdded(u32),
    DepartRemoved(u32),
    DepartChanged {
        slot: u32,
        before: DepartRec,
    },
    Occupancy(Occupancy),
    Quarantine {
        key: (Rkid, u64),
        before: Option<Vec<u8>>,
    },
}

/// What a key held before a transaction changed it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Dep(Rkid, u64),
    Queue(Rkid),
    Depart(Rkid, DepositId),
    Due(Ms, Due),
    Quarantine(Rkid, u64),
    Occupancy,
}

/// A before-image (see [`Key`]).
#[derive(Debug, Clone)]
pub(crate) enum Before {
    Dep(Option<DepImage>),
    Queue(QueueImage),
    Depart(Option<DepartureRecord>),
    Due(bool),
    Quarantine(Option<Vec<u8>>),
    Occupancy(Occupancy),
}

/// The before-images of one committed transaction, first per key.
pub(crate) type History = BTreeMap<Key, Before>;

// ---------------------------------------------------------------------------
// The index
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

    fn undo_push(&mut self, undo: Undo) {
        if !self.loading {
            self.open.push(undo);
        }
    }

    // -- bulk loading (a snapshot: no undo, no lookup its format makes needless)

    /// Begins or ends a bulk load (the due entries gathered meanwhile are
    /// sorted and built into the index at once: no tree rebalancing).
    pub(crate) fn set_loading(&mut self, loading: bool) {
        self.loading = loading;
        if loading {
            return;
        }
        let mut staged = std::mem::take(&mut self.staged);
        staged.sort_unstable_by_key(|e| e.0);
        let mut buckets: Vec<(Ms, Bucket)> = Vec::new();
        for (at, r) in staged {
            match buckets.last_mut() {
                Some((a, b)) if *a == at => b.push(r),
                _ => buckets.push((at, Bucket::one(r))),
            }
        }
        for (at, bucket) in std::mem::take(&mut self.due) {
            for r in bucket.refs() {
                buckets.push((at, Bucket::one(r)));
            }
        }
        buckets.sort_by_key(|b| b.0);
        let mut merged: Vec<(Ms, Bucket)> = Vec::with_capacity(buckets.len());
        for (at, bucket) in buckets {
            match merged.last_mut() {
                Some((a, b)) if *a == at => bucket.refs().for_each(|r| b.push(r)),
                _ => merged.push((at, bucket)),
            }
        }
        self.due = merged.into_iter().collect();
    }

    /// The queue a snapshot's entry names by its slot there (`hint`),
    /// if that slot of `map` holds this rkid; else found by its rkid.
    pub(crate) fn hinted_queue(&mut self, rkid: &Rkid, hint: Option<u32>) -> StoreResult<u32> {
        if let Some(qid) = hint
            && self
                .queues
                .live_at(qid)
                .is_some_and(|q| q.rkid == *rkid.as_bytes())
        {
            return Ok(qid);
        }
        self.queue_or_create(rkid)
    }

    /// A queue of a snapshot: created (or found, when a long queue's copy
    /// was continued), its last seq and its binding set.
    pub(crate) fn load_queue(
        &mut self,
        rkid: &Rkid,
        next_seq: u64,
        bound: bool,
    ) -> StoreResult<u32> {
        let qid = self.queue_or_create(rkid)?;
        let q = self.queues.get_mut(qid);
        q.next_seq = q.next_seq.max(next_seq);
        if bound {
            q.meta |= BOUND;
        } else {
            q.meta &= !BOUND;
        }
        Ok(qid)
    }

    /// A deposit of a snapshot, of queue `qid` (`flagged`: its give-up
    /// entry at its own instant).
    pub(crate) fn load_deposit(
        &mut self,
        qid: u32,
        deposit: &Deposit,
        seg: u32,
        off: u32,
        flagged: bool,
    ) -> StoreResult<()> {
        if deposit.len > LEN_MASK {
            return Err(StoreError::Corrupt(format!(
                "a deposit of {} bytes (the index holds at most {LEN_MASK})",
                deposit.len
            )));
        }
        let bytes = fits_queue(self.queues.get(qid), deposit.len)?;
        let slot = self.deps.alloc(DepRec {
            id: deposit.id.0,
            seq: deposit.seq,
            admitted_at: deposit.admitted_at,
            give_up_at: deposit.give_up_at,
            seg,
            off,
            len: deposit.len | LIVE | if flagged { FLAG } else { 0 },
            qid,
            prev: NIL,
            next: NIL,
        })?;
        self.link(qid, slot);
        let hash = self.hash_qid(qid, &deposit.id.0);
        self.id_pending.push((hash, slot));
        self.seg_adjust(seg, deposit.len, true);
        let q = self.queues.get_mut(qid);
        q.bytes = bytes;
        q.next_seq = q.next_seq.max(deposit.seq);
        self.occupancy.deposit_added(deposit.len);
        self.set_finger(qid, slot);
        if flagged {
            self.due_push(deposit.give_up_at, mkref(GIVE_UP, slot));
        }
        Ok(())
    }

    /// A departure of a snapshot (`flagged`: its forget entry at its own
    /// instant).
    pub(crate) fn load_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
        flagged: bool,
    ) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        let mut meta = LIVE
            | match record.departure {
                crate::Departure::GivenUp => GIVEN_UP,
                crate::Departure::Concluded => 0,
            };
        if flagged {
            meta |= FLAG;
        }
        let slot = self.departs.alloc(DepartRec {
            id: id.0,
            forget_at: record.forget_at,
            qid,
            meta,
        })?;
        let (h, ps) = (&self.hasher, &self.departs);
        self.depart_by_id
            .insert(h.hash_one((qid, id.0)), slot, |&s| {
                let d = ps.get(s);
                h.hash_one((d.qid, d.id))
            });
        let q = self.queues.get_mut(qid);
        q.meta = (q.meta & !REFS_MASK) | ((q.refs() + 1) & REFS_MASK);
        if flagged {
            self.due_push(record.forget_at, mkref(FORGET, slot));
        }
        Ok(())
    }

    /// A due entry of a snapshot that no record carries: an orphan expiry
    /// or deadline straight in (each is copied once), anything else the
    /// general way (it may repeat a record's).
    pub(crate) fn load_due(&mut self, at: Ms, due: &Due, hint: Option<u32>) -> StoreResult<()> {
        let kind = match due {
            Due::OrphanExpiry(_) => ORPHAN,
            Due::Deadline(_) => DEADLINE,
            _ => return self.schedule(at, due),
        };
        let (Due::OrphanExpiry(rkid) | Due::Deadline(rkid)) = due else {
            return self.schedule(at, due);
        };
        let qid = self.hinted_queue(rkid, hint)?;
        let q = self.queues.get_mut(qid);
        q.meta = (q.meta & !REFS_MASK) | ((q.refs() + 1) & REFS_MASK);
        self.due_push(at, mkref(kind, qid));
        Ok(())
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

    // -- queues ------------------------------------------------------------

    /// The queue of `rkid`, if it has a record.
    pub(crate) fn queue(&self, rkid: &Rkid) -> Option<u32> {
        let key = rkid.as_bytes();
        self.by_rkid
            .find(self.hash_rkid(key), |&s| self.queues.get(s).rkid == *key)
    }

    /// When the oldest held deposit was admitted: the earliest head of any
    /// queue (a queue is in admission order). O(queues).
    pub(crate) fn oldest_admitted_at(&self) -> Option<u64> {
        (0..self.queues.high())
            .filter_map(|qid| self.queues.live_at(qid))
            .filter(|q| q.head != NIL)
            .filter_map(|q| self.deps.live_at(q.head))
            .map(|d| d.admitted_at)
            .min()
    }

    pub(crate) fn queue_rec(&self, qid: u32) -> &QueueRec {
        self.queues.get(qid)
    }

    /// The queue of `rkid`, created if it has none.
    fn queue_or_create(&mut self, rkid: &Rkid) -> StoreResult<u32> {
        if let Some(qid) = self.queue(rkid) {
            return Ok(qid);
        }
        let qid = self.queues.alloc(QueueRec {
            rkid: *rkid.as_bytes(),
            head: NIL,
            meta: LIVE,
            ..QueueRec::default()
        })?;
        let (h, qs) = (&self.hasher, &self.queues);
        self.by_rkid.insert(h.hash_one(rkid.as_bytes()), qid, |&s| {
            h.hash_one(qs.get(s).rkid)
        });
        self.undo_push(Undo::QueueCreated(qid));
        Ok(qid)
    }

    /// Changes a queue's counters, saving their before-image.
    fn queue_update(&mut self, qid: u32, f: impl FnOnce(&mut QueueRec)) {
        let q = *self.queues.get(qid);
        self.undo_push(Undo::QueueFields {
            qid,
            next_seq: q.next_seq,
            bytes: q.bytes,
            meta: q.meta,
        });
        f(self.queues.get_mut(qid));
    }

    /// Frees a queue that holds nothing and was never numbered.
    fn maybe_free_queue(&mut self, qid: u32) {
        let q = *self.queues.get(qid);
        if q.live() && !q.bound() && q.head == NIL && q.next_seq == 0 && q.refs() == 0 {
            let hash = self.hash_rkid(&q.rkid);
            self.by_rkid.remove(hash, qid);
            self.queues.get_mut(qid).meta &= !LIVE;
            self.deferred.push((K_QUEUE, qid));
            self.undo_push(Undo::QueueFreed(qid));
        }
    }

    fn add_refs(&mut self, qid: u32, delta: i32) {
        self.queue_update(qid, |q| {
            let refs = q.refs().saturating_add_signed(delta);
            q.meta = (q.meta & !REFS_MASK) | (refs & REFS_MASK);
        });
    }

    /// Whether `rkid` holds a binding (the projection of redb's table).
    pub(crate) fn bound(&self, rkid: &Rkid) -> bool {
        self.queue(rkid).is_some_and(|q| self.queues.get(q).bound())
    }

    /// Records that `rkid` holds a binding, or no longer does.
    pub(crate) fn set_bound(&mut self, rkid: &Rkid, bound: bool) -> StoreResult<()> {
        if self.bound(rkid) == bound {
            return Ok(());
        }
        let qid = self.queue_or_create(rkid)?;
        self.queue_update(qid, |q| {
            if bound {
                q.meta |= BOUND;
            } else {
                q.meta &= !BOUND;
            }
        });
        self.maybe_free_queue(qid);
        Ok(())
    }

    /// Raises a queue's last `seq` to at least `seq`.
    pub(crate) fn raise_next_seq(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        if self.queues.get(qid).next_seq < seq {
            self.queue_update(qid, |q| q.next_seq = seq);
        }
        self.maybe_free_queue(qid);
        Ok(())
    }

    // -- occupancy -----------------------------------------------------------

    pub(crate) fn occupancy_mut(&mut self) -> &mut Occupancy {
        if !self.occupancy_saved {
            self.occupancy_saved = true;
            self.undo_push(Undo::Occupancy(self.occupancy));
        }
        &mut self.occupancy
    }

    // -- deposits ------------------------------------------------------------

    fn finger(&self, qid: u32) -> Option<u32> {
        let f = self.fingers[qid as usize % FINGERS].load(Ordering::Relaxed);
        let (fq, slot) = ((f >> 32) as u32, f as u32);
        (fq == qid)
            .then_some(slot)
            .filter(|&s| self.deps.live_at(s).is_some_and(|d| d.qid == qid))
    }
    fn set_finger(&self, qid: u32, slot: u32) {
        self.fingers[qid as usize % FINGERS]
            .store((u64::from(qid) << 32) | u64::from(slot), Ordering::Relaxed);
    }

    /// The first deposit of queue `qid` with `seq > after` (`None`: from
    /// the head), found from the finger.
    pub(crate) fn first_after(&self, qid: u32, after: Option<u64>) -> u32 {
        let head = self.queues.get(qid).head;
        let Some(after) = after else { return head };
        if head == NIL {
            return NIL;
        }
        let tail = self.deps.get(head).prev;
        if self.deps.get(tail).seq <= after {
            return NIL;
        }
        let mut at = self.finger(qid).unwrap_or(head);
        if self.deps.get(at).seq > after {
            // Walk back to the first one above `after`.
            while at != head {
                let prev = self.deps.get(at).prev;
                if self.deps.get(prev).seq <= after {
                    break;
                }
                at = prev;
            }
        } else {
            while self.deps.get(at).seq <= after {
                at = self.deps.get(at).next;
            }
        }
        self.set_finger(qid, at);
        at
    }

    /// The next deposit after `slot` in its queue (`NIL` at the tail).
    pub(crate) fn next_in_queue(&self, slot: u32) -> u32 {
        let d = self.deps.get(slot);
        let next = d.next;
        if next == self.queues.get(d.qid).head {
            NIL
        } else {
            next
        }
    }

    /// The held deposit `seq` of queue `qid`.
    pub(crate) fn find_seq(&self, qid: u32, seq: u64) -> Option<u32> {
        let at = self.first_after(qid, seq.checked_sub(1));
        (at != NIL && self.deps.get(at).seq == seq).then_some(at)
    }

    /// The held deposit of queue `qid` with this id.
    pub(crate) fn find_id(&self, qid: u32, id: &[u8; 32]) -> Option<u32> {
        let found = self.by_id.find(self.hash_qid(qid, id), |&s| {
            let d = self.deps.get(s);
            d.qid == qid && d.id == *id
        });
        if let Some(slot) = found {
            self.set_finger(qid, slot);
        }
        found
    }

    /// Up to `limit` deposits of `qid` after `after`, in order.
    pub(crate) fn list(&self, qid: u32, after: Option<u64>, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        let mut at = self.first_after(qid, after);
        while at != NIL && out.len() < limit {
            out.push(at);
            at = self.next_in_queue(at);
        }
        if let Some(&last) = out.last() {
            self.set_finger(qid, last);
        }
        out
    }

    fn seg_adjust(&mut self, seg: u32, len: u32, add: bool) {
        let stat = self.segs.entry(seg).or_default();
        if add {
            stat.live += 1;
            stat.bytes += u64::from(len);
        } else {
            stat.live = stat.live.saturating_sub(1);
            stat.bytes = stat.bytes.saturating_sub(u64::from(len));
        }
    }

    /// Links `slot` into its queue in `seq` order (at the tail, unless a
    /// replay re-inserts an older one).
    fn link(&mut self, qid: u32, slot: u32) {
        let seq = self.deps.get(slot).seq;
        let head = self.queues.get(qid).head;
        if head == NIL {
            let d = self.deps.get_mut(slot);
            d.prev = slot;
            d.next = slot;
            self.queues.get_mut(qid).head = slot;
            return;
        }
        // The first deposit above `seq` (NIL: goes last).
        let before = self.first_after(qid, Some(seq));
        let next = if before == NIL { head } else { before };
        let prev = self.deps.get(next).prev;
        {
            let d = self.deps.get_mut(slot);
            d.prev = prev;
            d.next = next;
        }
        self.deps.get_mut(prev).next = slot;
        self.deps.get_mut(next).prev = slot;
        if before == head {
            self.queues.get_mut(qid).head = slot;
        }
    }

    fn unlink(&mut self, slot: u32) {
        let d = *self.deps.get(slot);
        let q = self.queues.get_mut(d.qid);
        if d.next == slot {
            q.head = NIL;
        } else {
            if q.head == slot {
                q.head = d.next;
            }
            self.deps.get_mut(d.prev).next = d.next;
            self.deps.get_mut(d.next).prev = d.prev;
        }
    }

    fn hash_dep(&mut self, slot: u32) {
        let d = *self.deps.get(slot);
        let (h, ds) = (&self.hasher, &self.deps);
        self.by_id.insert(h.hash_one((d.qid, d.id)), slot, |&s| {
            let d = ds.get(s);
            h.hash_one((d.qid, d.id))
        });
    }

    /// Adds a held deposit (its `seq` is new to the queue); returns its slot.
    pub(crate) fn add_deposit(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        seg: u32,
        off: u32,
    ) -> StoreResult<u32> {
        if deposit.len > LEN_MASK {
            return Err(StoreError::Corrupt(format!(
                "a deposit of {} bytes (the index holds at most {LEN_MASK})",
                deposit.len
            )));
        }
        let qid = self.queue_or_create(rkid)?;
        let bytes = fits_queue(self.queues.get(qid), deposit.len)?;
        let slot = self.deps.alloc(DepRec {
            id: deposit.id.0,
            seq: deposit.seq,
            admitted_at: deposit.admitted_at,
            give_up_at: deposit.give_up_at,
            seg,
            off,
            len: deposit.len | LIVE,
            qid,
            prev: NIL,
            next: NIL,
        })?;
        self.link(qid, slot);
        self.hash_dep(slot);
        self.seg_adjust(seg, deposit.len, true);
        self.queue_update(qid, |q| {
            q.bytes = bytes;
            q.next_seq = q.next_seq.max(deposit.seq);
        });
        self.occupancy_mut().deposit_added(deposit.len);
        self.undo_push(Undo::DepAdded(slot));
        self.set_finger(qid, slot);
        Ok(slot)
    }

    /// Removes held deposit `slot` (its give-up entry, if it is one, stays:
    /// the due index is the engine's to change; it becomes a spilled entry
    /// at commit unless unscheduled before).
    pub(crate) fn remove_deposit(&mut self, slot: u32) -> StoreResult<Deposit> {
        let d = *self.deps.get(slot);
        if d.flagged() {
            self.removed_flagged.insert((d.qid, d.seq), slot);
        }
        self.unlink(slot);
        let hash = self.hash_qid(d.qid, &d.id);
        self.by_id.remove(hash, slot);
        self.seg_adjust(d.seg, d.len(), false);
        self.queue_update(d.qid, |q| q.bytes = q.bytes.saturating_sub(d.len()));
        self.occupancy_mut().deposit_removed(d.len());
        self.deps.get_mut(slot).len &= !LIVE;
        self.deferred.push((K_DEP, slot));
        self.undo_push(Undo::DepRemoved(slot));
        self.maybe_free_queue(d.qid);
        Ok(d.deposit())
    }

    /// Points held deposit `slot` at a copy of its bytes.
    pub(crate) fn move_deposit(&mut self, slot: u32, seg: u32, off: u32) {
        let d = *self.deps.get(slot);
        self.seg_adjust(d.seg, d.len(), false);
        self.seg_adjust(seg, d.len(), true);
        let r = self.deps.get_mut(slot);
        r.seg = seg;
        r.off = off;
        self.undo_push(Undo::DepMoved {
            slot,
            seg: d.seg,
            off: d.off,
        });
    }

    // -- departures ------------------------------------------------------------

    pub(crate) fn find_departure(&self, qid: u32, id: &[u8; 32]) -> Option<u32> {
        self.depart_by_id.find(self.hash_qid(qid, id), |&s| {
            let d = self.departs.get(s);
            d.qid == qid && d.id == *id
        })
    }

    /// Turns the compact forget entry of departure `slot` into a spilled
    /// one (before its record changes or goes).
    fn unflag_departure(&mut self, slot: u32) -> StoreResult<()> {
        let d = *self.departs.get(slot);
        if d.flagged() {
            let rkid = self.queues.get(d.qid).rkid();
            self.due_remove_ref(d.forget_at, mkref(FORGET, slot));
            self.due_add_spill(d.forget_at, Due::Forget(rkid, DepositId(d.id)))?;
        }
        Ok(())
    }

    pub(crate) fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        let meta = LIVE
            | match record.departure {
                crate::Departure::GivenUp => GIVEN_UP,
                crate::Departure::Concluded => 0,
            };
        if let Some(slot) = self.find_departure(qid, &id.0) {
            self.unflag_departure(slot)?;
            let before = *self.departs.get(slot);
            let r = self.departs.get_mut(slot);
            r.forget_at = record.forget_at;
            r.meta = meta;
            self.undo_push(Undo::DepartChanged { slot, before });
            return Ok(());
        }
        let slot = self.departs.alloc(DepartRec {
            id: id.0,
            forget_at: record.forget_at,
            qid,
            meta,
        })?;
        let (h, ps) = (&self.hasher, &self.departs);
        self.depart_by_id
            .insert(h.hash_one((qid, id.0)), slot, |&s| {
                let d = ps.get(s);
                h.hash_one((d.qid, d.id))
            });
        self.undo_push(Undo::DepartAdded(slot));
        self.add_refs(qid, 1);
        Ok(())
    }

    pub(crate) fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        let Some(qid) = self.queue(rkid) else {
            return Ok(());
        };
        let Some(slot) = self.find_departure(qid, &id.0) else {
            return Ok(());
        };
        self.unflag_departure(slot)?;
        let hash = self.hash_qid(qid, &id.0);
        self.depart_by_id.remove(hash, slot);
        self.departs.get_mut(slot).meta &= !LIVE;
        self.deferred.push((K_DEPART, slot));
        self.undo_push(Undo::DepartRemoved(slot));
        self.add_refs(qid, -1);
        self.maybe_free_queue(qid);
        Ok(())
    }

    pub(crate) fn departure(&self, rkid: &Rkid, id: &DepositId) -> Option<DepartureRecord> {
        let qid = self.queue(rkid)?;
        self.find_departure(qid, &id.0)
            .map(|s| self.departs.get(s).record())
    }

    // -- the due index ---------------------------------------------------------

    /// The entry a reference stands for.
    fn due_of(&self, r: u32) -> Due {
        let slot = slot_of(r);
        match kind_of(r) {
            GIVE_UP => {
                let d = self.deps.get(slot);
                Due::GiveUp(self.queues.get(d.qid).rkid(), d.seq)
            }
            ORPHAN => Due::OrphanExpiry(self.queues.get(slot).rkid()),
            DEADLINE => Due::Deadline(self.queues.get(slot).rkid()),
            FORGET => {
                let d = self.departs.get(slot);
                Due::Forget(self.queues.get(d.qid).rkid(), DepositId(d.id))
            }
            _ => self.spill.get(slot).due,
        }
    }

    /// The compact reference `(at, due)` would have, if a record can hold it.
    fn compact_ref(&self, at: Ms, due: &Due) -> Option<u32> {
        match *due {
            Due::GiveUp(rkid, seq) => self
                .queue(&rkid)
                .and_then(|q| {
                    self.find_seq(q, seq)
                        .or_else(|| self.removed_flagged.get(&(q, seq)).copied())
                })
                .filter(|&s| self.deps.get(s).give_up_at == at)
                .map(|s| mkref(GIVE_UP, s)),
            Due::Forget(rkid, id) => self
                .queue(&rkid)
                .and_then(|q| self.find_departure(q, &id.0))
                .filter(|&s| self.departs.get(s).forget_at == at)
                .map(|s| mkref(FORGET, s)),
            Due::OrphanExpiry(rkid) => self.queue(&rkid).map(|q| mkref(ORPHAN, q)),
            Due::Deadline(rkid) => self.queue(&rkid).map(|q| mkref(DEADLINE, q)),
        }
    }

    /// The reference `(at, due)` is held by: its compact one, or a spilled
    /// entry equal to it.
    fn due_find(&self, at: Ms, due: &Due, compact: Option<u32>) -> Option<u32> {
        let bucket = self.due.get(&at)?;
        if let Some(r) = compact.filter(|&r| bucket.contains(r)) {
            return Some(r);
        }
        self.spill_index
            .get(&(at, *due))
            .map(|&slot| mkref(SPILL, slot))
    }

    fn due_push(&mut self, at: Ms, r: u32) {
        self.due_len += 1;
        if kind_of(r) == SPILL {
            let slot = slot_of(r);
            self.spill_index
                .insert((at, self.spill.get(slot).due), slot);
        }
        if self.loading {
            self.staged.push((at, r));
            return;
        }
        match self.due.entry(at) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Bucket::one(r));
            }
            std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().push(r),
        }
    }

    /// Takes reference `r` out of the bucket of `at` (nothing else).
    fn due_take(&mut self, at: Ms, r: u32) {
        if let Some(bucket) = self.due.get_mut(&at)
            && bucket.remove(r)
        {
            if bucket.len() == 0 {
                self.due.remove(&at);
            }
            self.due_len -= 1;
            if kind_of(r) == SPILL {
                let due = self.spill.get(slot_of(r)).due;
                self.spill_index.remove(&(at, due));
            }
        }
    }

    /// Drops reference `r` from the bucket of `at`, undoing what it stood
    /// for (the record's flag, the queue's reference count).
    fn due_remove_ref(&mut self, at: Ms, r: u32) {
        self.due_take(at, r);
        let slot = slot_of(r);
        match kind_of(r) {
            GIVE_UP => {
                let d = self.deps.get_mut(slot);
                d.len &= !FLAG;
                let key = (d.qid, d.seq);
                self.removed_flagged.remove(&key);
            }
            FORGET => self.departs.get_mut(slot).meta &= !FLAG,
            ORPHAN | DEADLINE => {
                self.add_refs(slot, -1);
            }
            _ => {
                self.spill.get_mut(slot).live = false;
                self.deferred.push((K_SPILL, slot));
            }
        }
        self.undo_push(Undo::DueRemoved { at, r });
        if matches!(kind_of(r), ORPHAN | DEADLINE) {
            self.maybe_free_queue(slot);
        }
    }

    fn due_add_spill(&mut self, at: Ms, due: Due) -> StoreResult<()> {
        let slot = self.spill.alloc(SpillRec { due, live: true })?;
        let r = mkref(SPILL, slot);
        self.due_push(at, r);
        self.undo_push(Undo::DueAdded { at, r });
        Ok(())
    }

    /// Adds `(at, due)` (a set: adding it twice is one entry).
    pub(crate) fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let compact = self.compact_ref(at, due);
        let held = compact.is_some_and(|r| match kind_of(r) {
            GIVE_UP => self.deps.get(slot_of(r)).flagged(),
            FORGET => self.departs.get(slot_of(r)).flagged(),
            _ => false,
        });
        if held || self.due_find(at, due, compact).is_some() {
            return Ok(());
        }
        let r = match *due {
            Due::GiveUp(..) | Due::Forget(..) => compact,
            Due::OrphanExpiry(rkid) | Due::Deadline(rkid) => {
                let qid = self.queue_or_create(&rkid)?;
                let kind = if matches!(due, Due::Deadline(_)) {
                    DEADLINE
                } else {
                    ORPHAN
                };
                Some(mkref(kind, qid))
            }
        };
        let Some(r) = r else {
            return self.due_add_spill(at, *due);
        };
        match kind_of(r) {
            GIVE_UP => self.deps.get_mut(slot_of(r)).len |= FLAG,
            FORGET => self.departs.get_mut(slot_of(r)).meta |= FLAG,
            _ => self.add_refs(slot_of(r), 1),
        }
        self.due_push(at, r);
        self.undo_push(Undo::DueAdded { at, r });
        Ok(())
    }

    /// Removes `(at, due)` if present.
    pub(crate) fn unschedule(&mut self, at: Ms, due: &Due) {
        let compact = self.compact_ref(at, due);
        if let Some(r) = self.due_find(at, due, compact) {
            self.due_remove_ref(at, r);
        }
    }

    /// Whether deposit `slot`'s give-up entry is its compact reference.
    pub(crate) fn give_up_flagged(&self, slot: u32) -> bool {
        self.deps.get(slot).flagged()
    }

    /// Whether departure `slot`'s forget entry is its compact reference.
    pub(crate) fn forget_flagged(&self, slot: u32) -> bool {
        self.departs.get(slot).flagged()
    }

    /// Due entries with instant ≤ `upto`, earliest first (ties in the
    /// order of [`Due`]), at most `limit` — whole instants at a time, so
    /// the caller may need to cut.
    pub(crate) fn due_upto(&self, upto: Ms, limit: usize) -> Vec<(Ms, Due)> {
        let mut out = Vec::new();
        for (&at, bucket) in self.due.range(..=upto) {
            if out.len() >= limit {
                break;
            }
            let start = out.len();
            out.extend(bucket.refs().map(|r| {
                if kind_of(r) == GIVE_UP {
                    self.set_finger(self.deps.get(slot_of(r)).qid, slot_of(r));
                }
                (at, self.due_of(r))
            }));
            out[start..].sort_unstable();
        }
        out
    }

    pub(crate) fn next_due(&self) -> Option<Ms> {
        self.due.keys().next().copied()
    }

    /// The due entries from instant `from` on that no deposit or departure
    /// record carries (those travel with their record in a snapshot), at
    /// most about `limit` (whole instants): `(entries, next instant)`.
    /// … with, for an orphan expiry or deadline, the slot of its queue (a
    /// hint for the loader).
    pub(crate) fn due_loose_chunk(&self, from: Ms, limit: usize) -> (Vec<LooseDue>, Option<Ms>) {
        let mut out = Vec::new();
        let mut seen = 0usize;
        for (&at, bucket) in self.due.range(from..) {
            if seen >= limit {
                return (out, Some(at));
            }
            seen += bucket.len();
            out.extend(
                bucket
                    .refs()
                    .filter(|&r| !matches!(kind_of(r), GIVE_UP | FORGET))
                    .map(|r| {
                        let hint = matches!(kind_of(r), ORPHAN | DEADLINE).then(|| slot_of(r));
                        (at, self.due_of(r), hint)
                    }),
            );
        }
        (out, None)
    }

    // -- quarantine ------------------------------------------------------------

    pub(crate) fn put_quarantine(&mut self, key: (Rkid, u64), value: Vec<u8>) {
        let before = self.quarantine.insert(key, value);
        self.undo_push(Undo::Quarantine { key, before });
    }

    // -- transactions ------------------------------------------------------------

    /// Commits the open transaction as version `committed + 1`; keeps its
    /// before-images if a snapshot older than it lives (`keep`), and drops
    /// history no live snapshot needs (`oldest`: the oldest live
    /// snapshot's version).
    /// Spills the give-up entries of deposits the open transaction removed
    /// and did not unschedule (part of its commit; may be called before).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the index is full.
    pub(crate) fn settle(&mut self) -> StoreResult<()> {
        for (_, slot) in std::mem::take(&mut self.removed_flagged) {
            let d = *self.deps.get(slot);
            if d.flagged() {
                let rkid = self.queues.get(d.qid).rkid();
                self.due_remove_ref(d.give_up_at, mkref(GIVE_UP, slot));
                self.due_add_spill(d.give_up_at, Due::GiveUp(rkid, d.seq))?;
            }
        }
        Ok(())
    }

    pub(crate) fn commit(&mut self, keep: bool, oldest: Option<u64>) -> StoreResult<u64> {
        self.settle()?;
        let version = self.committed + 1;
        if keep && !self.open.is_empty() {
            let images = self.images(&self.open);
            self.history
                .push_back((version, std::sync::Arc::new(images)));
        }
        self.open.clear();
        self.occupancy_saved = false;
        for (kind, slot) in std::mem::take(&mut self.deferred) {
            match kind {
                K_DEP if !self.deps.get(slot).live() => self.deps.release(slot),
                K_QUEUE if !self.queues.get(slot).live() => self.queues.release(slot),
                K_DEPART if !self.departs.get(slot).live() => self.departs.release(slot),
                K_SPILL if !self.spill.get(slot).live() => self.spill.release(slot),
                _ => {}
            }
        }
        self.committed = version;
        self.prune(oldest);
        Ok(version)
    }

    /// Drops history that no snapshot at `oldest` or later needs.
    pub(crate) fn prune(&mut self, oldest: Option<u64>) {
        while let Some((version, _)) = self.history.front() {
            if oldest.is_some_and(|v| v < *version) {
                break;
            }
            self.history.pop_front();
        }
    }

    /// Takes the open transaction back.
    pub(crate) fn rollback(&mut self) {
        while let Some(undo) = self.open.pop() {
            self.undo(undo);
        }
        self.occupancy_saved = false;
        self.deferred.clear();
        self.removed_flagged.clear();
    }

    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::DepAdded(slot) => {
                let d = *self.deps.get(slot);
                self.unlink(slot);
                let hash = self.hash_qid(d.qid, &d.id);
                self.by_id.remove(hash, slot);
                self.seg_adjust(d.seg, d.len(), false);
                self.deps.get_mut(slot).len &= !LIVE;
                self.deps.release(slot);
            }
            Undo::DepRemoved(slot) => {
                self.deps.get_mut(slot).len |= LIVE;
                let d = *self.deps.get(slot);
                // Every later change is undone: its neighbours are the
                // ones it had.
                let q = self.queues.get_mut(d.qid);
                if q.head == NIL {
                    q.head = slot;
                } else {
                    self.deps.get_mut(d.prev).next = slot;
                    self.deps.get_mut(d.next).prev = slot;
                    let head = self.queues.get(d.qid).head;
                    if head == d.next && self.deps.get(head).seq > d.seq {
                        self.queues.get_mut(d.qid).head = slot;
                    }
                }
                self.hash_dep(slot);
                self.seg_adjust(d.seg, d.len(), true);
            }
            Undo::DepMoved { slot, seg, off } => {
                let d = *self.deps.get(slot);
                self.seg_adjust(d.seg, d.len(), false);
                self.seg_adjust(seg, d.len(), true);
                let r = self.deps.get_mut(slot);
                r.seg = seg;
                r.off = off;
            }
            Undo::QueueCreated(qid) => {
                let hash = self.hash_rkid(&self.queues.get(qid).rkid);
                self.by_rkid.remove(hash, qid);
                self.queues.get_mut(qid).meta &= !LIVE;
                self.queues.release(qid);
            }
            Undo::QueueFreed(qid) => {
                self.queues.get_mut(qid).meta |= LIVE;
                let (h, qs) = (&self.hasher, &self.queues);
                self.by_rkid
                    .insert(h.hash_one(qs.get(qid).rkid), qid, |&s| {
                        h.hash_one(qs.get(s).rkid)
                    });
            }
            Undo::QueueFields {
                qid,
                next_seq,
                bytes,
                meta,
            } => {
                let q = self.queues.get_mut(qid);
                q.next_seq = next_seq;
                q.bytes = bytes;
                q.meta = meta;
            }
            Undo::DueAdded { at, r } => {
                self.due_take(at, r);
                let slot = slot_of(r);
                match kind_of(r) {
                    GIVE_UP => self.deps.get_mut(slot).len &= !FLAG,
                    FORGET => self.departs.get_mut(slot).meta &= !FLAG,
                    SPILL => {
                        self.spill.get_mut(slot).live = false;
                        self.spill.release(slot);
                    }
                    _ => {}
                }
            }
            Undo::DueRemoved { at, r } => {
                let slot = slot_of(r);
                match kind_of(r) {
                    GIVE_UP => self.deps.get_mut(slot).len |= FLAG,
                    FORGET => self.departs.get_mut(slot).meta |= FLAG,
                    SPILL => self.spill.get_mut(slot).live = true,
                    _ => {}
                }
                self.due_push(at, r);
            }
            Undo::DepartAdded(slot) => {
                let d = *self.departs.get(slot);
                let hash = self.hash_qid(d.qid, &d.id);
                self.depart_by_id.remove(hash, slot);
                self.departs.get_mut(slot).meta &= !LIVE;
                self.departs.release(slot);
            }
            Undo::DepartRemoved(slot) => {
                self.departs.get_mut(slot).meta |= LIVE;
                let (h, ps) = (&self.hasher, &self.departs);
                let d = *ps.get(slot);
                self.depart_by_id
                    .insert(h.hash_one((d.qid, d.id)), slot, |&s| {
                        let d = ps.get(s);
                        h.hash_one((d.qid, d.id))
                    });
            }
            Undo::DepartChanged { slot, before } => {
                *self.departs.get_mut(slot) = before;
            }
            Undo::Occupancy(before) => self.occupancy = before,
            Undo::Quarantine { key, before } => match before {
                Some(value) => {
                    self.quarantine.insert(key, value);
                }
                None => {
                    self.quarantine.remove(&key);
                }
            },
        }
    }

    /// The before-images of an undo log, first per key (the records it
    /// names are all still allocated: frees wait for the commit).
    fn images(&self, undo: &[Undo]) -> History {
        let mut out = History::new();
        for u in undo {
            let (key, before) = match u {
                Undo::DepAdded(slot) => {
                    let d = self.deps.get(*slot);
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(None),
                    )
                }
                Undo::DepRemoved(slot) => {
                    let d = self.deps.get(*slot);
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(Some(d.image())),
                    )
                }
                Undo::DepMoved { slot, seg, off } => {
                    let d = self.deps.get(*slot);
                    let mut image = d.image();
                    image.seg = *seg;
                    image.off = *off;
                    (
                        Key::Dep(self.queues.get(d.qid).rkid(), d.seq),
                        Before::Dep(Some(image)),
                    )
                }
                Undo::QueueCreated(qid) => (
                    Key::Queue(self.queues.get(*qid).rkid()),
                    Before::Queue(QueueImage::default()),
                ),
                Undo::QueueFields {
                    qid,
                    next_seq,
                    bytes,
                    ..
                } => (
                    Key::Queue(self.queues.get(*qid).rkid()),
                    Before::Queue(QueueImage {
                        next_seq: *next_seq,
                        bytes: u64::from(*bytes),
                    }),
                ),
                Undo::QueueFreed(_) => continue,
                Undo::DueAdded { at, r } => (Key::Due(*at, self.due_of(*r)), Before::Due(false)),
                Undo::DueRemoved { at, r } => (Key::Due(*at, self.due_of(*r)), Before::Due(true)),
                Undo::DepartAdded(slot) => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(None),
                    )
                }
                Undo::DepartRemoved(slot) => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(Some(d.record())),
                    )
                }
                Undo::DepartChanged { slot, before } => {
                    let d = self.departs.get(*slot);
                    (
                        Key::Depart(self.queues.get(d.qid).rkid(), DepositId(d.id)),
                        Before::Depart(Some(before.record())),
                    )
                }
                Undo::Occupancy(o) => (Key::Occupancy, Before::Occupancy(*o)),
                Undo::Quarantine { key, before } => (
                    Key::Quarantine(key.0, key.1),
                    Before::Quarantine(before.clone()),
                ),
            };
            out.entry(key).or_insert(before);
        }
        out
    }

    /// What a snapshot at `version` overlays on the current state: the
    /// before-images of later commits (oldest first) and of the open
    /// transaction.
    pub(crate) fn view(&self, version: u64) -> View<'_> {
        let layers = self
            .history
            .iter()
            .filter(|(v, _)| *v > version)
            .map(|(_, h)| std::sync::Arc::clone(h))
            .collect::<Vec<_>>();
        let open = (!self.open.is_empty()).then(|| self.images(&self.open));
        View {
            ix: self,
            layers,
            open,
        }
    }

    // -- integrity -----------------------------------------------------------

    /// Everything the index holds, in a canonical order (to compare two).
    pub(crate) fn canonical(&self) -> Canonical {
        let mut c = Canonical::default();
        for qid in 0..self.queues.high() {
            let Some(q) = self.queues.live_at(qid) else {
                continue;
            };
            let deposits = self
                .list(qid, None, usize::MAX)
                .into_iter()
                .map(|s| self.deps.get(s).image())
                .collect();
            c.queues
                .push((q.rkid(), q.next_seq, q.bytes(), q.bound(), deposits));
        }
        c.queues.sort_by_key(|q| q.0);
        for slot in 0..self.departs.high() {
            if let Some(d) = self.departs.live_at(slot) {
                c.departures
                    .push((self.queues.get(d.qid).rkid(), DepositId(d.id), d.record()));
            }
        }
        c.departures.sort_by_key(|d| (d.0, d.1));
        c.due = self.due_upto(Ms::MAX, usize::MAX);
        c.quarantine = self.quarantine.clone().into_iter().collect();
        c.occupancy = (
            self.occupancy.deposits,
            self.occupancy.total_bytes,
            self.occupancy.elastic_bytes,
        );
        c
    }

    /// Checks the index against itself: every hash entry names a live
    /// record and every live record is in its hash, every queue's list is
    /// in `seq` order and sums to its bytes, every counter equals what it
    /// counts, every due reference is valid and every flag has its entry.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first mismatch.
    pub(crate) fn check(&self) -> StoreResult<()> {
        let bad = |what: String| Err(StoreError::Corrupt(format!("in-memory index: {what}")));
        let mut total = 0u64;
        let mut deposits = 0u64;
        let mut segs: HashMap<u32, SegStat> = HashMap::new();
        let mut refs: HashMap<u32, u32> = HashMap::new();
        for qid in 0..self.queues.high() {
            let Some(q) = self.queues.live_at(qid) else {
                continue;
            };
            if self.queue(&q.rkid()) != Some(qid) {
                return bad(format!("queue {} is not in its hash", q.rkid()));
            }
            let (mut bytes, mut last, mut at, mut n) = (0u64, 0u64, q.head, 0u64);
            while at != NIL {
                let Some(d) = self.deps.live_at(at) else {
                    return bad(format!("queue {} links a dead slot", q.rkid()));
                };
                if d.qid != qid || d.seq <= last || d.seq > q.next_seq {
                    return bad(format!(
                        "queue {} is out of order at seq {}",
                        q.rkid(),
                        d.seq
                    ));
                }
                if self.find_id(qid, &d.id) != Some(at) {
                    return bad(format!("deposit {} is not in the identity hash", d.seq));
                }
                last = d.seq;
                bytes += u64::from(d.len());
                n += 1;
                let s = segs.entry(d.seg).or_default();
                s.live += 1;
                s.bytes += u64::from(d.len());
                at = self.next_in_queue(at);
            }
            if bytes != q.bytes() {
                return bad(format!(
                    "queue {} counts {} bytes, holds {bytes}",
                    q.rkid(),
                    q.bytes()
                ));
            }
            total += bytes;
            deposits += n;
        }
        if deposits != self.by_id.len() as u64 || deposits != self.deps.count() {
            return bad(format!(
                "{deposits} deposits listed, {} hashed, {} allocated",
                self.by_id.len(),
                self.deps.count()
            ));
        }
        if total != self.occupancy.total_bytes || deposits != self.occupancy.deposits {
            return bad(format!(
                "occupancy {:?} vs {deposits} deposits of {total} bytes",
                self.occupancy
            ));
        }
        for (seg, stat) in &self.segs {
            if segs.get(seg).copied().unwrap_or_default() != *stat {
                return bad(format!("segment {seg:016x} counts {stat:?}"));
            }
        }
        for slot in 0..self.departs.high() {
            if let Some(d) = self.departs.live_at(slot) {
                if self.find_departure(d.qid, &d.id) != Some(slot) {
                    return bad("a departure is not in its hash".into());
                }
                *refs.entry(d.qid).or_default() += 1;
            }
        }
        let mut entries = 0u64;
        let mut flagged = (0u64, 0u64);
        if !self.removed_flagged.is_empty() {
            return bad("removed deposits wait to be settled".into());
        }
        let mut spilled = 0usize;
        for (&at, bucket) in &self.due {
            for r in bucket.refs() {
                if kind_of(r) == SPILL {
                    spilled += 1;
                    if self.spill_index.get(&(at, self.spill.get(slot_of(r)).due))
                        != Some(&slot_of(r))
                    {
                        return bad(format!("spilled entry {r:#x} at {at} is not in its index"));
                    }
                }
                entries += 1;
                let slot = slot_of(r);
                let valid = match kind_of(r) {
                    GIVE_UP => {
                        flagged.0 += 1;
                        self.deps
                            .live_at(slot)
                            .is_some_and(|d| d.flagged() && d.give_up_at == at)
                    }
                    FORGET => {
                        flagged.1 += 1;
                        self.departs
                            .live_at(slot)
                            .is_some_and(|d| d.flagged() && d.forget_at == at)
                    }
                    ORPHAN | DEADLINE => {
                        *refs.entry(slot).or_default() += 1;
                        self.queues.live_at(slot).is_some()
                    }
                    _ => self.spill.live_at(slot).is_some(),
                };
                if !valid {
                    return bad(format!("due entry {r:#x} at {at} names nothing"));
                }
            }
        }
        if entries != self.due_len || spilled != self.spill_index.len() {
            return bad(format!(
                "{entries} due entries, {} counted; {spilled} spilled, {} indexed",
                self.due_len,
                self.spill_index.len()
            ));
        }
        let flags = (
            (0..self.deps.high())
                .filter(|&s| self.deps.live_at(s).is_some_and(DepRec::flagged))
                .count() as u64,
            (0..self.departs.high())
                .filter(|&s| self.departs.live_at(s).is_some_and(DepartRec::flagged))
                .count() as u64,
        );
        if flags != flagged {
            return bad(format!("flags {flags:?}, due references {flagged:?}"));
        }
        for qid in 0..self.queues.high() {
            if let Some(q) = self.queues.live_at(qid)
                && q.refs() != refs.get(&qid).copied().unwrap_or(0)
            {
                return bad(format!("queue {} counts {} references", q.rkid(), q.refs()));
            }
        }
        Ok(())
    }
}

/// [`Index::canonical`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Canonical {
    /// Per queue: rkid, next seq, bytes, bound, deposits.
    pub(crate) queues: Vec<(Rkid, u64, u64, bool, Vec<DepImage>)>,
    pub(crate) departures: Vec<(Rkid, DepositId, DepartureRecord)>,
    pub(crate) due: Vec<(Ms, Due)>,
    pub(crate) quarantine: Vec<((Rkid, u64), Vec<u8>)>,
    /// Deposits, bytes, elastic bytes.
    pub(crate) occupancy: (u64, u64, u64),
}

/// A snapshot's view: the current state with later changes taken back.
pub(crate) struct View<'a> {
    pub(crate) ix: &'a Index,
    layers: Vec<std::sync::Arc<History>>,
    open: Option<History>,
}

impl View<'_> {
    fn layers(&self) -> impl Iterator<Item = &History> {
        self.layers.iter().map(|h| &**h).chain(self.open.iter())
    }

    /// Whether the view differs from the current state at all.
    fn overlaid(&self) -> bool {
        !self.layers.is_empty() || self.open.is_some()
    }

    /// The before-image of `key` (the value the snapshot sees), if a later
    /// change touched it.
    pub(crate) fn before(&self, key: &Key) -> Option<&Before> {
        self.layers().find_map(|h| h.get(key))
    }

    /// The before-images of keys in `range`, first per key.
    fn range(&self, from: Key, to: Key) -> BTreeMap<Key, Before> {
        let mut out = BTreeMap::new();
        for h in self.layers() {
            for (k, b) in h.range(from.clone()..=to.clone()) {
                out.entry(k.clone()).or_insert_with(|| b.clone());
            }
        }
        out
    }

    fn dep_range(&self, rkid: &Rkid) -> BTreeMap<u64, Option<DepImage>> {
        if !self.overlaid() {
            return BTreeMap::new();
        }
        self.range(Key::Dep(*rkid, 0), Key::Dep(*rkid, u64::MAX))
            .into_iter()
            .filter_map(|(k, b)| match (k, b) {
                (Key::Dep(_, seq), Before::Dep(image)) => Some((seq, image)),
                _ => None,
            })
            .collect()
    }

    /// Up to `limit` deposits of `rkid` after `after`, as the snapshot sees them.
    pub(crate) fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> Vec<DepImage> {
        let overlay = self.dep_range(rkid);
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut over = overlay.range(from..).peekable();
        let mut current = self
            .ix
            .queue(rkid)
            .map_or(NIL, |q| self.ix.first_after(q, after));
        let mut out = Vec::new();
        while out.len() < limit {
            let cur_seq = (current != NIL).then(|| self.ix.deps.get(current).seq);
            let ov_seq = over.peek().map(|(s, _)| **s);
            let take_current = match (cur_seq, ov_seq) {
                (None, None) => break,
                (Some(c), Some(o)) => c < o,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if take_current {
                out.push(self.ix.deps.get(current).image());
                current = self.ix.next_in_queue(current);
            } else if let Some((&seq, image)) = over.next() {
                // The snapshot's own image of this seq (none: not there yet).
                out.extend(*image);
                if cur_seq == Some(seq) {
                    current = self.ix.next_in_queue(current);
                }
            }
        }
        out
    }

    /// The deposit of `rkid` with this id, as the snapshot sees it.
    pub(crate) fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> Option<DepImage> {
        let overlay = self.dep_range(rkid);
        if let Some(image) = overlay
            .values()
            .flatten()
            .find(|image| image.deposit.id == *id)
        {
            return Some(*image);
        }
        let qid = self.ix.queue(rkid)?;
        let slot = self.ix.find_id(qid, &id.0)?;
        let d = self.ix.deps.get(slot);
        if overlay.contains_key(&d.seq) {
            // Not there yet for this snapshot, or changed (found above).
            return None;
        }
        Some(d.image())
    }

    /// The deposit `seq` of `rkid`, as the snapshot sees it.
    pub(crate) fn deposit(&self, rkid: &Rkid, seq: u64) -> Option<DepImage> {
        if let Some(Before::Dep(image)) = self.before(&Key::Dep(*rkid, seq)) {
            return *image;
        }
        let qid = self.ix.queue(rkid)?;
        self.ix
            .find_seq(qid, seq)
            .map(|s| self.ix.deps.get(s).image())
    }

    pub(crate) fn queue(&self, rkid: &Rkid) -> QueueImage {
        if let Some(Before::Queue(image)) = self.before(&Key::Queue(*rkid)) {
            return *image;
        }
        self.ix
            .queue(rkid)
            .map(|q| self.ix.queues.get(q).image())
            .unwrap_or_default()
    }

    pub(crate) fn occupancy(&self) -> Occupancy {
        match self.before(&Key::Occupancy) {
            Some(Before::Occupancy(o)) => *o,
            _ => self.ix.occupancy,
        }
    }

    pub(crate) fn departure(&self, rkid: &Rkid, id: &DepositId) -> Option<DepartureRecord> {
        match self.before(&Key::Depart(*rkid, *id)) {
            Some(Before::Depart(record)) => *record,
            _ => self.ix.departure(rkid, id),
        }
    }

    pub(crate) fn due(&self, upto: Ms, limit: usize) -> Vec<(Ms, Due)> {
        let overlay: Vec<((Ms, Due), bool)> = if self.overlaid() {
            self.range(
                Key::Due(0, Due::OrphanExpiry(Rkid::from_bytes([0; 32]))),
                Key::Due(
                    upto,
                    Due::Forget(Rkid::from_bytes([255; 32]), DepositId([255; 32])),
                ),
            )
            .into_iter()
            .filter_map(|(k, b)| match (k, b) {
                (Key::Due(at, due), Before::Due(present)) => Some(((at, due), present)),
                _ => None,
            })
            .collect()
        } else {
            Vec::new()
        };
        // The current entries, enough of them to fill `limit` after the
        // ones the snapshot does not see are taken out.
        let mut current = self.ix.due_upto(upto, limit.saturating_add(overlay.len()));
        current.retain(|e| !overlay.iter().any(|(k, _)| k == e));
        current.extend(overlay.into_iter().filter(|(_, p)| *p).map(|(k, _)| k));
        current.sort_unstable();
        current.truncate(limit);
        current
    }

    pub(crate) fn quarantined(&self) -> u64 {
        let mut count = self.ix.quarantine.len() as i64;
        if self.overlaid() {
            for (key, before) in self.range(
                Key::Quarantine(Rkid::from_bytes([0; 32]), 0),
                Key::Quarantine(Rkid::from_bytes([255; 32]), u64::MAX),
            ) {
                if let (Key::Quarantine(r, s), Before::Quarantine(b)) = (key, before) {
                    let now = self.ix.quarantine.contains_key(&(r, s));
                    count += i64::from(b.is_some()) - i64::from(now);
                }
            }
        }
        count.max(0) as u64
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
