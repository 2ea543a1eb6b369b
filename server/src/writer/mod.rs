//! Group commit: one writer thread owns the write transaction. This is the
//! shell's loop around the engine: it reads the clock, calls the engine,
//! and does the I/O (the store's durability primitives), in that order.
//!
//! Operations are typed jobs ([`Job`], one variant per operation; the one
//! `match` that runs them in the engine is `Job::run`), handed over by
//! the one way in, [`Writer::submit`], which returns the caller's
//! [`Ticket`]. The writer takes the first waiting operation,
//! then every operation that arrived meanwhile (up to `max_batch`), reads
//! its [`Clock`] **once** — or, on a store many nodes share, the
//! database's clock the transaction read as it began
//! ([`WriteTxn::store_now`], kept monotone: `PROTOCOL.md` §13 "One
//! clock") — (that `now` is the linearization instant of every
//! operation in the batch), calls the engine's prelude directly
//! ([`Engine::prelude`]: the transitions due at `now`), runs each
//! operation in arrival order inside **one** write transaction and commits
//! it ([`Store::commit_deferred`]). A second
//! thread, the syncer, makes committed batches durable in commit order
//! ([`Store::sync`]: one `fdatasync` covers every batch waiting) and only
//! then publishes the batch's events (the tally its operations returned, into
//! [`Writer::events`]) and answers their callers. So every answer (`admitted`, `rebound`,
//! `concluded`, …) follows its durable commit, the writer builds the next
//! batch while the previous one's fsync runs (at most 4 batches ahead), and
//! throughput scales with operations in flight instead of with fsyncs.
//!
//! A committed batch is visible before it is durable (for at most those 4
//! batches). Writer operations are safe with that: a batch that saw another
//! batch's effects is durable only after it, since syncs are in order and
//! one `fdatasync` covers all earlier ones. Readers outside the writer see
//! it early, which is why the sender-status answer, the watch push and the
//! backup snapshot, all read from snapshots, wait for durability too
//! ([`Store::sync_visible`]). A failed
//! sync of the embedded store stops the process ([`Store::sync`]).
//!
//! Every operation runs against the state left by the ones before it in the
//! same batch: the batch is a serial schedule, so each check-and-commit is
//! linearizable (§4.4, §5a.3 r5 compare-and-swap).
//!
//! If an operation fails with [`StoreError::Corrupt`] — it met damaged
//! data, which is about that operation and no other — the transaction is
//! dropped, that operation's caller alone receives the error, and the
//! other operations of the batch run again, in a fresh transaction,
//! without it (a job may run more than once for this: only its last run's
//! effects and result count). A failed
//! batch never costs another caller its answer because of one caller's
//! data. If an operation fails otherwise, or the prelude or the commit
//! fails, the whole transaction is dropped (nothing of it is durable or
//! visible) and every caller of the batch receives the error (those whose
//! operation never ran: [`CommitError::NotRun`]): a retriable answer
//! upstream, never a partial effect. The writer survives the error and
//! serves the next batch (a single I/O error never wedges the carrier).
//! On a store many nodes share, a batch's prefetch also locks its queues
//! ([`WriteTxn::prefetch`], `PROTOCOL.md` §13 "Per-queue locks"): the
//! operations on a queue another node's transaction holds are **put off**
//! to the next batch, in their order, rather than waited for; after
//! an operation has been put off three times (or when every
//! operation of a batch would be), its batch waits for its queues' locks
//! instead, so none is put off for ever. The batch's instant is read
//! once its queues are held.
//!
//! One exception: a [`StoreError::Conflict`] — the database aborted the
//! transaction as a serialization failure or a deadlock, so nothing of it
//! was written — runs the whole batch again, in a fresh transaction, up
//! to [`CONFLICT_RETRIES`] times before its callers are refused.

use crate::clock::Clock;
use rltp_engine::{Engine, EventCounters, EventSnapshot, Tally};
use rltp_storage::{Ms, PendingSync, Store, StoreError, WriteTxn};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod job;

pub use job::{Answer, HarnessJob, Hint, Job, Settle, Ticket};

/// Why a submitted operation did not complete.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The store failed; nothing of the batch is durable.
    #[error(transparent)]
    Store(Arc<StoreError>),
    /// The operation never ran: its batch failed before reaching it, or
    /// the writer has stopped. Nothing of it is durable.
    #[error("the operation did not run (batch aborted or writer stopped)")]
    NotRun,
}

