//! The engine's test harness, with no thread and no shell: [`Carrier`] —
//! the engine over any `Store` with a manual clock, each operation one
//! step (one write transaction, committed before the call returns), in
//! the manner of quinn-proto's `tests/util.rs` `Pair`/`step` — and the
//! [`Harness`] over it. The vectors, keys, envelopes, store factories and
//! the exchanges every harness drives are `rltp-testkit`'s, shared with
//! the shell's driver tests.

#![allow(dead_code, clippy::unwrap_used, clippy::panic, missing_docs)]

use rand::SeedableRng;
use rand::rngs::StdRng;
use rltp_engine::{
    BudgetMeter, Collected, CollectedDeposit, Concluded, CounterSnapshot, Engine, EngineConfig,
    EngineConstants, EngineError, EventCounters, EventSnapshot, IssuedChallenge, Limits, Meter,
    Operation, SessionError, Tally,
};
use rltp_proofs::Ms;
use rltp_proofs::multikey::{Rkid, RkidText};
use rltp_proofs::proof::Purpose;
use rltp_storage::{
    DeclarationRecord, DepositId, ReadTxn, Store, StoreError, StoreResult, WriteTxn,
};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::sync::Arc;

pub use rltp_testkit::*;

// ---------------------------------------------------------------------------
// The carrier, one step at a time
// ---------------------------------------------------------------------------

/// The engine, its store, its clock and its CSPRNG, with no thread: the
/// calls of the shell's `Driver` (`server/src/driver.rs`), each one
/// **step** — the work outside the writer (r1–r3, the s2 check,
/// challenges, status) at [`Carrier::now`], then at most one write
/// transaction (the batch prelude at `now`, then the operation), committed
/// before the call returns. The events of a committed step are counted, as
/// the shell's writer publishes them once durable; a failed step changes
/// nothing and puts back the constants in force before it.
pub struct Carrier<S: Store> {
    store: Arc<S>,
    engine: Engine,
    now: Cell<Ms>,
    rng: RefCell<StdRng>,
    events: EventCounters,
}

