//! # rltp-store: the carrier's store contract
//!
//! What a carrier must never lose (§4.4, §5a.3, §5a.8, §5a.9): bindings,
//! binding tombstones with their eviction order, per-queue deposits in
//! admission order, the byte-identity index of held deposits, the due-time
//! index that drives the horizons, departure records for the sender status
//! path, byte occupancy, and declaration revisions — as plain data
//! ([`model`]), behind one trait set ([`Store`], [`ReadTxn`], [`WriteTxn`]).
//!
//! This crate holds the contract and what every backend shares, so that
//! the sans-IO engine (`rltp-engine`) can depend on it without any storage
//! engine or file in its build:
//! - the traits and the model;
//! - the typed errors ([`StoreError`]);
//! - the bookkeeping every backend keeps the same way: live challenges
//!   ([`ChallengeTable`]), the occupancy counters ([`Occupancy`]'s
//!   methods) and the seq floor ([`SeqFloor`]);
//! - [`mem::MemStore`], the in-memory reference store the engine's rules
//!   and the property tests run on.
//!
//! The backends live in `rltp-storage`: the log store (the embedded
//! default), the legacy redb-layout store it upgrades from, and the
//! PostgreSQL store.
//!
//! What this crate does **not** do: it decides nothing about requests (the
//! rules are `rltp-engine`'s, which drives the store through these traits),
//! touches no file, runs no thread and reads no clock (the carrier's
//! group-commit writer sequences write transactions and hands every
//! instant in), and has no async runtime.
//!
//! ## Transactions and durability
//! A [`WriteTxn`] is one atomic unit: the engine runs its whole decision
//! (a check-and-commit, §4.4 "every decision … is atomic") inside one, so
//! every mutation it makes is linearizable. [`Store::commit`] makes a write
//! transaction durable (fsync) before it returns; nothing is answered to a
//! caller before that. Group commit — many operations in one write
//! transaction, one fsync — is done above this crate, by the carrier's
//! group-commit writer (`rltp_carrier::writer`), which drives the store
//! through [`Store::begin_write`], [`Store::commit_deferred`] and
//! [`Store::sync`]: the store's durability primitives.
//!
//! ## Live challenges
//! Challenges (§5a.3) are held by the store too ([`Store::issue_challenge`],
//! [`Store::take_challenge`]), because a distributed backend could share
//! them between nodes. Every backend today keeps them in one in-memory
//! [`ChallengeTable`] (its [`Store::challenges`]): a restart forgets every
//! live challenge, which is indistinguishable from all of them expiring,
//! and can never let a consumed challenge be accepted twice.

mod bookkeeping;
pub mod challenges;
mod deferred;
mod error;
pub mod mem;
pub mod model;

pub use bookkeeping::{SeqFloor, deposit_len, next_seq};
pub use challenges::{Challenge, ChallengeTable};
pub use deferred::{DeferredBytes, PendingSync};
pub use error::{BoxError, OpenError, OpenResult, StoreError, StoreResult};
pub use model::*;
use rltp_proofs::multikey::Rkid;