impl CommitError {
    /// The store error behind this one ([`StoreError::Unavailable`] for an
    /// operation that never ran: usually its batch failed on a storage
    /// error, a full disk say, which is transient — not "store is closed").
    pub fn into_store_error(self) -> Arc<StoreError> {
        match self {
            CommitError::Store(e) => e,
            CommitError::NotRun => Arc::new(StoreError::Unavailable(
                "the operation did not run: its batch failed on a storage error (or the writer \
                 stopped); nothing of it was done",
            )),
        }
    }
}

/// Statistics of the writer, for metrics and tests.
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Batches committed.
    pub batches: std::sync::atomic::AtomicU64,
    /// Operations committed.
    pub operations: std::sync::atomic::AtomicU64,
    /// Batches that failed.
    pub failed_batches: std::sync::atomic::AtomicU64,
    /// Operations that met damaged data and were refused alone, their
    /// batch run again without them.
    pub isolated_operations: std::sync::atomic::AtomicU64,
}

/// What the writer reports about each batch, on its own thread, once the
/// batch is durable (or has failed) and **before** any caller of the batch
/// is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchReport {
    /// Operations in the batch (a count).
    pub operations: usize,
    /// Whether the batch became durable.
    pub committed: bool,
    /// Time spent in [`Store::commit`] (its fsyncs included); zero when the
    /// batch failed before reaching it.
    pub commit_time: Duration,
}

/// Called with every [`BatchReport`] before the batch's callers are
/// answered: on the syncer thread, or on the writer thread for a batch that
/// failed before its commit. Keep it short: later batches wait for it.
pub type BatchObserver = Arc<dyn Fn(&BatchReport) + Send + Sync>;

/// What the writer threads share with the handles.
#[derive(Default)]
struct Shared {
    stats: CommitStats,
    events: EventCounters,
    observer: OnceLock<BatchObserver>,
}

/// Handle to the writer thread. Dropping every handle stops the writer
/// after it has drained the queued operations.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
    _thread: Arc<WriterThread>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

struct WriterThread(Option<JoinHandle<()>>);

impl Drop for WriterThread {
    fn drop(&mut self) {
        // The sender half held by the last Writer is dropped before this
        // runs, so the writer drains its queue and exits.
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

impl Writer {
    /// Starts the writer thread (and its syncer) over `store`, reading
    /// `clock` once per batch; with `engine`, every batch first runs the
    /// engine's prelude ([`Engine::prelude`]) at that instant. Without one
    /// (a store-level harness driving the store through group commit) the
    /// batch runs only its operations. At most `max_batch` operations go
    /// into one batch.
    ///
    /// # Errors
    /// An I/O error if the thread cannot be spawned.
    pub fn start<S: Store>(
        store: Arc<S>,
        clock: Arc<dyn Clock>,
        engine: Option<Arc<Engine>>,
        max_batch: usize,
    ) -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("rltp-writer".into())
            .spawn(move || {
                let batches = Batches {
                    store: &*store,
                    clock: &*clock,
                    engine: engine.as_deref(),
                    shared: &thread_shared,
                    store_time: std::sync::atomic::AtomicU64::new(0),
                };
                writer_loop(&batches, &queue, max_batch.max(1));
            })?;
        Ok(Writer {
            jobs,
            shared,
            _thread: Arc::new(WriterThread(Some(handle))),
        })
    }

    /// Installs an observer told about every batch (size, commit time,
    /// outcome) before the batch's callers are answered. Only the first
    /// call installs one; returns whether this one did.
    pub fn observe_batches(&self, observer: BatchObserver) -> bool {
        self.shared.observer.set(observer).is_ok()
    }

    /// Counts of the durable transitions the batches' operations returned
    /// (see [`rltp_engine::events`]).
    pub fn events(&self) -> EventSnapshot {
        self.shared.events.snapshot()
    }

    /// The one way into the writer: queues `job` for the next batch and
    /// returns its [`Ticket`], answered once the batch is durable (or
    /// refused). Takes what a [`Job`] constructor returns:
    /// `writer.submit(Job::register(authorized))`.
    pub fn submit<T>(&self, (job, ticket): (Job, Ticket<T>)) -> Ticket<T> {
        // If the writer is gone the job (and its answer) is dropped and
        // the ticket reports `NotRun`.
        let _ = self.jobs.send(job);
        ticket
    }

    /// Writer statistics.
    pub fn stats(&self) -> &CommitStats {
        &self.shared.stats
    }
}

/// What the writer and syncer threads work with.
struct Batches<'a, S> {
    store: &'a S,
    clock: &'a dyn Clock,
    engine: Option<&'a Engine>,
    shared: &'a Shared,
    /// The last instant a batch took from the store's clock.
    store_time: std::sync::atomic::AtomicU64,
}

