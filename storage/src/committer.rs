//! Group commit: one writer thread owns the write transaction.
//!
//! Operations are closures over a [`WriteTxn`]. The writer takes the first
//! waiting operation, then every operation that arrived meanwhile (up to
//! `max_batch`), runs a prelude (the engine's due transitions at this
//! batch's `now`), runs each operation in arrival order inside **one**
//! write transaction and commits it ([`Store::commit_deferred`]). A second
//! thread, the syncer, makes committed batches durable in commit order
//! ([`Store::sync`]: one `fdatasync` covers every batch waiting) and only
//! then answers their callers. So every answer (`admitted`, `rebound`,
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
//! without it (operations are `FnMut` for this: they may run more than
//! once, and only the last run's effects and result count). A failed
//! batch never costs another caller its answer because of one caller's
//! data. If an operation fails otherwise, or the prelude or the commit
//! fails, the whole transaction is dropped (nothing of it is durable or
//! visible) and every caller of the batch receives the error (those whose
//! operation never ran: [`CommitError::NotRun`]): a retriable answer
//! upstream, never a partial effect. The writer survives the error and
//! serves the next batch (a single I/O error never wedges the carrier).

use crate::{Ms, PendingSync, Store, StoreError, StoreResult, WriteTxn};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

type Completion = Box<dyn FnOnce(Result<(), Arc<StoreError>>) + Send>;

/// One run of a submitted operation: its completion, or its error.
type Run = Box<dyn FnMut(&mut dyn WriteTxn, Ms) -> Result<Completion, StoreError> + Send>;

/// A submitted operation: `run` (possibly more than once, see the module
/// docs) yields the completion that answers its caller; `fail` answers it
/// with an error instead. Dropped without either, its caller sees
/// [`CommitError::NotRun`].
struct Job {
    run: Run,
    fail: Box<dyn FnOnce(CommitError) + Send>,
}

/// The answer slot of one submitted operation, shared by its completion
/// and its failure path (whichever answers first).
type Reply<R> = Arc<std::sync::Mutex<Option<oneshot::Sender<Result<R, CommitError>>>>>;

fn answer<R>(reply: &Reply<R>, outcome: Result<R, CommitError>) {
    let sender = reply
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(sender) = sender {
        let _ = sender.send(outcome);
    }
}
/// The batch prelude: runs first in every write transaction, at the batch's
/// `now` (the engine applies the transitions due at `now` here).
pub type Prelude = Arc<dyn Fn(&mut dyn WriteTxn, Ms) -> StoreResult<()> + Send + Sync>;
/// The clock the writer reads once per batch (ms since the Unix epoch).
pub type ClockFn = Arc<dyn Fn() -> Ms + Send + Sync>;

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

/// What runs once a batch's fate is known: `true` when it became durable.
pub type Settle = Box<dyn FnOnce(bool) + Send>;
/// Called on the writer thread as each batch ends (committed or failed),
/// before the next one begins; what it returns runs once the batch's fate
/// is known, before its callers are answered. For state the batch's
/// operations staged on the writer thread (the engine's event tallies).
pub type BatchStage = Arc<dyn Fn() -> Settle + Send + Sync>;

/// Handle to the writer thread. Dropping every handle stops the writer
/// after it has drained the queued operations.
#[derive(Clone)]
pub struct Committer {
    jobs: mpsc::Sender<Job>,
    stats: Arc<CommitStats>,
    _thread: Arc<WriterThread>,
}

struct WriterThread(Option<JoinHandle<()>>);