/// Read access to the carrier state (a consistent snapshot, or the
/// current state inside a write transaction).
pub trait ReadTxn {
    /// The held binding of `rkid`, if `live` or `closing`.
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>>;
    /// The tombstone of `rkid`, if `released`.
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>>;
    /// The first tombstone in eviction order (longest-released, ties by
    /// ascending key bytes).
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>>;
    /// Up to `limit` held deposits of `rkid` with `seq > after`, in
    /// admission order.
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>>;
    /// The held deposit of `rkid` with this id (the byte-identity index).
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>>;
    /// The envelope bytes of a held deposit.
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>>;
    /// The envelope bytes of a held deposit, to be read (and checked)
    /// after this transaction ended: a collect reads its page outside the
    /// group-commit writer. What [`DeferredBytes::read`] returns is what
    /// [`ReadTxn::deposit_bytes`] would have returned here (a damaged
    /// deposit is [`StoreError::Corrupt`] then). The default reads them
    /// now; the log store hands out where they are.
    fn deposit_bytes_deferred(&self, rkid: &Rkid, deposit: &Deposit) -> DeferredBytes {
        DeferredBytes::ready(self.deposit_bytes(rkid, deposit))
    }
    /// Whether `rkid` holds a binding (§5a.5 s1): the same as
    /// `binding(rkid)?.is_some()`, which is the default; the log store
    /// answers it from memory, so that a submission reads no B-tree.
    fn holds_binding(&self, rkid: &Rkid) -> StoreResult<bool> {
        Ok(self.binding(rkid)?.is_some())
    }
    /// Bytes held by the queue of `rkid`.
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64>;
    /// The global counters.
    fn occupancy(&self) -> StoreResult<Occupancy>;
    /// The departure record of a deposit that left `rkid`'s queue.
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>>;
    /// Up to `limit` due entries with instant ≤ `upto`, earliest first.
    /// In a write transaction of a store many nodes share, a bounded read
    /// leaves out the entries of queues another node's transaction holds
    /// (they stay due, for that node or a later transaction:
    /// `PROTOCOL.md` §13 "Per-queue locks"); a read of every entry
    /// (`limit = usize::MAX`) never leaves one out (it fails as a
    /// [`StoreError::Conflict`] instead).
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>>;
    /// The earliest due instant, if any (for the sweeper's next wake-up).
    fn next_due(&self) -> StoreResult<Option<Ms>>;
    /// The current declaration revision.
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>>;
    /// Deposits quarantined so far ([`WriteTxn::quarantine`]), a count.
    fn quarantined(&self) -> StoreResult<u64>;

    /// Held bindings by phase, counts only (metrics and the operator page;
    /// nothing per principal or per `rkid` leaves this call). The default
    /// reads the due index — every held binding has an orphan-expiry
    /// (live) or a deadline (closing) entry there — and looks each one up:
    /// O(due entries). The embedded store overrides it with a scan of its
    /// bindings: O(bindings).
    ///
    /// # Errors
    /// [`StoreError`] if the reads fail.
    fn binding_phases(&self) -> StoreResult<BindingPhases> {
        let mut seen = std::collections::BTreeSet::new();
        let mut phases = BindingPhases::default();
        for (_, due) in self.due(Ms::MAX, usize::MAX)? {
            let (Due::OrphanExpiry(rkid) | Due::Deadline(rkid)) = due else {
                continue;
            };
            if !seen.insert(rkid) {
                continue;
            }
            match self.binding(&rkid)?.map(|b| b.phase) {
                Some(Phase::Live) => phases.live += 1,
                Some(Phase::Closing { .. }) => phases.closing += 1,
                None => {}
            }
        }
        Ok(phases)
    }
}

/// Held bindings by phase (§5a.3 `live`, `closing`), counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BindingPhases {
    /// Bindings in `live`.
    pub live: u64,
    /// Bindings in `closing` (wind-up begun, deadline pending).
    pub closing: u64,
}