impl<S> Batches<'_, S> {
    /// The instant of a batch in `txn` (`PROTOCOL.md` §11, §13 "One
    /// clock"): the store's clock when it has one (a database many nodes
    /// share, [`WriteTxn::store_now`]), never earlier than the last batch's
    /// instant taken from it; else the carrier's own clock.
    fn batch_now(&self, txn: &dyn WriteTxn) -> Ms {
        match txn.store_now() {
            Some(store_now) => {
                let store_now = store_now.saturating_add(self.clock.test_offset());
                let last = self
                    .store_time
                    .fetch_max(store_now, std::sync::atomic::Ordering::SeqCst);
                if last > store_now {
                    tracing::debug!(
                        store_now,
                        last,
                        "the database's clock read behind the last batch's instant: keeping it"
                    );
                }
                last.max(store_now)
            }
            None => self.clock.now(),
        }
    }

    fn report(&self, report: &BatchReport) {
        if let Some(observer) = self.shared.observer.get() {
            observer(report);
        }
    }

    fn failed(&self, operations: usize, commit_time: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.stats.failed_batches.fetch_add(1, Relaxed);
        self.report(&BatchReport {
            operations,
            committed: false,
            commit_time,
        });
    }

    /// A batch became durable: its events are published, then it is
    /// counted and reported, all before any of its callers is answered.
    fn committed(&self, operations: usize, commit_time: Duration, events: Tally) {
        use std::sync::atomic::Ordering::Relaxed;
        self.shared.events.add(events);
        self.shared.stats.batches.fetch_add(1, Relaxed);
        self.shared
            .stats
            .operations
            .fetch_add(operations as u64, Relaxed);
        self.report(&BatchReport {
            operations,
            committed: true,
            commit_time,
        });
    }
}

/// A committed batch on its way to durability.
struct Pending {
    sync: PendingSync,
    events: Tally,
    jobs: Vec<Job>,
    count: usize,
    started: Instant,
}

fn writer_loop<S: Store>(batches: &Batches<'_, S>, queue: &mpsc::Receiver<Job>, max_batch: usize) {
    std::thread::scope(|scope| {
        let (to_syncer, pending) = mpsc::sync_channel::<Pending>(crate::defaults::SYNC_DEPTH);
        let syncer = std::thread::Builder::new()
            .name("rltp-sync".into())
            .spawn_scoped(scope, move || syncer_loop(batches, &pending));
        if let Err(error) = syncer {
            tracing::error!(%error, "the sync thread could not start; the writer stops");
            return;
        }
        // Operations put off by the last batch (their queues were held by
        // another node's transaction), with how often each was: first in
        // the next one.
        let mut put_off = PutOff::default();
        loop {
            let mut batch = std::mem::take(&mut put_off);
            if batch.jobs.is_empty() {
                match queue.recv() {
                    Ok(first) => batch.push(first, 0),
                    Err(_) => break,
                }
            }
            while batch.jobs.len() < max_batch {
                match queue.try_recv() {
                    Ok(job) => batch.push(job, 0),
                    Err(_) => break,
                }
            }
            let (committed, later) = run_batch(batches, batch);
            put_off = later;
            if let Some(committed) = committed
                && to_syncer.send(committed).is_err()
            {
                // The syncer died (a panic in an observer or a reply). The
                // batch is visible and its record written: refusing its
                // callers would be a lie once the log is synced, and they
                // cannot be answered truthfully. Stop; the restart recovers
                // exactly what is durable.
                tracing::error!("the sync thread is gone: stopping");
                std::process::abort();
            }
        }
        // Dropping the sender ends the syncer once it has answered the rest.
    });
}

/// Makes committed batches durable in commit order, one `fdatasync` for
/// all that are waiting, then answers their callers.
fn syncer_loop<S: Store>(batches: &Batches<'_, S>, pending: &mpsc::Receiver<Pending>) {
    while let Ok(first) = pending.recv() {
        let mut group = vec![first];
        while let Ok(more) = pending.try_recv() {
            group.push(more);
        }
        for batch in group {
            // Events and statistics are recorded before any caller is
            // answered, so a caller that saw its answer also sees its batch
            // counted.
            match batches.store.sync(batch.sync) {
                Ok(()) => {
                    batches.committed(batch.count, batch.started.elapsed(), batch.events);
                    for job in batch.jobs {
                        job.settle(Ok(()));
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "batch not durable; its callers are refused");
                    fail_all(
                        batches,
                        batch.jobs,
                        batch.count,
                        error,
                        batch.started.elapsed(),
                    );
                }
            }
        }
    }
}

