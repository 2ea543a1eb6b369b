//! The writer's jobs, typed: one variant per operation that runs inside
//! the writer's transaction, and the one `match` that runs each of them
//! in the engine (`Job::run`). To follow an operation from the driver
//! into the engine, read the variant's constructor (what the driver hands
//! over), then its arm in `Job::run` (what the writer calls), then the
//! engine function it names.
//!
//! A job's caller holds a [`Ticket`]: the typed answer, sent once the
//! job's batch is durable (or refused with a [`CommitError`]). A job may
//! run more than once (the writer re-runs a batch without an operation that
//! met damaged data, or after a database conflict: `writer` module docs);
//! only its last run's result is kept ([`Answer`]) and sent.

use super::CommitError;
use rltp_engine::{
    Authorized, CollectPage, Concluded, Engine, EngineConstants, EngineError, Submission, Tally,
};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::{DepositId, Ms};
use rltp_storage::{DeclarationRecord, StoreError, StoreResult, WriteTxn};
use rltp_wire::{SubmitVerdict, Verdict};
use std::collections::BTreeSet;
use tokio::sync::oneshot;

/// What an operation will read, said before its batch runs: the queue it
/// names and, for a submission, the deposit id s3 looks up. The batch's
/// hints go to the store at once ([`WriteTxn::prefetch`]), so a store whose
/// reads are round trips (PostgreSQL) makes one per batch, not several per
/// operation. A hint changes no answer.
pub type Hint = (Rkid, Option<DepositId>);

/// One writer job (module docs). Made by its constructor, which also
/// returns the caller's [`Ticket`]; handed over with
/// [`super::Writer::submit`].
#[non_exhaustive]
pub enum Job {
    /// §5a.3 r4–r5 of an authorized registration ([`Engine::register`]).
    Register {
        /// r1–r3 passed.
        authorized: Authorized,
        /// The verdict.
        answer: Answer<Verdict>,
    },
    /// §5a.5 s1–s6 of screened submissions, in order ([`Engine::submit`]):
    /// one, or a burst of one `submit-stream` that arrived together.
    Submit {
        /// Screened (s2 and the deposit id) by [`Engine::screen`].
        burst: Vec<Submission>,
        /// One verdict per submission, in order.
        answer: Answer<Vec<SubmitVerdict>>,
    },
    /// §5a.5 of a submission announcing more than the s2 bound
    /// ([`Engine::submit_unread`]).
    SubmitUnread {
        /// The queue it names.
        rkid: Rkid,
        /// The verdict.
        answer: Answer<SubmitVerdict>,
    },
    /// §5a.7/§5a.8 collect of an authorized session ([`Engine::collect`]).
    Collect {
        /// r1–r3 passed.
        authorized: Authorized,
        /// The last `seq` the recipient has.
        after: Option<u64>,
        /// The page size asked for.
        limit: usize,
        /// The page (bytes still to be read), or the refusal.
        answer: Answer<Result<CollectPage, Verdict>>,
    },
    /// §5a.8 conclude of an authorized session ([`Engine::conclude`]).
    Conclude {
        /// r1–r3 passed.
        authorized: Authorized,
        /// The deposits named.
        ids: BTreeSet<DepositId>,
        /// The outcome, or the refusal.
        answer: Answer<Result<Concluded, Verdict>>,
    },
    /// Gives up held deposit `seq` if its stored bytes fail their check
    /// ([`Engine::quarantine_if_damaged`]).
    Quarantine {
        /// Its queue.
        rkid: Rkid,
        /// Its `seq`.
        seq: u64,
        /// Whether it was given up.
        answer: Answer<bool>,
    },
    /// Nothing but the batch's prelude (§5a.9: the transitions due now):
    /// the sweeper's job. Answers the batch's instant and the next due one.
    Sweep {
        /// `(now, next due)`.
        answer: Answer<(Ms, Option<Ms>)>,
    },
    /// A transaction that changes nothing: the writer is alive and the
    /// store writable (`/readyz`).
    Probe {
        /// Done.
        answer: Answer<()>,
    },
    /// Puts constants another writer of the store already applied in
    /// force ([`Engine::set_constants`], `PROTOCOL.md` §13).
    AdoptConstants {
        /// The constants.
        constants: EngineConstants,
        /// Done.
        answer: Answer<()>,
    },
    /// §4.4: a declaration revision ([`Engine::apply_constants`]).
    ApplyConstants {
        /// The revision's constants.
        constants: EngineConstants,
        /// The signed revision to store.
        record: Option<DeclarationRecord>,
        /// Applied, or refused (equivocation, rollback).
        answer: Answer<Result<(), EngineError>>,
    },
    /// A store-level harness's own transaction (tests and the store
    /// benchmark drive a store through group commit without an engine).
    /// No carrier operation is one.
    Harness(Box<dyn HarnessJob>),
}

impl Job {
    /// A registration's r4–r5.
    pub fn register(authorized: Authorized) -> (Job, Ticket<Verdict>) {
        let (answer, ticket) = Answer::new();
        (Job::Register { authorized, answer }, ticket)
    }

