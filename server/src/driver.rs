//! The [`Driver`]: the shell's handle on one carrier's engine. It owns
//! what the sans-IO engine ([`rltp_engine`]) must not — the store, the
//! clock, the operating system's CSPRNG and the group-commit
//! [`Writer`] thread — and gives the server, the admin tools and the
//! engine tests one call per operation, answered only after its commit is
//! durable.
//!
//! Each operation reads the clock once, on the caller's thread for the
//! work that runs outside the writer (r1–r3, the s2 check, challenges,
//! status) — the writer reads it once per batch for the rest — and hands
//! the engine that `now`. The engine's rules live in the engine crate;
//! nothing here decides anything.
//!
//! ## Errors
//! A store or commit failure changes nothing and is not a verdict: every
//! operation answers it as [`EngineError::Unavailable`] /
//! [`SessionError::Unavailable`], which the server sends as the retriable
//! transport-level `unavailable` (`PROTOCOL.md` §6).

use crate::clock::Clock;
use crate::writer::{BatchObserver, CommitError, CommitStats, Job, Ticket, Writer};
use rand::SeedableRng;
use rltp_engine::{
    CollectPage, Collected, CollectedDeposit, Concluded, CounterSnapshot, Engine, EngineConfig,
    EngineConstants, EngineError, EventSnapshot, IssuedChallenge, Limits, Meter, Operation,
    SessionError, WatchPage,
};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_proofs::proof::Purpose;
use rltp_proofs::{DepositId, Ms};
use rltp_storage::{DeclarationRecord, Store, StoreError};
use rltp_wire::{DepositStatus, SubmitVerdict, Verdict};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

impl From<CommitError> for EngineError {
    fn from(e: CommitError) -> EngineError {
        EngineError::Unavailable(e.into_store_error())
    }
}

impl From<CommitError> for SessionError {
    fn from(e: CommitError) -> SessionError {
        SessionError::Unavailable(e.into_store_error())
    }
}

/// Where challenges draw their randomness.
#[derive(Clone)]
enum Randomness {
    /// The operating system's CSPRNG, through rand's thread generator.
    Os,
    /// A generator seeded by a test, for reproducible challenges.
    Seeded(Arc<Mutex<rand::rngs::StdRng>>),
}

/// The shell's handle on one carrier's engine over a store `S`.
///
/// Cheap to clone (one writer is shared); dropping the last clone stops
/// the writer after it has drained queued operations.
pub struct Driver<S: Store> {
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    engine: Arc<Engine>,
    writer: Writer,
    randomness: Randomness,
}

impl<S: Store> Clone for Driver<S> {
    fn clone(&self) -> Self {
        Driver {
            store: Arc::clone(&self.store),
            clock: Arc::clone(&self.clock),
            engine: Arc::clone(&self.engine),
            writer: self.writer.clone(),
            randomness: self.randomness.clone(),
        }
    }
}