/// Answers every caller of a failed batch with `error` (its events are
/// dropped with it).
fn fail_all<S: Store>(
    batches: &Batches<'_, S>,
    jobs: Vec<Job>,
    count: usize,
    error: StoreError,
    commit_time: Duration,
) {
    batches.store.after_failure();
    batches.failed(count, commit_time);
    let error = Arc::new(error);
    for job in jobs {
        job.settle(Err(CommitError::Store(Arc::clone(&error))));
    }
}

/// How many times an operation is put off (its queue held by another
/// node's transaction, [`WriteTxn::prefetch`]) before its batch waits for
/// its queues' locks instead: no operation is put off for ever.
const PUT_OFF_ROUNDS: u32 = 3;

/// Jobs in arrival order, each with how many batches put it off so far.
#[derive(Default)]
struct PutOff {
    jobs: Vec<Job>,
    rounds: Vec<u32>,
}

impl PutOff {
    fn push(&mut self, job: Job, rounds: u32) {
        self.jobs.push(job);
        self.rounds.push(rounds);
    }

    fn append(&mut self, other: &mut PutOff) {
        self.jobs.append(&mut other.jobs);
        self.rounds.append(&mut other.rounds);
    }

    fn remove(&mut self, i: usize) -> Job {
        self.rounds.remove(i);
        self.jobs.remove(i)
    }

    /// Whether a job has been put off often enough that its batch waits.
    fn overdue(&self) -> bool {
        self.rounds.iter().any(|r| *r >= PUT_OFF_ROUNDS)
    }
}

/// A batch attempt's prefetch of what its jobs name (when they name any),
/// locking their queues on a store many nodes share; moves into `put_off`
/// the jobs that name a queue another node's transaction holds (in their
/// order, counted), unless `wait`.
fn prefetch(
    batch: &mut PutOff,
    put_off: &mut PutOff,
    txn: &mut dyn WriteTxn,
    wait: bool,
) -> Result<(), StoreError> {
    let mut hints: Vec<Hint> = Vec::new();
    for job in &batch.jobs {
        job.hints(&mut hints);
    }
    if hints.is_empty() {
        return Ok(());
    }
    let busy = txn.prefetch(&hints, wait)?;
    if busy.is_empty() {
        return Ok(());
    }
    let all = std::mem::take(batch);
    for (job, rounds) in all.jobs.into_iter().zip(all.rounds) {
        let mut named = Vec::new();
        job.hints(&mut named);
        if named.iter().any(|(rkid, _)| busy.contains(rkid)) {
            put_off.push(job, rounds + 1);
        } else {
            batch.push(job, rounds);
        }
    }
    Ok(())
}

/// A batch attempt's prelude, before its operations: the engine's prelude
/// at `now`.
fn run_prelude<S: Store>(
    batches: &Batches<'_, S>,
    txn: &mut dyn WriteTxn,
    now: Ms,
    events: &mut Tally,
) -> Result<(), StoreError> {
    match batches.engine {
        Some(engine) => engine.prelude(txn, now, events),
        None => Ok(()),
    }
}

/// Runs one batch in one write transaction and commits it visibly; returns
/// it for the syncer, or `None` when it failed (its callers are answered),
/// and the jobs put off to the next batch ([`prefetch`]). An operation
/// that meets damaged data is refused alone and the others run again
/// without it (module docs).
fn run_batch<S: Store>(batches: &Batches<'_, S>, batch: PutOff) -> (Option<Pending>, PutOff) {
    let mut put_off = PutOff::default();
    let pending = attempt_batch(batches, batch, &mut put_off);
    (pending, put_off)
}