impl<S: Store> Carrier<S> {
    /// An engine over `store` at [`T0`], challenges drawn from a generator
    /// seeded with 0.
    pub fn new(
        store: Arc<S>,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Carrier<S> {
        Carrier {
            store,
            engine: Engine::new(carrier_id(), constants, config, meter),
            now: Cell::new(T0),
            rng: RefCell::new(StdRng::seed_from_u64(0)),
            events: EventCounters::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The manual clock's reading (ms).
    pub fn now(&self) -> Ms {
        self.now.get()
    }

    pub fn set_now(&self, now: Ms) {
        self.now.set(now);
    }

    pub fn constants(&self) -> EngineConstants {
        self.engine.constants()
    }

    pub fn set_limits(&self, limits: Limits) {
        self.engine.set_limits(limits);
    }

    pub fn counters(&self) -> CounterSnapshot {
        self.engine.counters()
    }

    /// Counts of the transitions of every committed step.
    pub fn events(&self) -> EventSnapshot {
        self.events.snapshot()
    }

    /// One write transaction at `now`: the prelude (the horizons due),
    /// then `op`, then the commit; its events are counted once committed.
    /// On any failure the transaction is dropped and the constants in
    /// force before it are put back (a revision is state of its
    /// transaction).
    pub fn step<R>(
        &self,
        op: impl FnOnce(&Engine, &mut dyn WriteTxn, Ms, &mut Tally) -> StoreResult<R>,
    ) -> StoreResult<R> {
        let in_force = self.engine.constants();
        let now = self.now();
        let mut tally = Tally::default();
        let outcome = self.store.begin_write().and_then(|mut txn| {
            self.engine.prelude(&mut txn, now, &mut tally)?;
            let out = op(&self.engine, &mut txn, now, &mut tally)?;
            self.store.commit(txn)?;
            Ok(out)
        });
        match outcome {
            Ok(out) => {
                self.events.add(tally);
                Ok(out)
            }
            Err(e) => {
                self.engine.set_constants(in_force);
                Err(e)
            }
        }
    }

    /// §5a.3 challenge at `now`, drawing from the seeded generator.
    pub fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
    ) -> Result<IssuedChallenge, SessionError> {
        let mut rng = self.rng.borrow_mut();
        self.engine
            .challenge(&*self.store, rkid, purpose, self.now(), &mut *rng)
    }

    /// r1–r3 at `now`.
    pub fn authorize(
        &self,
        proof: &[u8],
        operation: Operation,
    ) -> Result<rltp_engine::Authorized, SessionError> {
        self.engine
            .authorize(&*self.store, proof, operation, self.now())
    }

    /// §5a.3 register or rebind: r1–r3, then r4–r5 in one step.
    pub fn register(&self, proof: &[u8]) -> Result<Verdict, EngineError> {
        Ok(self.register_together(&[proof])?[0])
    }

    /// Registrations that arrived together: r1–r3 for each, then every
    /// authorized one decided in **one** step, in order, each against the
    /// state the ones before it left (the shell's writer batches
    /// registrations that race exactly so).
    pub fn register_together(&self, proofs: &[&[u8]]) -> Result<Vec<Verdict>, EngineError> {
        let mut decided = Vec::with_capacity(proofs.len());
        for proof in proofs {
            decided.push(match self.authorize(proof, Operation::Register) {
                Ok(authorized) => Ok(authorized),
                Err(SessionError::Unavailable(e)) => return Err(EngineError::Unavailable(e)),
                Err(denied) => Err(denied.verdict().unwrap_or(Verdict::Malformed)),
            });
        }
        if decided.iter().all(Result::is_err) {
            // Refused before the writer: no step runs.
            return Ok(decided.into_iter().filter_map(Result::err).collect());
        }
        Ok(self.step(|engine, txn, now, events| {
            decided
                .iter()
                .map(|d| match d {
                    Ok(authorized) => engine.register(txn, authorized, now, events),
                    Err(verdict) => Ok(*verdict),
                })
                .collect::<StoreResult<Vec<_>>>()
        })?)
    }

    /// §5a.7/§5a.8 collect: r1–r3, the page decided in one step, then its
    /// bytes read and checked after the commit (a damaged deposit is
    /// quarantined in a step of its own; the rest of the page is served).
    pub fn collect(
        &self,
        proof: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Collected, SessionError> {
        let authorized = self.authorize(proof, Operation::Collect)?;
        let rkid = *authorized.rkid();
        let page = self
            .step(|engine, txn, now, _| engine.collect(txn, &authorized, after, limit, now))?
            .map_err(SessionError::Refused)?;
        let mut deposits = Vec::with_capacity(page.deposits.len());
        for (d, bytes) in page.deposits {
            match bytes.read() {
                Ok(bytes) => deposits.push(CollectedDeposit {
                    seq: d.seq,
                    id: d.id,
                    bytes,
                    admitted_at: d.admitted_at,
                }),
                Err(StoreError::Corrupt(_)) => {
                    self.step(|engine, txn, now, events| {
                        engine.quarantine_if_damaged(txn, &rkid, d.seq, now, events)
                    })?;
                }
                Err(e) => return Err(SessionError::from(e)),
            }
        }
        Ok(Collected {
            deposits,
            more: page.more,
        })
    }

    /// §5a.8 conclude: r1–r3, then one step.
    pub fn conclude(&self, proof: &[u8], ids: &[DepositId]) -> Result<Concluded, SessionError> {
        let authorized = self.authorize(proof, Operation::Conclude)?;
        let ids: BTreeSet<DepositId> = ids.iter().copied().collect();
        self.step(|engine, txn, now, events| engine.conclude(txn, &authorized, &ids, now, events))?
            .map_err(SessionError::Refused)
    }

    /// §5a.5 submit: the s2 screen, then s1–s6 in one step.
    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, EngineError> {
        Ok(self.submit_together(&[(*rkid, bytes)])?[0])
    }

    /// Submissions that arrived together (a burst, or a race the writer
    /// batched): screened, then decided in **one** step, in order.
    pub fn submit_together(
        &self,
        items: &[(Rkid, &[u8])],
    ) -> Result<Vec<SubmitVerdict>, EngineError> {
        let submissions: Vec<_> = items
            .iter()
            .map(|(rkid, bytes)| self.engine.screen(&RkidText::of(rkid), bytes.to_vec()))
            .collect();
        Ok(self.step(|engine, txn, now, events| {
            submissions
                .iter()
                .map(|s| engine.submit(txn, s, now, events))
                .collect::<StoreResult<Vec<_>>>()
        })?)
    }

    /// §5a.8/§6.1 sender status at `now`.
    pub fn status(&self, rkid: &Rkid, id: &DepositId) -> Result<DepositStatus, EngineError> {
        let read = self.store.read()?;
        Ok(self.engine.status(&read, rkid, id, self.now())?)
    }

    /// The sweeper (§5a.9): a step that is only its prelude, then the
    /// housekeeping; returns the next due instant.
    pub fn sweep(&self) -> Result<Option<Ms>, EngineError> {
        let next = self.step(|_, txn, _, _| txn.next_due())?;
        self.engine.housekeeping(&*self.store, self.now())?;
        Ok(next)
    }

    /// §4.4: a declaration revision in one step.
    pub fn apply_constants(
        &self,
        constants: EngineConstants,
        record: Option<DeclarationRecord>,
    ) -> Result<(), EngineError> {
        self.step(|engine, txn, now, events| {
            engine.apply_constants(txn, constants, record.as_ref(), now, events)
        })?
    }
}

// ---------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------

pub struct Harness<S: Store> {
    pub carrier: Carrier<S>,
    pub meter: Arc<BudgetMeter>,
}

impl<S: Store> Harness<S> {
    pub fn new(store: Arc<S>) -> Harness<S> {
        Harness::with(store, constants(), unlimited())
    }

    pub fn with(store: Arc<S>, constants: EngineConstants, config: EngineConfig) -> Harness<S> {
        let meter = Arc::new(BudgetMeter::new());
        Harness {
            carrier: Carrier::new(store, constants, config, meter.clone()),
            meter,
        }
    }

    pub fn set_limits(&self, capacity_bytes: u64, max_bindings: u64) {
        self.carrier.set_limits(Limits {
            capacity_bytes,
            max_bindings,
        });
    }

    /// Submits envelopes summing to exactly `total` bytes; all admitted.
    pub fn fill(&self, rkid: &Rkid, total: usize, salt: &str) -> Vec<DepositId> {
        let max = rltp_proofs::envelope::MAX_ENVELOPE_BYTES
            .min(usize::try_from(self.carrier.constants().max_queue_bytes).unwrap());
        sizes_summing_to(total, max)
            .into_iter()
            .enumerate()
            .map(|(i, size)| {
                let bytes = envelope(rkid, size, &format!("{salt}/{i}"));
                assert_eq!(self.submit(rkid, &bytes), SubmitVerdict::Admitted);
                DepositId::of(&bytes)
            })
            .collect()
    }

    pub fn queue_bytes(&self, rkid: &Rkid) -> u64 {
        self.store().read().unwrap().queue_bytes(rkid).unwrap()
    }

    pub fn occupancy(&self) -> rltp_storage::Occupancy {
        self.store().read().unwrap().occupancy().unwrap()
    }

    /// Due-index entries naming `rkid`.
    pub fn due_for(&self, rkid: &Rkid) -> Vec<(u64, rltp_storage::Due)> {
        use rltp_storage::Due;
        self.store()
            .read()
            .unwrap()
            .due(u64::MAX, usize::MAX)
            .unwrap()
            .into_iter()
            .filter(|(_, d)| match d {
                Due::OrphanExpiry(r) | Due::Deadline(r) | Due::GiveUp(r, _) | Due::Forget(r, _) => {
                    r == rkid
                }
            })
            .collect()
    }

    pub fn challenges_live(&self) -> usize {
        self.carrier.store().challenge_count()
    }

    /// Drives `rkid` (bound under `principal` at `generation`) to
    /// `closing` by letting its orphan horizon pass; returns the deadline.
    pub fn wind_up(&self, rkid: &Rkid) -> u64 {
        let b = self.binding(rkid).unwrap();
        let c = self.carrier.constants();
        self.set(b.last_collection_at + c.orphan_horizon_ms);
        self.sweep();
        match self.binding(rkid).unwrap().phase {
            rltp_storage::Phase::Closing { deadline } => deadline,
            rltp_storage::Phase::Live => panic!("{rkid} did not enter closing"),
        }
    }

    /// Drives a closing `rkid` through its deadline to `released`.
    pub fn release(&self, rkid: &Rkid) {
        let deadline = match self.binding(rkid).map(|b| b.phase) {
            Some(rltp_storage::Phase::Closing { deadline }) => deadline,
            _ => self.wind_up(rkid),
        };
        if self.now() < deadline {
            self.set(deadline);
        }
        self.sweep();
        assert_eq!(self.state(rkid), rltp_engine::table::State::Released);
    }
}

// The engine alone, one step a call.
drive_through!(Harness.carrier, set: |h, now| h.carrier.set_now(now));