impl<S: Store> std::fmt::Debug for Driver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl<S: Store> Driver<S> {
    /// Starts an engine over `store`, reading time from `clock`, answering
    /// as the carrier `carrier` (Identity §7a.2), enforcing `constants`
    /// (§4.4) and the private `config`, metering with `meter`; its writer
    /// batches at most [`crate::defaults::MAX_BATCH`] operations.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the writer thread cannot start.
    pub fn start(
        store: Arc<S>,
        clock: Arc<dyn Clock>,
        carrier: CarrierId,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Result<Driver<S>, EngineError> {
        let engine = Arc::new(Engine::new(carrier, constants, config, meter));
        let writer = Writer::start(
            Arc::clone(&store),
            Arc::clone(&clock),
            Some(Arc::clone(&engine)),
            crate::defaults::MAX_BATCH,
        )
        .map_err(StoreError::Io)?;
        Ok(Driver {
            store,
            clock,
            engine,
            writer,
            randomness: Randomness::Os,
        })
    }

    /// The same driver drawing challenges from a generator seeded with
    /// `seed` instead of the operating system's (tests that want
    /// reproducible challenges).
    pub fn with_seeded_randomness(mut self, seed: u64) -> Driver<S> {
        self.randomness = Randomness::Seeded(Arc::new(Mutex::new(
            rand::rngs::StdRng::seed_from_u64(seed),
        )));
        self
    }

    /// The engine (its rules and in-memory state).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The constants in force (§4.4 guarantee 1).
    pub fn constants(&self) -> EngineConstants {
        self.engine.constants()
    }

    /// The private limits in force (§4.4 guarantee 2).
    pub fn limits(&self) -> Limits {
        self.engine.limits()
    }

    /// Replaces the private limits ([`Engine::set_limits`]).
    pub fn set_limits(&self, limits: Limits) {
        self.engine.set_limits(limits);
    }

    /// The guarantee-3 work counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.engine.counters()
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The meter.
    pub fn meter(&self) -> &Arc<dyn Meter> {
        self.engine.meter()
    }

    /// The writer's batch statistics.
    pub fn commit_stats(&self) -> &CommitStats {
        self.writer.stats()
    }

    /// Counts of durable transitions since start (wind-ups, releases,
    /// evictions, deposits given up, concluded and quarantined; see
    /// [`rltp_engine::events`]).
    pub fn events(&self) -> EventSnapshot {
        self.writer.events()
    }

    /// Installs an observer told about every group-commit batch
    /// ([`Writer::observe_batches`]).
    pub fn observe_batches(&self, observer: BatchObserver) -> bool {
        self.writer.observe_batches(observer)
    }

    /// The clock's reading now (ms).
    pub fn now(&self) -> Ms {
        self.clock.now()
    }

    /// The §5a.5 s2 size bound in force ([`Engine::envelope_bound`]).
    pub fn envelope_bound(&self) -> usize {
        self.engine.envelope_bound()
    }

    /// Commits one transaction that changes nothing (it runs the batch
    /// prelude like any other): proves that the writer is alive and the
    /// store writable (`/readyz`).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the batch failed or the writer stopped.
    pub async fn probe_write(&self) -> Result<(), EngineError> {
        Ok(self.writer.submit(Job::probe()).answer().await?)
    }

    /// §5a.3 challenge ([`Engine::challenge`]) at the clock's now.
    ///
    /// # Errors
    /// As [`Engine::challenge`].
    pub fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
    ) -> Result<IssuedChallenge, SessionError> {
        let now = self.clock.now();
        let store = &*self.store;
        match &self.randomness {
            Randomness::Os => self
                .engine
                .challenge(store, rkid, purpose, now, &mut rand::rng()),
            Randomness::Seeded(rng) => {
                let mut rng = rng.lock().unwrap_or_else(PoisonError::into_inner);
                self.engine.challenge(store, rkid, purpose, now, &mut *rng)
            }
        }
    }

    /// r1–r3 ([`Engine::authorize`]) at the clock's now.
    fn authorize(
        &self,
        proof_bytes: &[u8],
        operation: Operation,
    ) -> Result<rltp_engine::Authorized, SessionError> {
        self.engine
            .authorize(&*self.store, proof_bytes, operation, self.clock.now())
    }

    /// §5a.3 register or rebind: r1–r3 now ([`Engine::authorize`]), then
    /// r4–r5 in the writer ([`Engine::register`]). Returns the exact
    /// verdict, answered only after the commit is durable.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store failed (nothing changed).
    pub fn register(&self, proof_bytes: &[u8]) -> Result<Verdict, EngineError> {
        match self.authorize(proof_bytes, Operation::Register) {
            Ok(authorized) => Ok(self.writer.submit(Job::register(authorized)).wait()?),
            Err(denied) => denied_registration(denied),
        }
    }

    /// [`Driver::register`] for async callers: r1–r3 run on the caller's
    /// thread, then the commit is awaited without blocking it.
    ///
    /// # Errors
    /// As [`Driver::register`].
    pub async fn register_async(&self, proof_bytes: &[u8]) -> Result<Verdict, EngineError> {
        match self.authorize(proof_bytes, Operation::Register) {
            Ok(authorized) => Ok(self
                .writer
                .submit(Job::register(authorized))
                .answer()
                .await?),
            Err(denied) => denied_registration(denied),
        }
    }