/// A write transaction: everything it does becomes durable together at
/// [`Store::commit`], or not at all.
pub trait WriteTxn: ReadTxn {
    /// Installs or replaces the binding of `rkid`.
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()>;
    /// Removes the binding of `rkid`.
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>>;
    /// Installs the tombstone of `rkid`.
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()>;
    /// Removes the tombstone of `rkid` (consumption or eviction).
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>>;
    /// Appends `bytes` to the queue of `rkid` in admission order and
    /// indexes its identity `id`, which must be [`DepositId::of`] the bytes
    /// (the caller has it already: s3 looked it up); returns the stored
    /// metadata. Occupancy grows by `bytes.len()`. Every read of the bytes
    /// checks them against `id`, so a wrong one surfaces as
    /// [`StoreError::Corrupt`], never as wrong bytes.
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit>;
    /// [`WriteTxn::append_identified`], hashing the id here.
    fn append_deposit(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        self.append_identified(rkid, bytes, &DepositId::of(bytes), admitted_at, give_up_at)
    }
    /// Removes a held deposit (conclusion or give-up only) and its identity
    /// entry; occupancy shrinks by its length.
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>>;
    /// Records how a deposit left its queue, for the status path.
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()>;
    /// Drops a departure record.
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()>;
    /// Adds an entry to the due-time index.
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()>;
    /// Removes an entry from the due-time index (no-op if absent).
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()>;
    /// Adjusts the engine-maintained elastic occupancy (guarantee 5).
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()>;
    /// The bytes held in reserve for floors moved by `delta` (§4.4
    /// guarantee 5): `+queue-floor` when a binding is installed where none
    /// was held, `−queue-floor` when one is removed, `bindings × Δfloor`
    /// when a revision moves the floor. Only a store that escrows capacity
    /// ([`WriteTxn::escrow`]) counts it, spending it from its budget; the
    /// others derive the reserve as `bindings × queue-floor`. Default:
    /// nothing.
    fn add_reserved_bytes(&mut self, delta: i64) -> StoreResult<()> {
        let _ = delta;
        Ok(())
    }
    /// §4.4 guarantees 2, 4 and 5 under **escrowed budgets**
    /// (`PROTOCOL.md` §13 "Escrowed budgets"): for a store many nodes
    /// share, what this transaction may still spend (its node's budget),
    /// after moving into it what `need` lacks, where the shared pool (or
    /// the budget of a node that is gone) has it. `None` (the default): the
    /// store holds no budgets, and capacity is judged exactly on
    /// [`ReadTxn::occupancy`].
    ///
    /// # Errors
    /// [`StoreError`] if the budget cannot be read or moved.
    fn escrow(&self, need: Need) -> StoreResult<Option<Escrow>> {
        let _ = need;
        Ok(None)
    }
    /// §5a.3 r4 for a return, under escrowed budgets: whether the carrier
    /// is over its limits (the pool and every budget together below zero,
    /// in bytes or in binding slots: a limit was lowered below what is
    /// held). `None` (the default): judge on [`ReadTxn::occupancy`].
    ///
    /// # Errors
    /// [`StoreError`] if the budgets cannot be read.
    fn over_limits(&self) -> StoreResult<Option<bool>> {
        Ok(None)
    }
    /// Stores a declaration revision.
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()>;
    /// A hint before the operations of a batch run: they will look up
    /// these queues (their binding, tombstone and counters) and, where an
    /// id is given, these deposits by id. A store whose reads are round
    /// trips (PostgreSQL) reads them all at once; answers are the same
    /// either way.
    ///
    /// A store many nodes share also **locks** the queues here, in `rkid`
    /// order (`PROTOCOL.md` §13 "Per-queue locks"), and returns the queues
    /// another node's transaction holds: the caller runs the operations on
    /// those in a later transaction rather than wait. With `wait`, it
    /// waits for every lock instead (in `rkid` order, so two nodes never
    /// deadlock) and returns none; the caller asks for that once an
    /// operation has been put off a few times, so none is put off for
    /// ever. Default: nothing read ahead, nothing held elsewhere.
    ///
    /// # Errors
    /// [`StoreError`] if the reads fail (the batch then fails as a whole).
    fn prefetch(
        &mut self,
        keys: &[(Rkid, Option<DepositId>)],
        wait: bool,
    ) -> StoreResult<Vec<Rkid>> {
        let _ = (keys, wait);
        Ok(Vec::new())
    }
    /// Records that held deposit `deposit` of `rkid` was found damaged at
    /// `at` (`reason`: the failed check): a quarantine record the operator
    /// can read back ([`ReadTxn::quarantined`], the embedded store's
    /// integrity check names each). The caller then gives the deposit up
    /// (engine, `queue::quarantine`); this call removes nothing.
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()>;
    /// The clock of the database this transaction runs in (ms since the
    /// Unix epoch), read as it began, once it held its lock: for a store
    /// that many carrier nodes share, the one clock every horizon of the
    /// transaction is stamped and judged on (`PROTOCOL.md` §13, "One
    /// clock"). `None` (the default) for a store one carrier owns: its own
    /// clock is then the one clock (`PROTOCOL.md` §11).
    fn store_now(&self) -> Option<Ms> {
        None
    }
}

