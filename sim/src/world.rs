//! The carrier under test: the real engine over the real log store on a
//! simulated disk ([`FaultFs`]), a simulated clock, and the shell's call
//! sequence without its threads.
//!
//! One [`World::batch`] is what the shell's group-commit writer does with
//! one batch (`server/src/writer/mod.rs` `run_batch`, then its syncer): begin
//! a write transaction, prefetch the batch's hints, run the engine's
//! prelude at the batch's `now`, run each job in order, commit the
//! transaction visibly ([`Store::commit_deferred`]), make it durable
//! ([`Store::sync`]), and only then hand back the answers. The work the
//! shell does outside the writer (challenges, r1–r3, the s2 screen)
//! happens before, at the same `now`, as `server/src/driver.rs` does it.

use rand::rngs::StdRng;
use rltp_engine::{
    Authorized, BudgetMeter, Engine, EngineConfig, EngineConstants, IssuedChallenge, MeterKey,
    Operation, SessionError, Submission, Tally,
};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_proofs::{DepositId, Ms};
use rltp_storage::fault_fs::{CrashReport, FaultFs, Rng};
use rltp_storage::log_store::{LogOptions, LogStore};
use rltp_storage::{Deposit, Store, StoreError, StoreResult, WriteTxn};
use rltp_wire::{SubmitVerdict, Verdict};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// Where the store lives on the simulated disk.
const DIR: &str = "/carrier";

/// The carrier the simulated parties address (Identity §7a.2).
pub fn carrier_id() -> CarrierId {
    // A constant that parses: never fails.
    "did:web:carrier.example"
        .parse()
        .unwrap_or_else(|_| unreachable!("a valid carrier id"))
}

/// The constants the simulation runs under (§4.4): short horizons so that
/// wind-ups, give-ups and releases happen within a run, a small floor and
/// queue bound so that s5 and s6 decide often.
pub fn constants() -> EngineConstants {
    EngineConstants {
        orphan_horizon_ms: 60_000,
        give_up_horizon_ms: 30_000,
        challenge_lifetime_ms: 60_000,
        queue_floor: 4_096,
        max_queue_bytes: 12_288,
        max_binding_tombstones: 2,
        status_horizon_ms: 30_000,
    }
}

/// The private limits (§4.4 guarantee 2): room for four floors and a
/// little elastic space, at most four bindings.
pub fn config() -> EngineConfig {
    EngineConfig::new(4 * 4_096 + 6_000, 4).with_max_collect(8)
}

/// The shared submission budget a fresh engine starts with (§5a.5 s4):
/// small, so that traffic above the floors drains it (guarantee 5 says a
/// queue within its floor never notices).
pub const SHARED_BUDGET: u64 = 4;

/// The log store's tuning: tiny segments and snapshots, frequent redb
/// checkpoints, no background thread (the simulation takes snapshots and
/// housekeeping steps itself).
fn options(disk: &FaultFs) -> LogOptions {
    LogOptions {
        segment_bytes: 16 * 1024,
        snapshot_log_bytes: 32 * 1024,
        redb_checkpoint_ops: 16,
        compact_below_percent: 50,
        background: false,
        snapshot_at_close: false,
        fs: Arc::new(disk.clone()),
        ..LogOptions::default()
    }
}

/// One operation of a batch, as the shell hands it to the writer (after
/// r1–r3 or the s2 screen).
#[derive(Debug)]
pub enum Job {
    /// §5a.3 r4–r5.
    Register(Authorized),
    /// §5a.5 s1–s6.
    Submit(Submission),
    /// §5a.7/§5a.8 collect, one page.
    Collect(Authorized),
    /// §5a.8 conclude.
    Conclude(Authorized, BTreeSet<DepositId>),
}

/// The answer of one job, with what the simulation saw inside the
/// transaction just before the engine decided (for guarantee 5).
#[derive(Debug)]
pub enum Answer {
    /// A registration's verdict.
    Registered(Verdict),
    /// A submission's verdict; the queue's bytes and whether it was held
    /// just before s1.
    Submitted {
        /// The verdict.
        verdict: SubmitVerdict,
        /// `queue_bytes` before the decision.
        before: u64,
        /// Whether the queue had a binding before the decision.
        held: bool,
    },
    /// A collect page: `(seq, id, bytes)`, or the refusal.
    Collected(Result<Vec<(u64, DepositId, Vec<u8>)>, Verdict>),
    /// A conclusion: deposits removed, or the refusal.
    Concluded(Result<usize, Verdict>),
}

/// The carrier under test.
pub struct World {
    disk: FaultFs,
    store: Option<LogStore>,
    engine: Engine,
    /// The simulated clock (ms): only the simulation moves it.
    pub now: Ms,
}

impl World {
    /// A fresh carrier on an empty simulated disk at `now`.
    ///
    /// # Errors
    /// A [`StoreError`] if the store cannot be created.
    pub fn new(now: Ms) -> StoreResult<World> {
        let disk = FaultFs::new();
        let store = LogStore::open_with(Path::new(DIR), options(&disk))?;
        Ok(World {
            disk,
            store: Some(store),
            engine: fresh_engine(),
            now,
        })
    }

    /// The store.
    ///
    /// # Errors
    /// [`StoreError::Closed`] between a crash and its restart (never seen
    /// by a caller: both happen in one step).
    pub fn store(&self) -> StoreResult<&LogStore> {
        self.store.as_ref().ok_or(StoreError::Closed)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// §5a.3 challenge at `now`, drawing from `rng`.
    ///
    /// # Errors
    /// As [`Engine::challenge`].
    pub fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
        rng: &mut StdRng,
    ) -> Result<IssuedChallenge, SessionError> {
        self.engine
            .challenge(self.store()?, rkid, purpose, self.now, rng)
    }