    /// §5a.7/§5a.8 collect, its first half: r1–r3 now
    /// ([`Engine::authorize`]), then the page handed to the writer
    /// ([`Job::collect`]) before this returns. Await it with
    /// [`QueuedCollect::page`] (no thread is held through its fsync), then
    /// read its bytes with [`Driver::read_page`].
    ///
    /// # Errors
    /// [`SessionError::Refused`] with `refused(malformed)`,
    /// `refused(admission-resource)` or `refused(possession-failed)`;
    /// [`SessionError::Unavailable`].
    pub fn collect_queued(
        &self,
        proof_bytes: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<QueuedCollect, SessionError> {
        let authorized = self.authorize(proof_bytes, Operation::Collect)?;
        let (rkid, principal) = (*authorized.rkid(), authorized.principal());
        let page = self.writer.submit(Job::collect(authorized, after, limit));
        Ok(QueuedCollect {
            rkid,
            principal,
            page,
        })
    }

    /// §5a.7/§5a.8 collect ([`Engine::collect`]), blocking this thread
    /// until the page is durable, then reading its bytes.
    ///
    /// # Errors
    /// As [`Driver::collect_queued`], and `refused(no-such-queue)`.
    pub fn collect(
        &self,
        proof_bytes: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Collected, SessionError> {
        let queued = self.collect_queued(proof_bytes, after, limit)?;
        let rkid = queued.rkid;
        let page = queued.page.wait()?.map_err(SessionError::Refused)?;
        self.read_page(&rkid, page)
    }

    /// The bytes of a page of `rkid`'s queue, read and checked here,
    /// outside the writer (file reads: call it off an async runtime's
    /// threads). A deposit whose bytes fail their check is given up at once
    /// (a [`Job::quarantine`]); the rest of the page is served.
    ///
    /// # Errors
    /// [`SessionError::Unavailable`] if the store fails.
    pub fn read_page(&self, rkid: &Rkid, page: CollectPage) -> Result<Collected, SessionError> {
        let mut deposits = Vec::with_capacity(page.deposits.len());
        for (d, bytes) in page.deposits {
            match bytes.read() {
                Ok(bytes) => deposits.push(CollectedDeposit {
                    seq: d.seq,
                    id: d.id,
                    bytes,
                    admitted_at: d.admitted_at,
                }),
                // Given up at once; the rest of the page is served.
                Err(StoreError::Corrupt(_)) => {
                    self.writer.submit(Job::quarantine(*rkid, d.seq)).wait()?;
                }
                Err(e) => return Err(SessionError::from(e)),
            }
        }
        Ok(Collected {
            deposits,
            more: page.more,
        })
    }

    /// §5a.8 conclude, its first half: r1–r3 now ([`Engine::authorize`]),
    /// then the conclusion handed to the writer ([`Job::conclude`]) before
    /// this returns; its [`Ticket`] answers once durable.
    ///
    /// # Errors
    /// As [`Driver::collect_queued`].
    pub fn conclude_queued(
        &self,
        proof_bytes: &[u8],
        ids: &[DepositId],
    ) -> Result<Ticket<Result<Concluded, Verdict>>, SessionError> {
        let authorized = self.authorize(proof_bytes, Operation::Conclude)?;
        let ids: BTreeSet<DepositId> = ids.iter().copied().collect();
        Ok(self.writer.submit(Job::conclude(authorized, ids)))
    }

    /// §5a.8 conclude ([`Engine::conclude`]), blocking this thread until
    /// it is durable.
    ///
    /// # Errors
    /// As [`Driver::collect`].
    pub fn conclude(
        &self,
        proof_bytes: &[u8],
        ids: &[DepositId],
    ) -> Result<Concluded, SessionError> {
        self.conclude_queued(proof_bytes, ids)?
            .wait()?
            .map_err(SessionError::Refused)
    }

    /// §5a.5 submit ([`Engine::screen`] now, [`Engine::submit`] in the
    /// writer), answered only after the deposit is durable.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store failed: nothing was
    /// admitted, and it is not a verdict.
    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, EngineError> {
        let answers = self.submit_burst(vec![(RkidText::of(rkid), bytes.to_vec())]);
        // One answer per submission: never `None`.
        let answer = answers.wait().pop();
        answer.map_or(Err(CommitError::NotRun.into()), |(verdict, _)| verdict)
    }

    /// [`Driver::submit`] for async callers: awaits the durable commit
    /// without blocking a runtime thread. Also returns the deposit id
    /// ([`DepositId::of`] the bytes), so the caller need not hash again.
    pub async fn submit_async(
        &self,
        rkid: &RkidText,
        bytes: Vec<u8>,
    ) -> (Result<SubmitVerdict, EngineError>, DepositId) {
        let answer = self.submit_burst_async(vec![(*rkid, bytes)]).await.pop();
        // One answer per submission: never `None`.
        answer.unwrap_or_else(|| (Err(CommitError::NotRun.into()), DepositId::of(b"")))
    }

    /// Several submissions that arrived together (a burst of one
    /// `submit-stream`), screened here ([`Engine::screen`]: s2 and the
    /// deposit id) and decided in the writer as **one** job, in order, in
    /// one batch: each is its own §5a.5 decision against the state the
    /// ones before it left, exactly as if submitted one by one. Answered
    /// only once durable, one `(verdict, id)` per submission, in order; a
    /// store failure refuses the whole burst (nothing of it is durable).
    pub async fn submit_burst_async(
        &self,
        items: Vec<(RkidText, Vec<u8>)>,
    ) -> Vec<(Result<SubmitVerdict, EngineError>, DepositId)> {
        self.submit_burst(items).answers().await
    }

    /// [`Driver::submit_burst_async`], with the burst screened and handed
    /// to the writer **before this returns**: what is left is waiting for
    /// the durable answers ([`BurstAnswers`]). A caller holding many
    /// bursts in order (a `submit-stream`) awaits them one after another
    /// without a task of its own per burst (one wake-up per answer instead
    /// of two).
    pub fn submit_burst(&self, items: Vec<(RkidText, Vec<u8>)>) -> BurstAnswers {
        let submissions: Vec<_> = items
            .into_iter()
            .map(|(rkid, bytes)| self.engine.screen(&rkid, bytes))
            .collect();
        let ids: Vec<DepositId> = submissions.iter().map(|s| s.id()).collect();
        let verdicts = self.writer.submit(Job::submit(submissions));
        BurstAnswers { verdicts, ids }
    }

    /// §5a.5 for a submission announcing more than
    /// [`Driver::envelope_bound`] ([`Engine::submit_unread`]).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub async fn submit_unread_async(&self, rkid: &Rkid) -> Result<SubmitVerdict, EngineError> {
        self.writer
            .submit(Job::submit_unread(*rkid))
            .answer()
            .await
            .map_err(EngineError::from)
    }

    /// The next page of a watch session ([`Engine::watch_page`]) at the
    /// clock's now; damaged deposits it met are quarantined in the writer
    /// first, and nothing is returned before everything the snapshot saw is
    /// durable.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub fn watch_page(
        &self,
        rkid: &Rkid,
        principal: &[u8; 32],
        after: Option<u64>,
        limit: usize,
    ) -> Result<WatchPage, EngineError> {
        let now = self.clock.now();
        let page = {
            let read = self.store.read()?;
            self.engine
                .watch_page(&read, rkid, principal, after, limit, now)?
        };
        if let WatchPage::Deposits { deposits, damaged } = &page {
            for &seq in damaged {
                self.quarantine_if_damaged(rkid, seq)?;
            }
            if !deposits.is_empty() {
                self.store.sync_visible()?;
            }
        }
        Ok(page)
    }