    /// Screened submissions, decided in order.
    pub fn submit(burst: Vec<Submission>) -> (Job, Ticket<Vec<SubmitVerdict>>) {
        let (answer, ticket) = Answer::new();
        (Job::Submit { burst, answer }, ticket)
    }

    /// A submission decided without its body.
    pub fn submit_unread(rkid: Rkid) -> (Job, Ticket<SubmitVerdict>) {
        let (answer, ticket) = Answer::new();
        (Job::SubmitUnread { rkid, answer }, ticket)
    }

    /// A collect page.
    pub fn collect(
        authorized: Authorized,
        after: Option<u64>,
        limit: usize,
    ) -> (Job, Ticket<Result<CollectPage, Verdict>>) {
        let (answer, ticket) = Answer::new();
        let job = Job::Collect {
            authorized,
            after,
            limit,
            answer,
        };
        (job, ticket)
    }

    /// A conclusion.
    pub fn conclude(
        authorized: Authorized,
        ids: BTreeSet<DepositId>,
    ) -> (Job, Ticket<Result<Concluded, Verdict>>) {
        let (answer, ticket) = Answer::new();
        let job = Job::Conclude {
            authorized,
            ids,
            answer,
        };
        (job, ticket)
    }

    /// A damaged deposit's quarantine.
    pub fn quarantine(rkid: Rkid, seq: u64) -> (Job, Ticket<bool>) {
        let (answer, ticket) = Answer::new();
        (Job::Quarantine { rkid, seq, answer }, ticket)
    }

    /// The sweeper's batch.
    pub fn sweep() -> (Job, Ticket<(Ms, Option<Ms>)>) {
        let (answer, ticket) = Answer::new();
        (Job::Sweep { answer }, ticket)
    }

    /// The readiness probe.
    pub fn probe() -> (Job, Ticket<()>) {
        let (answer, ticket) = Answer::new();
        (Job::Probe { answer }, ticket)
    }

    /// Adopting another writer's constants.
    pub fn adopt_constants(constants: EngineConstants) -> (Job, Ticket<()>) {
        let (answer, ticket) = Answer::new();
        (Job::AdoptConstants { constants, answer }, ticket)
    }

    /// A declaration revision.
    pub fn apply_constants(
        constants: EngineConstants,
        record: Option<DeclarationRecord>,
    ) -> (Job, Ticket<Result<(), EngineError>>) {
        let (answer, ticket) = Answer::new();
        let job = Job::ApplyConstants {
            constants,
            record,
            answer,
        };
        (job, ticket)
    }

    /// A harness's own transaction body `run` (see [`Job::Harness`]).
    pub fn harness<R, F>(run: F) -> (Job, Ticket<R>)
    where
        R: Send + 'static,
        F: FnMut(&mut dyn WriteTxn, Ms, &mut Tally) -> StoreResult<R> + Send + 'static,
    {
        let (answer, ticket) = Answer::new();
        (Job::Harness(Box::new(FnJob { run, answer })), ticket)
    }

    /// What this job will read ([`Hint`]), appended to `hints`.
    pub(super) fn hints(&self, hints: &mut Vec<Hint>) {
        match self {
            Job::Register { authorized, .. }
            | Job::Collect { authorized, .. }
            | Job::Conclude { authorized, .. } => hints.push((*authorized.rkid(), None)),
            Job::Submit { burst, .. } => {
                hints.extend(burst.iter().map(|s| (*s.rkid(), Some(s.id()))));
            }
            Job::SubmitUnread { rkid, .. } => hints.push((*rkid, None)),
            Job::Quarantine { .. }
            | Job::Sweep { .. }
            | Job::Probe { .. }
            | Job::AdoptConstants { .. }
            | Job::ApplyConstants { .. }
            | Job::Harness(_) => {}
        }
    }

