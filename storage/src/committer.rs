//! Group commit: one writer thread owns the write transaction.
//!
//! Operations are closures over a [`WriteTxn`]. The writer takes the first
//! waiting operation, then every operation that arrived meanwhile (up to
//! `max_batch`), runs a prelude (the engine's due transitions at this
//! batch's `now`), runs each operation in arrival order inside **one**
//! write transaction, commits it with fsync, and only then answers every
//! caller. Operations that arrive while a commit is in flight join the next
//! batch. So every answer (`admitted`, `rebound`, `concluded`, …) follows
//! its durable commit, and throughput scales with operations in flight
//! instead of with fsyncs.
//!
//! Every operation runs against the state left by the ones before it in the
//! same batch: the batch is a serial schedule, so each check-and-commit is
//! linearizable (§4.4, §5a.3 r5 compare-and-swap).
//!
//! If any operation or the commit fails with a [`StoreError`], the whole
//! transaction is dropped (nothing of it is durable or visible) and every
//! caller of the batch receives the error: a retriable refusal upstream,
//! never a partial effect. The writer survives the error and serves the
//! next batch (a single I/O error never wedges the carrier).

use crate::{Ms, Store, StoreError, StoreResult, WriteTxn};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

type Completion = Box<dyn FnOnce(Result<(), Arc<StoreError>>) + Send>;
type Job = Box<dyn FnOnce(&mut dyn WriteTxn, Ms) -> Result<Completion, StoreError> + Send>;
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

/// Called with every [`BatchReport`], on the writer thread: keep it short,
/// the next batch waits for it.
pub type BatchObserver = Arc<dyn Fn(&BatchReport) + Send + Sync>;

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
        Committer::start_observed(store, clock, prelude, max_batch, Arc::new(|_| {}))
    }

    /// [`Committer::start`] with an `observer` told about every batch
    /// (metrics: batch size, commit latency; and whatever must follow
    /// exactly the batches that became durable).
    ///
    /// # Errors
    /// [`StoreError::Io`] if the thread cannot be spawned.
    pub fn start_observed<S: Store>(
        store: Arc<S>,
        clock: ClockFn,
        prelude: Prelude,
        max_batch: usize,
        observer: BatchObserver,
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
    /// the batch is durable.
    pub fn submit<R, F>(&self, op: F) -> oneshot::Receiver<Result<R, CommitError>>
    where
        R: Send + 'static,
        F: FnOnce(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
    {
        let (reply, receiver) = oneshot::channel();
        let job: Job = Box::new(move |txn, now| {
            let value = op(txn, now)?;
            Ok(Box::new(move |outcome: Result<(), Arc<StoreError>>| {
                let _ = reply.send(outcome.map(|()| value).map_err(CommitError::Store));
            }) as Completion)
        });
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
        F: FnOnce(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
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
        F: FnOnce(&mut dyn WriteTxn, Ms) -> StoreResult<R> + Send + 'static,
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
}

impl Observed<'_> {
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

fn writer_loop<S: Store>(
    store: &S,
    clock: &ClockFn,
    prelude: &Prelude,
    queue: &mpsc::Receiver<Job>,
    max_batch: usize,
    stats: &Observed<'_>,
) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // Statistics are recorded inside `run_batch`, before any caller is
        // answered, so a caller that saw its answer also sees its batch counted.
        run_batch(store, clock, prelude, batch, stats);
    }
}

fn run_batch<S: Store>(
    store: &S,
    clock: &ClockFn,
    prelude: &Prelude,
    batch: Vec<Job>,
    stats: &Observed<'_>,
) {
    let count = batch.len();
    let fail_all = |completions: Vec<Completion>, error: StoreError, commit_time| {
        store.after_failure();
        stats.failed(count, commit_time);
        let error = Arc::new(error);
        for completion in completions {
            completion(Err(Arc::clone(&error)));
        }
    };
    let mut txn = match store.begin_write() {
        Ok(txn) => txn,
        Err(error) => {
            // Jobs that never ran: dropping them drops their reply senders,
            // so their callers see `NotRun`.
            drop(batch);
            store.after_failure();
            stats.failed(count, Duration::ZERO);
            tracing::error!(%error, "write transaction could not begin");
            return;
        }
    };
    let now = clock();
    if let Err(error) = prelude(&mut txn, now) {
        tracing::error!(%error, "batch prelude failed; batch dropped");
        drop(txn);
        drop(batch);
        store.after_failure();
        stats.failed(count, Duration::ZERO);
        return;
    }
    let mut completions = Vec::with_capacity(batch.len());
    let mut failure = None;
    let mut rest = batch.into_iter();
    for job in rest.by_ref() {
        match job(&mut txn, now) {
            Ok(completion) => completions.push(completion),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    // Jobs after a failure never ran; dropping them tells their callers.
    drop(rest);
    if let Some(error) = failure {
        drop(txn);
        tracing::error!(%error, "operation failed; batch dropped");
        fail_all(completions, error, Duration::ZERO);
        return;
    }
    let started = Instant::now();
    let committed = store.commit(txn);
    let commit_time = started.elapsed();
    match committed {
        Ok(()) => {
            stats.committed(count, commit_time);
            for completion in completions {
                completion(Ok(()));
            }
        }
        Err(error) => {
            tracing::error!(%error, "commit failed; batch dropped");
            fail_all(completions, error, commit_time);
        }
    }
}