    /// Quarantines held deposit `seq` of `rkid` if its stored bytes fail
    /// their check ([`Engine::quarantine_if_damaged`], in the writer).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub fn quarantine_if_damaged(&self, rkid: &Rkid, seq: u64) -> Result<bool, EngineError> {
        Ok(self.writer.submit(Job::quarantine(*rkid, seq)).wait()?)
    }

    /// §5a.8/§6.1 sender status ([`Engine::status`]) at the clock's now,
    /// answered only once everything the snapshot can see is durable
    /// ([`Store::sync_visible`]).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store cannot be read or synced.
    pub fn status(&self, rkid: &Rkid, id: &DepositId) -> Result<DepositStatus, EngineError> {
        let now = self.clock.now();
        let status = {
            let read = self.store.read()?;
            self.engine.status(&read, rkid, id, now)?
        };
        self.store.sync_visible()?;
        Ok(status)
    }

    /// The sweeper (§5a.9): one write transaction whose prelude applies
    /// every transition due at the batch's instant with no other traffic,
    /// then the housekeeping ([`Engine::housekeeping`]) at the clock's now:
    /// challenges and meters are this node's own, stamped on its clock
    /// (on a shared database the batch's instant is the database's:
    /// `PROTOCOL.md` §13, "One clock"). Returns the next due instant (ms).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub fn sweep(&self) -> Result<Option<Ms>, EngineError> {
        // The batch's instant may be the database's (§13); challenges are
        // this node's own, so their housekeeping runs on its own clock.
        let (_, next) = self.writer.submit(Job::sweep()).wait()?;
        self.engine.housekeeping(&*self.store, self.clock.now())?;
        Ok(next)
    }

    /// Puts `constants` in force from the next batch on, as the
    /// constants of a revision another writer of the same store already
    /// applied and stored (another carrier node on a shared database,
    /// `PROTOCOL.md` §13): what depends on them was re-derived in that
    /// writer's transaction, so this node only adopts them — inside a batch
    /// of its own writer, so no decision of a batch sees them change.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the batch failed (nothing changed).
    pub fn adopt_constants(&self, constants: EngineConstants) -> Result<(), EngineError> {
        Ok(self.writer.submit(Job::adopt_constants(constants)).wait()?)
    }

    /// §4.4: applies a declaration revision ([`Engine::apply_constants`])
    /// in the writer; if the batch fails, the previous constants stay in
    /// force.
    ///
    /// # Errors
    /// [`EngineError::Revision`] for an equivocation or a rollback (state
    /// kept); [`EngineError::Unavailable`] if the store fails.
    pub fn apply_constants(
        &self,
        constants: EngineConstants,
        record: Option<DeclarationRecord>,
    ) -> Result<(), EngineError> {
        let previous = self.engine.constants();
        let result = self
            .writer
            .submit(Job::apply_constants(constants, record))
            .wait();
        match result {
            Ok(outcome) => outcome,
            Err(e) => {
                self.engine.set_constants(previous);
                Err(e.into())
            }
        }
    }
}