    /// Runs this job in `txn` at the batch's instant `now`, its events
    /// counted in `events`; its result is held for its caller until the
    /// batch is durable. A writer without an engine (a store harness) runs
    /// harness jobs only.
    ///
    /// # Errors
    /// The store's error (the writer decides what it costs the batch);
    /// [`StoreError::Closed`] for an engine job given to a writer without
    /// an engine.
    pub(super) fn run(
        &mut self,
        engine: Option<&Engine>,
        txn: &mut dyn WriteTxn,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<()> {
        if let Job::Harness(job) = self {
            return job.run(txn, now, events);
        }
        let engine = engine.ok_or(StoreError::Closed)?;
        match self {
            Job::Register { authorized, answer } => {
                answer.hold(engine.register(txn, authorized, now, events)?);
            }
            Job::Submit { burst, answer } => {
                let verdicts = burst
                    .iter()
                    .map(|s| engine.submit(txn, s, now, events))
                    .collect::<StoreResult<_>>()?;
                answer.hold(verdicts);
            }
            Job::SubmitUnread { rkid, answer } => answer.hold(engine.submit_unread(txn, rkid)?),
            Job::Collect {
                authorized,
                after,
                limit,
                answer,
            } => answer.hold(engine.collect(txn, authorized, *after, *limit, now)?),
            Job::Conclude {
                authorized,
                ids,
                answer,
            } => answer.hold(engine.conclude(txn, authorized, ids, now, events)?),
            Job::Quarantine { rkid, seq, answer } => {
                answer.hold(engine.quarantine_if_damaged(txn, rkid, *seq, now, events)?);
            }
            Job::Sweep { answer } => answer.hold((now, txn.next_due()?)),
            Job::Probe { answer } => answer.hold(txn.occupancy().map(drop)?),
            Job::AdoptConstants { constants, answer } => {
                engine.set_constants(*constants);
                answer.hold(());
            }
            Job::ApplyConstants {
                constants,
                record,
                answer,
            } => answer.hold(engine.apply_constants(
                txn,
                *constants,
                record.as_ref(),
                now,
                events,
            )?),
            Job::Harness(_) => {}
        }
        Ok(())
    }

    /// Answers this job's caller: with its held result once its batch is
    /// durable (`Ok`), or with the batch's error.
    pub(super) fn settle(self, outcome: Result<(), CommitError>) {
        let answer: Box<dyn Settle> = match self {
            Job::Register { answer, .. } => Box::new(answer),
            Job::Submit { answer, .. } => Box::new(answer),
            Job::SubmitUnread { answer, .. } => Box::new(answer),
            Job::Collect { answer, .. } => Box::new(answer),
            Job::Conclude { answer, .. } => Box::new(answer),
            Job::Quarantine { answer, .. } => Box::new(answer),
            Job::Sweep { answer } => Box::new(answer),
            Job::Probe { answer } | Job::AdoptConstants { answer, .. } => Box::new(answer),
            Job::ApplyConstants { answer, .. } => Box::new(answer),
            Job::Harness(job) => job,
        };
        answer.settle(outcome);
    }
}

/// A job's answer slot: the result of its last run, held until its batch
/// is durable, and the caller's end of the channel.
pub struct Answer<T> {
    held: Option<T>,
    reply: oneshot::Sender<Result<T, CommitError>>,
}

impl<T> Answer<T> {
    fn new() -> (Answer<T>, Ticket<T>) {
        let (reply, receiver) = oneshot::channel();
        (Answer { held: None, reply }, Ticket(receiver))
    }

    /// Keeps `value` as the answer (a later run replaces it).
    fn hold(&mut self, value: T) {
        self.held = Some(value);
    }
}

/// Sends a job's answer (one implementation for every [`Answer`] type).
pub trait Settle: Send {
    /// Sends the held result if `outcome` is `Ok`, else the error; a job
    /// that never ran is answered [`CommitError::NotRun`].
    fn settle(self: Box<Self>, outcome: Result<(), CommitError>);
}

impl<T: Send> Settle for Answer<T> {
    fn settle(self: Box<Self>, outcome: Result<(), CommitError>) {
        let answer = match (outcome, self.held) {
            (Ok(()), Some(value)) => Ok(value),
            (Ok(()), None) => Err(CommitError::NotRun),
            (Err(error), _) => Err(error),
        };
        // A caller that stopped waiting is not an error.
        let _ = self.reply.send(answer);
    }
}

/// A harness's transaction body with its answer ([`Job::Harness`]).
pub trait HarnessJob: Settle {
    /// Runs the body once (it may run more than once: module docs).
    ///
    /// # Errors
    /// The body's.
    fn run(&mut self, txn: &mut dyn WriteTxn, now: Ms, events: &mut Tally) -> StoreResult<()>;
}

struct FnJob<R, F> {
    run: F,
    answer: Answer<R>,
}

impl<R: Send, F: Send> Settle for FnJob<R, F> {
    fn settle(self: Box<Self>, outcome: Result<(), CommitError>) {
        Box::new(self.answer).settle(outcome);
    }
}

impl<R, F> HarnessJob for FnJob<R, F>
where
    R: Send,
    F: FnMut(&mut dyn WriteTxn, Ms, &mut Tally) -> StoreResult<R> + Send,
{
    fn run(&mut self, txn: &mut dyn WriteTxn, now: Ms, events: &mut Tally) -> StoreResult<()> {
        let value = (self.run)(txn, now, events)?;
        self.answer.hold(value);
        Ok(())
    }
}

/// The caller's end of a job: its typed answer once the job's batch is
/// durable, or why it was not made durable.
pub struct Ticket<T>(oneshot::Receiver<Result<T, CommitError>>);

impl<T> std::fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<T> Ticket<T> {
    /// Whether the answer is there (awaiting it will not wait).
    pub fn is_ready(&self) -> bool {
        !self.0.is_empty()
    }

    /// Awaits the answer without blocking a thread.
    ///
    /// # Errors
    /// [`CommitError`] if the batch failed or the writer stopped.
    pub async fn answer(self) -> Result<T, CommitError> {
        self.0.await.unwrap_or(Err(CommitError::NotRun))
    }

    /// Blocks this thread until the answer is there (callers outside an
    /// async runtime: admin tools, tests).
    ///
    /// # Errors
    /// As [`Ticket::answer`].
    pub fn wait(self) -> Result<T, CommitError> {
        self.0.blocking_recv().unwrap_or(Err(CommitError::NotRun))
    }
}