fn attempt_batch<S: Store>(
    batches: &Batches<'_, S>,
    mut queued: PutOff,
    put_off: &mut PutOff,
) -> Option<Pending> {
    let store = batches.store;
    // Attempts the database aborted as conflicts (module docs).
    let mut conflicts = 0;
    let mut wait = queued.overdue();
    loop {
        // Jobs put off by an attempt that did not commit run in this one
        // (counted for each attempt that put them off).
        queued.append(put_off);
        let count = queued.jobs.len();
        if count == 0 {
            return None;
        }
        let mut txn = match store.begin_write() {
            Ok(txn) => txn,
            Err(error) => {
                // Jobs that never ran: dropping them drops their reply
                // senders, so their callers see `NotRun`.
                drop(queued);
                store.after_failure();
                batches.failed(count, Duration::ZERO);
                tracing::error!(%error, "write transaction could not begin");
                return None;
            }
        };
        let prelude = prefetch(&mut queued, put_off, &mut txn, wait);
        if prelude.is_ok() && queued.jobs.is_empty() {
            // Every queue it names is held by another node's transaction:
            // wait for them (in `rkid` order) rather than spin.
            drop(txn);
            wait = true;
            continue;
        }
        // One reading per attempt, once its queues are held: the batch's
        // linearization instant.
        let now = batches.batch_now(&txn);
        // The events of this attempt: published only if it becomes durable.
        let mut events = Tally::default();
        // The engine's constants are state of the transaction too (a
        // revision puts new ones in force for the rest of its batch): an
        // attempt that is dropped puts back those in force when it began,
        // so a re-run sees the state its operations first saw.
        let in_force = batches.engine.map(Engine::constants);
        let restore = || {
            if let (Some(engine), Some(constants)) = (batches.engine, in_force) {
                engine.set_constants(constants);
            }
        };
        let prelude = prelude.and_then(|()| run_prelude(batches, &mut txn, now, &mut events));
        let count = queued.jobs.len();
        if let Err(error) = prelude {
            drop(txn);
            restore();
            if again_after(&error, &mut conflicts) {
                continue;
            }
            tracing::error!(%error, "batch prelude failed; batch dropped");
            drop(queued);
            store.after_failure();
            batches.failed(count, Duration::ZERO);
            return None;
        }
        if let Some((i, error)) =
            run_jobs(batches.engine, &mut queued.jobs, &mut txn, now, &mut events)
        {
            // What this attempt did, its events and constants included, is
            // dropped.
            drop(txn);
            drop(events);
            restore();
            if matches!(error, StoreError::Corrupt(_)) {
                // Damaged data, met by this operation alone: refuse it, run
                // the others again without it.
                tracing::warn!(%error, "an operation met damaged data; it alone is refused");
                batches
                    .shared
                    .stats
                    .isolated_operations
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                queued
                    .remove(i)
                    .settle(Err(CommitError::Store(Arc::new(error))));
                continue;
            }
            if again_after(&error, &mut conflicts) {
                continue;
            }
            tracing::error!(%error, "operation failed; batch dropped");
            store.after_failure();
            batches.failed(count, Duration::ZERO);
            let error = Arc::new(error);
            // Those that ran, and the one that failed, get the error; jobs
            // after it never ran: dropping them tells their callers.
            for job in queued.jobs.drain(..=i) {
                job.settle(Err(CommitError::Store(Arc::clone(&error))));
            }
            return None;
        }
        let started = Instant::now();
        return match store.commit_deferred(txn) {
            Ok(sync) => Some(Pending {
                sync,
                events,
                jobs: queued.jobs,
                count,
                started,
            }),
            Err(error) => {
                restore();
                if again_after(&error, &mut conflicts) {
                    continue;
                }
                tracing::error!(%error, "commit failed; batch dropped");
                fail_all(batches, queued.jobs, count, error, started.elapsed());
                None
            }
        };
    }
}

/// Runs the jobs of an attempt in order, until one fails: its index and
/// error.
fn run_jobs(
    engine: Option<&Engine>,
    batch: &mut [Job],
    txn: &mut dyn WriteTxn,
    now: Ms,
    events: &mut Tally,
) -> Option<(usize, StoreError)> {
    batch
        .iter_mut()
        .enumerate()
        .find_map(|(i, job)| job.run(engine, txn, now, events).err().map(|e| (i, e)))
}

/// How many times a batch the database aborted as a conflict runs again
/// before its callers are refused.
pub const CONFLICT_RETRIES: u32 = 3;

/// Whether an attempt that failed with `error` runs again: a conflict
/// ([`StoreError::Conflict`]: nothing was written), at most
/// [`CONFLICT_RETRIES`] times per batch.
fn again_after(error: &StoreError, conflicts: &mut u32) -> bool {
    if !matches!(error, StoreError::Conflict(_)) || *conflicts >= CONFLICT_RETRIES {
        return false;
    }
    *conflicts += 1;
    tracing::debug!(%error, attempt = *conflicts, "the database aborted the batch as a conflict; running it again");
    true
}