impl Drop for WriterThread {
    fn drop(&mut self) {
        // The sender half held by the last Committer is dropped before this
        // runs, so the writer drains its queue and exits.
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

/// Upper bound on operations per batch: bounds the latency a batch adds and
/// the memory a write transaction holds.
pub const DEFAULT_MAX_BATCH: usize = 1024;

impl Committer {
    /// Starts the writer thread over `store`.
    ///
    /// # Errors
    /// [`StoreError::Io`] if the thread cannot be spawned.
    pub fn start<S: Store>(
        store: Arc<S>,
        clock: ClockFn,
        prelude: Prelude,
        max_batch: usize,
    ) -> StoreResult<Committer> {
        Committer::start_observed(
            store,
            clock,
            prelude,
            max_batch,
            Arc::new(|_| {}),
            Arc::new(|| Box::new(|_| {})),
        )
    }

    /// [`Committer::start`] with an `observer` told about every batch
    /// (metrics: batch size, commit latency) and a `stage` hook for what
    /// the batch's operations staged on the writer thread and must follow
    /// exactly the batches that became durable.
    ///
    /// # Errors
    /// [`StoreError::Io`] if the thread cannot be spawned.
    pub fn start_observed<S: Store>(
        store: Arc<S>,
        clock: ClockFn,
        prelude: Prelude,
        max_batch: usize,
        observer: BatchObserver,
        stage: BatchStage,
    ) -> StoreResult<Committer> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let stats = Arc::new(CommitStats::default());
        let thread_stats = Arc::clone(&stats);
        let handle = std::thread::Builder::new()
            .name("rltp-writer".into())
            .spawn(move || {
                writer_loop(
                    &*store,
                    &clock,
                    &prelude,
                    &queue,
                    max_batch.max(1),
                    &Observed {
                        stats: &thread_stats,
                        observer: &observer,
                        stage: &stage,
                    },
                )
            })?;
        Ok(Committer {
            jobs,
            stats,
            _thread: Arc::new(WriterThread(Some(handle))),
        })
    }

    /// Queues `op` for the next batch; the receiver yields its result after
    /// the batch is durable. `op` may run more than once (module docs):
    /// only the last run's effects and result count.
    pub fn submit<R, F>(&self, op: F) -> oneshot::Receiver<Result<R, CommitError>>
    where
        R: Send + 'static,
        F: FnMut(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        let reply: Reply<R> = Arc::new(std::sync::Mutex::new(Some(sender)));
        let on_failure = Arc::clone(&reply);
        let mut op = op;
        let job = Job {
            run: Box::new(move |txn, now| {
                let value = op(txn, now)?;
                let reply = Arc::clone(&reply);
                Ok(Box::new(move |outcome: Result<(), Arc<StoreError>>| {
                    answer(&reply, outcome.map(|()| value).map_err(CommitError::Store));
                }) as Completion)
            }),
            fail: Box::new(move |error| answer(&on_failure, Err(error))),
        };
        // If the writer is gone the job (and its reply sender) is dropped and
        // the receiver reports `Closed`.
        let _ = self.jobs.send(job);
        receiver
    }

    /// Runs `op` in the next batch and blocks until it is durable.
    ///
    /// # Errors
    /// [`CommitError`] if the batch failed or the writer stopped.
    pub fn execute<R, F>(&self, op: F) -> Result<R, CommitError>
    where
        R: Send + 'static,
        F: FnMut(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
    {
        self.submit(op)
            .blocking_recv()
            .unwrap_or(Err(CommitError::NotRun))
    }

    /// Runs `op` in the next batch and awaits its durable result.
    ///
    /// # Errors
    /// [`CommitError`] if the batch failed or the writer stopped.
    pub async fn run<R, F>(&self, op: F) -> Result<R, CommitError>
    where
        R: Send + 'static,
        F: FnMut(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
    {
        self.submit(op).await.unwrap_or(Err(CommitError::NotRun))
    }

    /// Writer statistics.
    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }
}

/// Where a batch's outcome is recorded: the counters and the observer.
struct Observed<'a> {
    stats: &'a CommitStats,
    observer: &'a BatchObserver,
    stage: &'a BatchStage,
}

impl Observed<'_> {
    /// A batch that failed on the writer thread: its staged state is dropped.
    fn failed_here(&self, operations: usize, commit_time: Duration) {
        (self.stage)()(false);
        self.failed(operations, commit_time);
    }

    fn failed(&self, operations: usize, commit_time: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.failed_batches.fetch_add(1, Relaxed);
        (self.observer)(&BatchReport {
            operations,
            committed: false,
            commit_time,
        });
    }

    fn committed(&self, operations: usize, commit_time: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.batches.fetch_add(1, Relaxed);
        self.stats.operations.fetch_add(operations as u64, Relaxed);
        (self.observer)(&BatchReport {
            operations,
            committed: true,
            commit_time,
        });
    }
}

/// Batches committed but not yet durable that may wait for the syncer,
/// besides the group it is syncing (bounds what is visible before it is
/// durable).
const SYNC_DEPTH: usize = 4;

/// A committed batch on its way to durability.
struct Pending {
    sync: PendingSync,
    settle: Settle,
    completions: Vec<Completion>,
    count: usize,
    started: Instant,
}