    /// r1–r3 at `now`.
    ///
    /// # Errors
    /// As [`Engine::authorize`].
    pub fn authorize(&self, proof: &[u8], op: Operation) -> Result<Authorized, SessionError> {
        self.engine.authorize(self.store()?, proof, op, self.now)
    }

    /// One batch, as the writer runs it (module docs). With
    /// `cut_before_sync`, the batch is committed visibly but the power is
    /// cut before its `fdatasync`: nothing is answered (`None`), and the
    /// caller crashes the disk next.
    ///
    /// # Errors
    /// A [`StoreError`]: the batch is dropped, nothing of it answered.
    pub fn batch(
        &mut self,
        jobs: &[Job],
        cut_before_sync: bool,
    ) -> StoreResult<Option<Vec<Answer>>> {
        let store = self.store.as_ref().ok_or(StoreError::Closed)?;
        let mut txn = store.begin_write()?;
        let hints: Vec<(Rkid, Option<DepositId>)> = jobs.iter().map(hint).collect();
        if !hints.is_empty() {
            txn.prefetch(&hints, false)?;
        }
        let mut events = Tally::default();
        self.engine.prelude(&mut txn, self.now, &mut events)?;
        let mut answers = Vec::with_capacity(jobs.len());
        let mut pages = Vec::new();
        for (at, job) in jobs.iter().enumerate() {
            let answer = run_job(&self.engine, &mut txn, job, self.now, &mut events)?;
            answers.push(match answer {
                Ran::Answer(answer) => answer,
                Ran::Page(page) => {
                    pages.push((at, page));
                    Answer::Collected(Ok(Vec::new()))
                }
            });
        }
        let pending = store.commit_deferred(txn)?;
        if cut_before_sync {
            return Ok(None);
        }
        store.sync(pending)?;
        // The pages' bytes are read after the commit, outside the writer,
        // as the shell reads them.
        for (at, page) in pages {
            let mut read = Vec::with_capacity(page.len());
            for (d, bytes) in page {
                read.push((d.seq, d.id, bytes.read()?));
            }
            answers[at] = Answer::Collected(Ok(read));
        }
        Ok(Some(answers))
    }

    /// The power is cut now: every write not covered by a completed sync is
    /// dropped, torn or kept, as `rng` decides; the carrier restarts on
    /// what is left (recovery runs), with a fresh engine.
    ///
    /// # Errors
    /// A [`StoreError`] if the store cannot be opened on the image.
    pub fn crash(&mut self, rng: &mut Rng) -> StoreResult<CrashReport> {
        let (image, report) = self.disk.crash(rng);
        drop(self.store.take());
        self.disk = image;
        self.reopen()?;
        Ok(report)
    }

    /// A clean restart: the store is closed and opened again.
    ///
    /// # Errors
    /// A [`StoreError`] if the store cannot be opened again.
    pub fn restart(&mut self) -> StoreResult<()> {
        drop(self.store.take());
        self.reopen()
    }

    fn reopen(&mut self) -> StoreResult<()> {
        self.store = Some(LogStore::open_with(Path::new(DIR), options(&self.disk))?);
        self.engine = fresh_engine();
        Ok(())
    }
}

/// A fresh engine (a restarted carrier keeps no meter state).
fn fresh_engine() -> Engine {
    let meter = Arc::new(BudgetMeter::new());
    meter.set_budget(MeterKey::SharedSubmission, SHARED_BUDGET);
    Engine::new(carrier_id(), constants(), config(), meter)
}

/// What a job will read (the writer's hint).
fn hint(job: &Job) -> (Rkid, Option<DepositId>) {
    match job {
        Job::Register(a) | Job::Collect(a) | Job::Conclude(a, _) => (*a.rkid(), None),
        Job::Submit(s) => (*s.rkid(), Some(s.id())),
    }
}

/// A collect page's deposits and where their bytes are.
type Page = Vec<(Deposit, rltp_storage::DeferredBytes)>;

/// What one job returned inside the transaction.
enum Ran {
    Answer(Answer),
    /// A served collect page, its bytes still to read after the commit.
    Page(Page),
}

/// Runs one job inside the batch's transaction.
fn run_job(
    engine: &Engine,
    txn: &mut dyn WriteTxn,
    job: &Job,
    now: Ms,
    events: &mut Tally,
) -> StoreResult<Ran> {
    Ok(Ran::Answer(match job {
        Job::Register(a) => Answer::Registered(engine.register(txn, a, now, events)?),
        Job::Submit(s) => {
            let before = txn.queue_bytes(s.rkid())?;
            let held = txn.binding(s.rkid())?.is_some();
            let verdict = engine.submit(txn, s, now, events)?;
            Answer::Submitted {
                verdict,
                before,
                held,
            }
        }
        Job::Collect(a) => match engine.collect(txn, a, None, usize::MAX, now)? {
            Ok(page) => return Ok(Ran::Page(page.deposits)),
            Err(verdict) => Answer::Collected(Err(verdict)),
        },
        Job::Conclude(a, ids) => Answer::Concluded(
            engine
                .conclude(txn, a, ids, now, events)?
                .map(|c| c.removed),
        ),
    }))
}