/// A carrier store. Implementations are shared between threads; write
/// transactions are serialized by the caller (one writer: the carrier's
/// group-commit writer, `rltp_carrier::writer`).
pub trait Store: Send + Sync + 'static {
    /// The read snapshot type.
    type Read<'a>: ReadTxn
    where
        Self: 'a;
    /// The write transaction type.
    type Write<'a>: WriteTxn
    where
        Self: 'a;

    /// A consistent read snapshot.
    ///
    /// # Errors
    /// [`StoreError`] if the snapshot cannot be opened.
    fn read(&self) -> StoreResult<Self::Read<'_>>;
    /// Begins a write transaction. Only one may be open at a time.
    ///
    /// # Errors
    /// [`StoreError`] if it cannot be opened.
    fn begin_write(&self) -> StoreResult<Self::Write<'_>>;
    /// Makes `txn` durable: envelope bytes first, then the metadata that
    /// references them, each fsync'd, before returning.
    ///
    /// # Errors
    /// [`StoreError`]; on error nothing of `txn` may be assumed durable,
    /// and nothing of it is visible.
    fn commit(&self, txn: Self::Write<'_>) -> StoreResult<()>;
    /// Commits `txn` so that it is visible, and returns what its
    /// durability still waits for, for [`Store::sync`]: the pipelined group
    /// commit of the carrier's writer (`rltp_carrier::writer`) builds the next batch while this
    /// one's fsync runs. Nobody may be told of `txn`'s effects before
    /// `sync` returned `Ok` for it. Default: [`Store::commit`] (durable on
    /// return, nothing left to wait for).
    ///
    /// # Errors
    /// As [`Store::commit`].
    fn commit_deferred(&self, txn: Self::Write<'_>) -> StoreResult<PendingSync> {
        self.commit(txn).map(|()| PendingSync::default())
    }
    /// Waits until the transaction `pending` came from is durable (and
    /// with it every transaction committed before it).
    ///
    /// # Errors
    /// [`StoreError`] if it cannot be made durable (the embedded store
    /// never returns: a failed `fdatasync` stops the process, see
    /// `redb_store`). Default: `Ok`.
    fn sync(&self, pending: PendingSync) -> StoreResult<()> {
        let _ = pending;
        Ok(())
    }
    /// Makes everything visible now durable (for a reader about to answer
    /// from a snapshot; usually the syncer has done it already).
    ///
    /// # Errors
    /// As [`Store::sync`]. Default: `Ok`.
    fn sync_visible(&self) -> StoreResult<()> {
        Ok(())
    }
    /// Told by the group-commit writer that a batch failed (an operation,
    /// the prelude, the commit or `begin_write` returned an error), before
    /// the next batch. A store whose storage engine latches an I/O failure
    /// recovers here, so that one error never wedges the carrier: the
    /// embedded store reopens its database before its next write
    /// transaction (`redb_store` module docs). Default: nothing.
    fn after_failure(&self) {}

    /// The live challenges (§5a.3) this store holds: every backend keeps
    /// them in one in-memory [`ChallengeTable`] (crate docs, "Live
    /// challenges"), and the four challenge methods below read and write it.
    fn challenges(&self) -> &ChallengeTable;
    /// Stores a live challenge (§5a.3).
    ///
    /// # Errors
    /// [`StoreError`] if it cannot be recorded (never, for the in-memory
    /// table).
    fn issue_challenge(&self, challenge: Challenge) -> StoreResult<()> {
        self.challenges().issue(challenge);
        Ok(())
    }
    /// Removes and returns the challenge keyed by `principal_challenge`,
    /// expired or not (the first response consumes it, before any
    /// verification, and nothing restores it).
    ///
    /// # Errors
    /// [`StoreError`] if the lookup fails.
    fn take_challenge(&self, principal_challenge: &[u8; 32]) -> StoreResult<Option<Challenge>> {
        Ok(self.challenges().take(principal_challenge))
    }
    /// Drops challenges that expired at or before `now`; returns how many.
    ///
    /// # Errors
    /// [`StoreError`] if the sweep fails.
    fn purge_challenges(&self, now: Ms) -> StoreResult<usize> {
        Ok(self.challenges().purge(now))
    }
    /// Live challenges held (for the no-leak checks of issue 6).
    fn challenge_count(&self) -> usize {
        self.challenges().len()
    }

    /// One bounded step of background maintenance (for the embedded store:
    /// compacting sparse segments so their space comes back), run by the
    /// server's sweeper between batches — never a pause: a step is one
    /// short write transaction serialized with the writer. Default: none.
    ///
    /// # Errors
    /// [`StoreError`] if the step fails; nothing of it is then durable.
    fn maintenance_step(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Installs `hook`, told the `rkid` of every queue that another
    /// carrier node sharing this store admitted a deposit to, so this
    /// node's watch sessions of that queue are pushed it at once (the
    /// PostgreSQL store's LISTEN/NOTIFY); told `None` when the store may
    /// have missed some (its listener came back after a gap), so that
    /// every watch session re-reads at once. A store only one node writes
    /// has no others: the default ignores it. Sessions re-read on their
    /// own timer too, so a store that cannot notify still delivers.
    fn on_remote_admission(&self, hook: AdmissionHook) {
        let _ = hook;
    }

    /// What the store takes on disk and in memory, how much of its log
    /// still holds deposits, and how old its oldest deposit is (the
    /// operator's view of store growth: `/metrics`, `admin store`). Read
    /// at one moment without the writer, so a figure may include a write
    /// transaction in progress. Default: nothing known.
    ///
    /// # Errors
    /// [`StoreError`] if the files or the database cannot be read.
    fn size(&self) -> StoreResult<StoreSize> {
        Ok(StoreSize::default())
    }

    /// The clock of a database that many carrier nodes share (ms since
    /// the Unix epoch), read now in a statement of its own: a node compares
    /// its own clock with it (`PROTOCOL.md` §13, "One clock"). `None` (the
    /// default) for a store one carrier owns.
    ///
    /// # Errors
    /// [`StoreError`] if the database cannot be reached.
    fn database_now(&self) -> StoreResult<Option<Ms>> {
        Ok(None)
    }
}

/// A store's size ([`Store::size`]); `None` where a store has no such
/// thing or cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreSize {
    /// Bytes of every file of the store (log segments, including
    /// preallocated ones, snapshots, redb), or the database's size.
    pub disk_bytes: Option<u64>,
    /// Bytes of the log's segment files.
    pub log_bytes: Option<u64>,
    /// Of those, bytes of held deposits' envelopes: `log_bytes −
    /// live_bytes` is what compaction and reclaiming can give back (plus
    /// record headers, other records and preallocated space).
    pub live_bytes: Option<u64>,
    /// Log segment files.
    pub segments: Option<u64>,
    /// Sealed segments sparse enough to be compacted (compaction's
    /// backlog; 0 once it has caught up).
    pub compactable_segments: Option<u64>,
    /// Bytes of snapshot files.
    pub snapshot_bytes: Option<u64>,
    /// Bytes the in-memory index holds (an estimate).
    pub index_bytes: Option<u64>,
    /// When the oldest held deposit was admitted (ms), `None` with none
    /// held (or unknown).
    pub oldest_deposit_at: Option<Ms>,
}

/// A callback told the `rkid` of a queue another node admitted to, or
/// `None` for "any queue" ([`Store::on_remote_admission`]).
pub type AdmissionHook = std::sync::Arc<dyn Fn(Option<&Rkid>) + Send + Sync>;