fn writer_loop<S: Store>(
    store: &S,
    clock: &ClockFn,
    prelude: &Prelude,
    queue: &mpsc::Receiver<Job>,
    max_batch: usize,
    stats: &Observed<'_>,
) {
    std::thread::scope(|scope| {
        let (to_syncer, pending) = mpsc::sync_channel::<Pending>(SYNC_DEPTH);
        let syncer = std::thread::Builder::new()
            .name("rltp-sync".into())
            .spawn_scoped(scope, move || syncer_loop(store, &pending, stats));
        if let Err(error) = syncer {
            tracing::error!(%error, "the sync thread could not start; the writer stops");
            return;
        }
        while let Ok(first) = queue.recv() {
            let mut batch = vec![first];
            while batch.len() < max_batch {
                match queue.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            if let Some(committed) = run_batch(store, clock, prelude, batch, stats)
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
fn syncer_loop<S: Store>(store: &S, pending: &mpsc::Receiver<Pending>, stats: &Observed<'_>) {
    while let Ok(first) = pending.recv() {
        let mut group = vec![first];
        while let Ok(more) = pending.try_recv() {
            group.push(more);
        }
        for batch in group {
            // Statistics are recorded before any caller is answered, so a
            // caller that saw its answer also sees its batch counted.
            let synced = store.sync(batch.sync);
            (batch.settle)(synced.is_ok());
            match synced {
                Ok(()) => {
                    stats.committed(batch.count, batch.started.elapsed());
                    for completion in batch.completions {
                        completion(Ok(()));
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "batch not durable; its callers are refused");
                    fail_all(
                        store,
                        stats,
                        batch.completions,
                        batch.count,
                        error,
                        batch.started.elapsed(),
                    );
                }
            }
        }
    }
}

/// Answers every caller of a failed batch with `error` (its staged state
/// already settled).
fn fail_all<S: Store>(
    store: &S,
    stats: &Observed<'_>,
    completions: Vec<Completion>,
    count: usize,
    error: StoreError,
    commit_time: Duration,
) {
    store.after_failure();
    stats.failed(count, commit_time);
    let error = Arc::new(error);
    for completion in completions {
        completion(Err(Arc::clone(&error)));
    }
}

/// Runs one batch in one write transaction and commits it visibly; returns
/// it for the syncer, or `None` when it failed (its callers are answered).
/// An operation that meets damaged data is refused alone and the others
/// run again without it (module docs).
fn run_batch<S: Store>(
    store: &S,
    clock: &ClockFn,
    prelude: &Prelude,
    mut batch: Vec<Job>,
    stats: &Observed<'_>,
) -> Option<Pending> {
    loop {
        let count = batch.len();
        if count == 0 {
            return None;
        }
        let mut txn = match store.begin_write() {
            Ok(txn) => txn,
            Err(error) => {
                // Jobs that never ran: dropping them drops their reply
                // senders, so their callers see `NotRun`.
                drop(batch);
                store.after_failure();
                stats.failed_here(count, Duration::ZERO);
                tracing::error!(%error, "write transaction could not begin");
                return None;
            }
        };
        let now = clock();
        if let Err(error) = prelude(&mut txn, now) {
            tracing::error!(%error, "batch prelude failed; batch dropped");
            drop(txn);
            drop(batch);
            store.after_failure();
            stats.failed_here(count, Duration::ZERO);
            return None;
        }
        let mut completions = Vec::with_capacity(count);
        let mut failure = None;
        for (i, job) in batch.iter_mut().enumerate() {
            match (job.run)(&mut txn, now) {
                Ok(completion) => completions.push(completion),
                Err(error) => {
                    failure = Some((i, error));
                    break;
                }
            }
        }
        if let Some((i, error)) = failure {
            drop(txn);
            drop(completions);
            // What this attempt staged on the writer thread is dropped.
            (stats.stage)()(false);
            if matches!(error, StoreError::Corrupt(_)) {
                // Damaged data, met by this operation alone: refuse it, run
                // the others again without it.
                tracing::warn!(%error, "an operation met damaged data; it alone is refused");
                stats
                    .stats
                    .isolated_operations
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let job = batch.remove(i);
                (job.fail)(CommitError::Store(Arc::new(error)));
                continue;
            }
            tracing::error!(%error, "operation failed; batch dropped");
            store.after_failure();
            stats.failed(count, Duration::ZERO);
            let error = Arc::new(error);
            // Those that ran, and the one that failed, get the error; jobs
            // after it never ran: dropping them tells their callers.
            for job in batch.drain(..=i) {
                (job.fail)(CommitError::Store(Arc::clone(&error)));
            }
            return None;
        }
        let started = Instant::now();
        let committed = store.commit_deferred(txn);
        let settle = (stats.stage)();
        return match committed {
            Ok(sync) => Some(Pending {
                sync,
                settle,
                completions,
                count,
                started,
            }),
            Err(error) => {
                tracing::error!(%error, "commit failed; batch dropped");
                settle(false);
                fail_all(store, stats, completions, count, error, started.elapsed());
                None
            }
        };
    }
}