/// A registration that ended before the writer: a refusal is its verdict;
/// a store failure is `unavailable`.
fn denied_registration(denied: SessionError) -> Result<Verdict, EngineError> {
    match denied {
        SessionError::Unavailable(e) => Err(EngineError::Unavailable(e)),
        denied => Ok(denied.verdict().unwrap_or(Verdict::Malformed)),
    }
}

/// A collect handed to the writer ([`Driver::collect_queued`]): the
/// session its proof authorized (parsed once, at r1) and the page to come.
pub struct QueuedCollect {
    /// The queue the proof names.
    pub rkid: Rkid,
    /// The control principal that signed it: a watch session's scope.
    pub principal: [u8; 32],
    page: Ticket<Result<CollectPage, Verdict>>,
}

impl std::fmt::Debug for QueuedCollect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedCollect")
            .field("rkid", &self.rkid)
            .finish_non_exhaustive()
    }
}

impl QueuedCollect {
    /// Awaits the page the writer decided, once it is durable, without
    /// holding a thread; its bytes are still to be read
    /// ([`Driver::read_page`]).
    ///
    /// # Errors
    /// `refused(no-such-queue)` and the rest of [`Driver::collect`]'s.
    pub async fn page(self) -> Result<CollectPage, SessionError> {
        self.page.answer().await?.map_err(SessionError::Refused)
    }
}

/// The answers of a burst handed to the writer ([`Driver::submit_burst`]):
/// one `(verdict, id)` per submission, in order, once durable.
#[derive(Debug)]
pub struct BurstAnswers {
    verdicts: Ticket<Vec<SubmitVerdict>>,
    ids: Vec<DepositId>,
}

impl BurstAnswers {
    /// Whether the answers are decided (awaiting them will not wait).
    pub fn is_ready(&self) -> bool {
        self.verdicts.is_ready()
    }

    /// Waits for the answers: each submission's verdict and deposit id;
    /// a store failure (or a writer that is gone) refuses all of them.
    pub async fn answers(self) -> Vec<(Result<SubmitVerdict, EngineError>, DepositId)> {
        pair(self.verdicts.answer().await, self.ids)
    }

    /// [`BurstAnswers::answers`], blocking this thread.
    pub fn wait(self) -> Vec<(Result<SubmitVerdict, EngineError>, DepositId)> {
        pair(self.verdicts.wait(), self.ids)
    }
}

/// Each submission's verdict with its id, or the burst's failure for each.
fn pair(
    verdicts: Result<Vec<SubmitVerdict>, CommitError>,
    ids: Vec<DepositId>,
) -> Vec<(Result<SubmitVerdict, EngineError>, DepositId)> {
    match verdicts {
        Ok(verdicts) => verdicts.into_iter().map(Ok).zip(ids).collect(),
        Err(e) => {
            let e = EngineError::from(e);
            ids.into_iter().map(|id| (Err(e.clone()), id)).collect()
        }
    }
}
