//! The engine's operations: challenge, register/rebind, collect, conclude
//! (§5a.3 r1–r5), submit (§5a.5 s1–s6), sender status (§5a.8), sweep
//! (§5a.9) and declaration revisions (§4.4).
//!
//! ## Linearization
//! Every mutating decision — r4+r5, collect's `last_collection_at`,
//! conclude, s1–s6 with the append, sweeps, revisions — runs as **one
//! closure inside the committer's write transaction**. The committer
//! serializes closures and commits each batch once (fsync) before any
//! caller is answered, so r5 is a compare-and-swap by construction and
//! every bound is check-and-commit (`stateAtomicity`). The writer reads
//! the clock once per batch: that `now` is the linearization instant of
//! every operation in the batch, and the batch prelude first applies
//! every transition due at it ([`crate::engine::horizon`]).
//!
//! Key-free, state-free work runs on the caller's thread, outside the
//! writer: r1 parsing, the s2 shape check, r2 metering (against a read
//! snapshot), the challenge consumption and the Ed25519 verification of r3.
//!
//! ## Errors
//! A store or commit failure changes nothing and is not a verdict: every
//! operation answers it as [`EngineError::Unavailable`] /
//! [`SessionError::Unavailable`], which the server sends as the retriable
//! transport-level `unavailable` (`PROTOCOL.md` §6). It is never answered
//! as `refused(capacity)` or `registration-refused(capacity)`: those say
//! something about the carrier's occupancy, and §4.4 guarantee 5 forbids
//! the former to a queue below its floor.
//!
//! ## Damaged records
//! A held deposit whose stored bytes fail their check, met by collect, by
//! s3 or by a watch push, is **quarantined** ([`queue::quarantine`]): its
//! quarantine record is written and it is given up at once, so its sender's
//! status answers `given-up` (`failed(expired-by-adapter-policy)`, §5a.8,
//! §6.1) and a byte-identical resubmission is admitted afresh; the rest of
//! its queue is served in the same answer. The committer runs the other
//! operations of a batch again without an operation that failed on
//! damaged data (`rltp_storage::committer`), so nobody else's answer
//! depends on it.
//! Nothing here panics on input.

use crate::engine::binding::{self, Install};
use crate::engine::capacity::{self, Room};
use crate::engine::challenge::{self, CounterSnapshot, Counters, IssuedChallenge, Possession};
use crate::engine::clock::Clock;
use crate::engine::config::{EngineConfig, EngineConstants, Limits};
use crate::engine::events::{self, EventCounters, EventSnapshot};
use crate::engine::horizon;
use crate::engine::meter::{self, Meter, MeterKey};
use crate::engine::outcome::{Collected, CollectedDeposit, Concluded, EngineError, SessionError};
use crate::engine::queue;
use crate::engine::table::{self, Guard, Input, Outcome, State};
use crate::engine::verdict::{DepositStatus, SubmitVerdict, Verdict};
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, check_shape};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{self, CarrierProof, Purpose};
use rltp_storage::committer::{BatchObserver, BatchReport, CommitStats, Committer};
use rltp_storage::{
    DeclarationRecord, Departure, DepositId, Ms, Store, StoreError, StoreResult, WriteTxn,
};
use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock, Weak};

/// The state shared by the engine handle, its writer closures and the
/// batch prelude.
struct Shared<S> {
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    carrier: CarrierId,
    constants: RwLock<EngineConstants>,
    limits: RwLock<Limits>,
    meter: Arc<dyn Meter>,
    counters: Counters,
    events: EventCounters,
    batch_observer: std::sync::OnceLock<BatchObserver>,
    max_collect: usize,
}

impl<S> Shared<S> {
    fn constants(&self) -> EngineConstants {
        *self
            .constants
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_constants(&self, c: EngineConstants) {
        *self
            .constants
            .write()
            .unwrap_or_else(PoisonError::into_inner) = c;
    }

    fn limits(&self) -> Limits {
        *self.limits.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The carrier engine over a store `S` (§4.4, §5a): the sans-IO rules,
/// with a group-commit writer owning the store's write transactions.
///
/// Cheap to clone (one writer is shared); dropping the last clone stops
/// the writer after it has drained queued operations.
pub struct Engine<S: Store> {
    shared: Arc<Shared<S>>,
    committer: Committer,
}

impl<S: Store> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine {
            shared: Arc::clone(&self.shared),
            committer: self.committer.clone(),
        }
    }
}

impl<S: Store> std::fmt::Debug for Engine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("carrier", &self.shared.carrier)
            .field("constants", &self.shared.constants())
            .finish_non_exhaustive()
    }
}

/// Which operation a proof is presented to; its `purpose` must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Register,
    Collect,
    Conclude,
}

impl Operation {
    fn admits(self, purpose: Purpose) -> bool {
        match self {
            Operation::Register => purpose.changes_succession(),
            Operation::Collect => purpose == Purpose::Collect,
            Operation::Conclude => purpose == Purpose::Conclude,
        }
    }
}

/// Why r1–r3 did not pass.
enum Denied {
    Verdict(Verdict),
    Unavailable(rltp_storage::StoreError),
}

/// The presenter verdict of a table outcome (§5a.3); internal transitions
/// have none.
fn presenter_verdict(outcome: Outcome, held_generation: u64) -> Option<Verdict> {
    Some(match outcome {
        Outcome::Registered => Verdict::Registered,
        Outcome::RegisteredIdempotent => Verdict::RegisteredIdempotent,
        Outcome::Rebound => Verdict::Rebound,
        Outcome::Served => Verdict::Served,
        Outcome::NoSuchQueue => Verdict::NoSuchQueue,
        Outcome::StaleGeneration => Verdict::StaleGeneration {
            held: held_generation,
        },
        Outcome::WindUpBegins
        | Outcome::DischargedAndReleased
        | Outcome::Evicted
        | Outcome::CannotArise => return None,
    })
}

impl<S: Store> Engine<S> {
    /// Starts an engine over `store`, reading time from `clock`, answering
    /// as the carrier `carrier` (Identity §7a.2; proofs naming another
    /// carrier are `refused(malformed)`), enforcing `constants` (§4.4) and
    /// the private `config`, metering with `meter`.
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
    ) -> Result<Engine<S>, EngineError> {
        let shared = Arc::new(Shared {
            store: Arc::clone(&store),
            clock: Arc::clone(&clock),
            carrier,
            constants: RwLock::new(constants),
            limits: RwLock::new(Limits {
                capacity_bytes: config.capacity_bytes,
                max_bindings: config.max_bindings,
            }),
            meter,
            counters: Counters::default(),
            events: EventCounters::default(),
            batch_observer: std::sync::OnceLock::new(),
            max_collect: config.max_collect.max(1),
        });
        let prelude_shared = Arc::clone(&shared);
        // Weak: the writer thread must not keep the engine state alive.
        let observer_shared = Arc::downgrade(&shared);
        let stage_shared = Arc::downgrade(&shared);
        let committer = Committer::start_observed(
            store,
            Arc::new(move || clock.now()),
            Arc::new(move |txn: &mut dyn WriteTxn, now: Ms| {
                horizon::apply_due(txn, now, &prelude_shared.constants())
            }),
            config.max_batch,
            Arc::new(move |report: &BatchReport| {
                if let Some(shared) = observer_shared.upgrade()
                    && let Some(observer) = shared.batch_observer.get()
                {
                    observer(report);
                }
            }),
            Arc::new(move || {
                let tally = events::take();
                let shared = Weak::clone(&stage_shared);
                Box::new(move |durable: bool| {
                    if durable && let Some(shared) = shared.upgrade() {
                        shared.events.add(tally);
                    }
                })
            }),
        )?;
        Ok(Engine { shared, committer })
    }

    /// The constants in force (§4.4 guarantee 1).
    pub fn constants(&self) -> EngineConstants {
        self.shared.constants()
    }

    /// The private limits in force (§4.4 guarantee 2).
    pub fn limits(&self) -> Limits {
        self.shared.limits()
    }

    /// Replaces the private limits (an operator resizing the carrier);
    /// read by every later r4 and s6 decision. Lowering them below the
    /// held state makes the carrier refuse returns too, retriably, until
    /// room appears (see [`crate::engine::capacity`]).
    pub fn set_limits(&self, limits: Limits) {
        *self
            .shared
            .limits
            .write()
            .unwrap_or_else(PoisonError::into_inner) = limits;
    }

    /// The guarantee-3 work counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.shared.counters.snapshot()
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.shared.store
    }

    /// The meter.
    pub fn meter(&self) -> &Arc<dyn Meter> {
        &self.shared.meter
    }

    /// The writer's batch statistics.
    pub fn commit_stats(&self) -> &CommitStats {
        self.committer.stats()
    }

    /// Counts of durable transitions since start (wind-ups, releases,
    /// evictions, deposits given up and concluded; see
    /// [`crate::engine::events`]).
    pub fn events(&self) -> EventSnapshot {
        self.shared.events.snapshot()
    }

    /// Installs an observer told about every group-commit batch (size,
    /// commit time, outcome), on the writer thread before the batch's
    /// callers are answered. Only the first call installs one; returns
    /// whether this one did.
    pub fn observe_batches(&self, observer: BatchObserver) -> bool {
        self.shared.batch_observer.set(observer).is_ok()
    }

    /// The engine's clock reading now (ms).
    pub fn now(&self) -> Ms {
        self.shared.clock.now()
    }

    /// Commits one transaction that changes nothing (it runs the batch
    /// prelude like any other): proves that the writer is alive and the
    /// store writable (`/readyz`).
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the batch failed or the writer stopped.
    pub async fn probe_write(&self) -> Result<(), EngineError> {
        Ok(self
            .committer
            .run(|txn, _| txn.occupancy().map(drop))
            .await?)
    }

    /// §5a.3: issue a challenge for `(rkid, purpose)`. Order (§4.4
    /// guarantee 3): the `rkid` is already decoded (syntax), then the
    /// admission meter (r2, keyed per [`MeterKey::for_request`]), and
    /// only then randomness and, for `register`/`rebind`, sealing the
    /// address challenge to `rkid`. Lives `challenge-lifetime` ms.
    ///
    /// # Errors
    /// [`SessionError::Refused`] with `refused(admission-resource)`
    /// (retriable, no random draw or key operation spent), or
    /// `refused(possession-failed)` for an `rkid` nothing can be sealed to
    /// (a low-order point); [`SessionError::Unavailable`] if the store
    /// fails.
    pub fn challenge(
        &self,
        rkid: &Rkid,
        purpose: Purpose,
    ) -> Result<IssuedChallenge, SessionError> {
        let now = self.shared.clock.now();
        let c = self.shared.constants();
        let held = horizon::held_at(&self.shared.store.read()?, rkid, now, &c)?;
        if !self
            .shared
            .meter
            .check(&MeterKey::for_request(*rkid, held, purpose))
        {
            return Err(SessionError::Refused(Verdict::AdmissionResource));
        }
        challenge::issue(
            &*self.shared.store,
            &self.shared.counters,
            &self.shared.carrier,
            *rkid,
            purpose,
            now,
            c.challenge_lifetime_ms,
        )
        .map_err(|e| match e {
            challenge::IssueError::Unsealable | challenge::IssueError::Encoding => {
                SessionError::Refused(Verdict::PossessionFailed)
            }
            challenge::IssueError::Store(e) => SessionError::from(e),
        })
    }

    /// r1–r3 for `op`: parse, meter, consume the challenge and verify.
    fn authorize(&self, proof_bytes: &[u8], op: Operation) -> Result<CarrierProof, Denied> {
        // r1: syntax; a purpose presented to the wrong operation is not a
        // proof for it.
        let proof = match proof::parse(proof_bytes, self.shared.carrier.as_str()) {
            Ok(p) if op.admits(p.purpose()) => p,
            _ => return Err(Denied::Verdict(Verdict::Malformed)),
        };
        let now = self.shared.clock.now();
        let c = self.shared.constants();
        // r2: the carrier's own admission metering, guarantee 4 keyed.
        let held = self
            .shared
            .store
            .read()
            .and_then(|r| horizon::held_at(&r, proof.rkid(), now, &c))
            .map_err(Denied::Unavailable)?;
        if !self
            .shared
            .meter
            .check(&MeterKey::for_request(*proof.rkid(), held, proof.purpose()))
        {
            return Err(Denied::Verdict(Verdict::AdmissionResource));
        }
        // r3: consume first, then verify.
        match challenge::consume_and_verify(&*self.shared.store, &self.shared.counters, &proof, now)
        {
            Ok(Possession::Proven) => Ok(proof),
            Ok(Possession::Failed) => Err(Denied::Verdict(Verdict::PossessionFailed)),
            Err(e) => Err(Denied::Unavailable(e)),
        }
    }

    /// §5a.3 register or rebind (equivalent in effect): r1 syntax → r2
    /// admission → r3 both possession proofs → r4 capacity → r5 the state
    /// table, as one compare-and-swap. Returns the exact verdict:
    /// `registered`, `registered(idempotent)`, `rebound`,
    /// `refused(stale-generation)` carrying `g` or `t`,
    /// `refused(malformed)`, `refused(admission-resource)`,
    /// `refused(possession-failed)`, `registration-refused(capacity)`.
    /// Answered only after the commit is durable.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store failed (nothing changed;
    /// module docs, "Errors").
    pub fn register(&self, proof_bytes: &[u8]) -> Result<Verdict, EngineError> {
        match self.register_op(proof_bytes) {
            Ok(op) => Ok(self.committer.execute(op)?),
            Err(Denied::Verdict(verdict)) => Ok(verdict),
            Err(Denied::Unavailable(e)) => Err(e.into()),
        }
    }

    /// [`Engine::register`] for async callers: r1–r3 run on the caller's
    /// thread, then the commit is awaited without blocking it.
    ///
    /// # Errors
    /// As [`Engine::register`].
    pub async fn register_async(&self, proof_bytes: &[u8]) -> Result<Verdict, EngineError> {
        match self.register_op(proof_bytes) {
            Ok(op) => Ok(self.committer.run(op).await?),
            Err(Denied::Verdict(verdict)) => Ok(verdict),
            Err(Denied::Unavailable(e)) => Err(e.into()),
        }
    }

    /// r1–r3 now; r4–r5 as the returned writer operation (or why the
    /// registration ends before the writer).
    fn register_op(
        &self,
        proof_bytes: &[u8],
    ) -> Result<impl FnMut(&mut dyn WriteTxn, Ms) -> StoreResult<Verdict> + Send + 'static, Denied>
    {
        let proof = self.authorize(proof_bytes, Operation::Register)?;
        let rkid = *proof.rkid();
        let generation = proof.generation().unwrap_or(0);
        let principal = *proof.principal().as_bytes();
        let shared = Arc::clone(&self.shared);
        Ok(move |txn: &mut dyn WriteTxn, now: Ms| {
            let c = shared.constants();
            let held = binding::held(txn, &rkid)?;
            // r4: a return is refused only over the limits, an arrival
            // whenever it would not fit (a return outranks an arrival).
            let returning = matches!(held.state, State::Live | State::Closing);
            if capacity::registration_refused(
                &txn.occupancy()?,
                c.queue_floor,
                shared.limits(),
                returning,
            ) {
                return Ok(Verdict::RegistrationCapacity);
            }
            // r5: the table.
            let guard = Guard::of_registration((generation, &principal), held.record());
            let (outcome, next) = table::transition(held.state, Input::RegisterRebind, guard);
            let Some(verdict) = presenter_verdict(outcome, held.held_generation()) else {
                tracing::error!(?outcome, "register reached an internal cell");
                return Ok(Verdict::RegistrationCapacity);
            };
            if matches!(
                verdict,
                Verdict::Registered | Verdict::RegisteredIdempotent | Verdict::Rebound
            ) {
                let install = Install {
                    generation,
                    principal,
                    now,
                };
                binding::realize(txn, &rkid, &held, next, now, Some(install), &c)?;
            }
            Ok(verdict)
        })
    }

    /// Runs r1–r3 for a session operation, then `served` in the writer
    /// under the table's `collect / conclude` cells.
    fn session<R: Send + 'static>(
        &self,
        proof_bytes: &[u8],
        op: Operation,
        mut served: impl FnMut(
            &mut dyn WriteTxn,
            &Rkid,
            &rltp_storage::Binding,
            Ms,
            &EngineConstants,
        ) -> StoreResult<R>
        + Send
        + 'static,
    ) -> Result<R, SessionError> {
        let proof = match self.authorize(proof_bytes, op) {
            Ok(p) => p,
            Err(Denied::Verdict(v)) => return Err(SessionError::Refused(v)),
            Err(Denied::Unavailable(e)) => return Err(SessionError::from(e)),
        };
        let rkid = *proof.rkid();
        let principal = *proof.principal().as_bytes();
        let shared = Arc::clone(&self.shared);
        self.committer
            .execute(move |txn, now| {
                let c = shared.constants();
                let held = binding::held(txn, &rkid)?;
                let bound = held.binding.filter(|b| b.principal == principal);
                let (outcome, _) = table::collect_conclude(held.state, bound.is_some());
                match (outcome, bound) {
                    (Outcome::Served, Some(binding)) => {
                        served(txn, &rkid, &binding, now, &c).map(Ok)
                    }
                    _ => Ok(Err(presenter_verdict(outcome, held.held_generation())
                        .unwrap_or(Verdict::NoSuchQueue))),
                }
            })?
            .map_err(SessionError::Refused)
    }

    /// §5a.7/§5a.8 collect: r1–r3 (principal proof only), then — under the
    /// bound principal — the held deposits with `seq > after`, in
    /// admission order, at most `limit` (at least 1, capped by the configured page
    /// size), with their ids; `last_collection_at` moves to now (a live
    /// binding's orphan horizon restarts; a closing binding stays closing).
    /// Another principal's valid proof is `refused(no-such-queue)`.
    ///
    /// The writer decides the page; its bytes are read and checked after,
    /// outside the writer ([`ReadTxn::deposit_bytes_deferred`]: the log
    /// store hands out where they are), so a drain does not serialize on
    /// reading pages. A deposit whose bytes fail their check is
    /// quarantined in the writer, which judges them again; the rest of the
    /// page is served.
    ///
    /// # Errors
    /// [`SessionError::Refused`] with `refused(malformed)`,
    /// `refused(admission-resource)`, `refused(possession-failed)` or
    /// `refused(no-such-queue)`; [`SessionError::Unavailable`].
    pub fn collect(
        &self,
        proof_bytes: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Collected, SessionError> {
        let limit = limit.clamp(1, self.shared.max_collect);
        let (rkid, page, more) = self.session(
            proof_bytes,
            Operation::Collect,
            move |txn, rkid, binding, now, c| {
                let mut page = txn.deposits(rkid, after, limit.saturating_add(1))?;
                let more = page.len() > limit;
                page.truncate(limit);
                let page: Vec<_> = page
                    .into_iter()
                    .map(|d| {
                        let bytes = txn.deposit_bytes_deferred(rkid, &d);
                        (d, bytes)
                    })
                    .collect();
                binding::collected(txn, rkid, binding, now, c)?;
                Ok((*rkid, page, more))
            },
        )?;
        let mut deposits = Vec::with_capacity(page.len());
        for (d, bytes) in page {
            match bytes.read() {
                Ok(bytes) => deposits.push(CollectedDeposit {
                    seq: d.seq,
                    id: d.id,
                    bytes,
                    admitted_at: d.admitted_at,
                }),
                // Given up at once; the rest of the page is served.
                Err(StoreError::Corrupt(_)) => {
                    self.quarantine_if_damaged(&rkid, d.seq)
                        .map_err(|e| match e {
                            EngineError::Unavailable(e) => SessionError::Unavailable(e),
                            other => SessionError::Unavailable(Arc::new(StoreError::Engine(
                                other.to_string(),
                            ))),
                        })?;
                }
                Err(e) => return Err(SessionError::from(e)),
            }
        }
        Ok(Collected { deposits, more })
    }

    /// §5a.8 conclude: r1–r3, then — under the bound principal — removes
    /// every named deposit still held; ids not held are fine (idempotent).
    /// Carries no reason. A concluded deposit is never offered again, and
    /// its sender status stays `accepted` (§5a.8).
    ///
    /// A served conclude **counts as collection** (`PROTOCOL.md` §7,
    /// decided here): `last_collection_at` moves to now exactly as for
    /// [`Engine::collect`] (a closing binding stays closing). §5a.3's table
    /// has one input, `collect / conclude`, and §5a.9's orphan is a binding
    /// "nobody will ever present again": a conclude is a fresh proof of
    /// possession under the bound principal, which is that presentation.
    ///
    /// # Errors
    /// As [`Engine::collect`].
    pub fn conclude(
        &self,
        proof_bytes: &[u8],
        ids: &[DepositId],
    ) -> Result<Concluded, SessionError> {
        let ids: BTreeSet<DepositId> = ids.iter().copied().collect();
        self.session(
            proof_bytes,
            Operation::Conclude,
            move |txn, rkid, binding, now, c| {
                let mut removed = 0;
                for id in &ids {
                    if let Some(deposit) = txn.deposit_by_id(rkid, id)?
                        && queue::depart(txn, rkid, &deposit, Departure::Concluded, now, c)?
                    {
                        removed += 1;
                    }
                }
                binding::collected(txn, rkid, binding, now, c)?;
                Ok(Concluded { removed })
            },
        )
    }

    /// The §5a.5 s2 size bound in force: `min(MAX_ENVELOPE_BYTES,
    /// max-queue-bytes)` bytes. A submission announcing more is decided
    /// without its body ([`Engine::submit_unread_async`]).
    pub fn envelope_bound(&self) -> usize {
        usize::try_from(self.shared.constants().max_queue_bytes)
            .unwrap_or(usize::MAX)
            .min(MAX_ENVELOPE_BYTES)
    }

    /// The s2 pre-check, on the caller's thread: `true` if `bytes` pass
    /// the shape-and-size check for `rkid` (§5a.5 s2) under
    /// [`Engine::envelope_bound`].
    fn shape_ok(&self, rkid: &Rkid, bytes: &[u8]) -> bool {
        check_shape(bytes, rkid, self.envelope_bound()).is_ok()
    }

    /// The submission decision: s1–s6 and the append, one closure; with
    /// the deposit id it decides on.
    fn submit_op(
        &self,
        rkid: Rkid,
        bytes: Vec<u8>,
    ) -> (
        DepositId,
        impl FnMut(&mut dyn WriteTxn, Ms) -> StoreResult<SubmitVerdict> + Send + 'static,
    ) {
        let shape_ok = self.shape_ok(&rkid, &bytes);
        // The content address, hashed here on the caller's thread rather
        // than in the (serial) writer.
        let id = DepositId::of(&bytes);
        let shared = Arc::clone(&self.shared);
        let op = move |txn: &mut dyn WriteTxn, now: Ms| {
            let c = shared.constants();
            if let Err(verdict) = s1_queue_lookup(txn, &rkid)? {
                return Ok(verdict);
            }
            // s2: shape and size (checked before the writer).
            if !shape_ok {
                return Ok(SubmitVerdict::Bounds);
            }
            // s3: byte identity with a deposit held now.
            let mut same_id = txn.deposit_by_id(&rkid, &id)?;
            let duplicate = match &same_id {
                Some(d) => match txn.deposit_bytes(&rkid, d) {
                    Ok(held) => held == bytes,
                    // The held copy is damaged: quarantined, and this
                    // submission is judged as a new deposit.
                    Err(StoreError::Corrupt(reason)) => {
                        queue::quarantine(txn, &rkid, d, now, &c, &reason)?;
                        same_id = None;
                        false
                    }
                    Err(e) => return Err(e),
                },
                None => false,
            };
            // s4: charged like an admission even for a duplicate.
            let queue_bytes = txn.queue_bytes(&rkid)?;
            let len = bytes.len() as u64;
            let keys = meter::submission_keys(rkid, queue_bytes.saturating_add(len), c.queue_floor);
            let metered = meter::charge_all(&*shared.meter, &keys);
            if duplicate {
                return Ok(SubmitVerdict::Duplicate);
            }
            if !metered {
                return Ok(SubmitVerdict::AdmissionResource);
            }
            if same_id.is_some() {
                // A SHA-256 collision with different bytes: the identity
                // index cannot hold both; refuse retriably, store nothing.
                tracing::error!(%rkid, "deposit id collision with different bytes");
                return Ok(SubmitVerdict::Capacity);
            }
            // s5, s6: judged on the occupancy after the deposit.
            match capacity::submission_room(
                &txn.occupancy()?,
                queue_bytes,
                len,
                c.queue_floor,
                c.max_queue_bytes,
                shared.limits(),
            ) {
                Room::QueueSaturated => return Ok(SubmitVerdict::QueueSaturated),
                Room::Capacity => return Ok(SubmitVerdict::Capacity),
                Room::Fits => {}
            }
            queue::admit(txn, &rkid, &bytes, &id, now, &c)?;
            Ok(SubmitVerdict::Admitted)
        };
        (id, op)
    }

    /// §5a.5 submit: s1 queue lookup → s2 shape and size → s3 byte
    /// identity → s4 metering → s5 the queue's bound → s6 global
    /// occupancy → `admitted`, answered only after the deposit is durable.
    /// The deposit id is [`DepositId::of`] the bytes. A deposit admitted
    /// while the binding is closing inherits the wind-up deadline.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store failed: nothing was
    /// admitted, and it is not a verdict (never `refused(capacity)`,
    /// module docs, "Errors").
    pub fn submit(&self, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, EngineError> {
        let (_, op) = self.submit_op(*rkid, bytes.to_vec());
        Ok(self.committer.execute(op)?)
    }

    /// [`Engine::submit`] for async callers: awaits the durable commit
    /// without blocking a runtime thread. Also returns the deposit id
    /// ([`DepositId::of`] the bytes), so the caller need not hash again.
    pub async fn submit_async(
        &self,
        rkid: &Rkid,
        bytes: Vec<u8>,
    ) -> (Result<SubmitVerdict, EngineError>, DepositId) {
        let (id, op) = self.submit_op(*rkid, bytes);
        let verdict = self.committer.run(op).await.map_err(EngineError::from);
        (verdict, id)
    }

    /// §5a.5 for a submission whose announced size is above
    /// [`Engine::envelope_bound`], decided before its body is read: s1
    /// (`refused(no-such-queue)`) first, else s2 (`refused(bounds)`).
    /// Linearized with every other decision (one writer closure) and
    /// changes nothing.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails (answered
    /// `unavailable`, like [`Engine::submit_async`]).
    pub async fn submit_unread_async(&self, rkid: &Rkid) -> Result<SubmitVerdict, EngineError> {
        let rkid = *rkid;
        self.committer
            .run(move |txn: &mut dyn WriteTxn, _now: Ms| {
                Ok(match s1_queue_lookup(txn, &rkid)? {
                    Err(verdict) => verdict,
                    Ok(()) => SubmitVerdict::Bounds,
                })
            })
            .await
            .map_err(EngineError::from)
    }

    /// Quarantines held deposit `seq` of `rkid` if its stored bytes fail
    /// their check (a watch push met them outside the writer); returns
    /// whether it did. Runs in the writer, so it judges the bytes again.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub fn quarantine_if_damaged(&self, rkid: &Rkid, seq: u64) -> Result<bool, EngineError> {
        let (rkid, shared) = (*rkid, Arc::clone(&self.shared));
        Ok(self.committer.execute(move |txn, now| {
            let Some(deposit) = queue::by_seq(txn, &rkid, seq)? else {
                return Ok(false);
            };
            match txn.deposit_bytes(&rkid, &deposit) {
                Ok(_) => Ok(false),
                Err(StoreError::Corrupt(reason)) => {
                    let c = shared.constants();
                    queue::quarantine(txn, &rkid, &deposit, now, &c, &reason)?;
                    Ok(true)
                }
                Err(e) => Err(e),
            }
        })?)
    }

    /// §5a.8/§6.1 sender status of deposit `id` in the queue of `rkid`:
    /// `accepted` (held, or concluded — the carrier never reveals a
    /// conclusion), `given-up` (for `give-up-horizon` after the give-up),
    /// else `unknown`. Read from a snapshot, evaluated at the clock's now
    /// (a late sweep is never visible), and answered only once everything
    /// that snapshot can see is durable ([`Store::sync_visible`]): a
    /// committed batch is visible before it is durable
    /// (`rltp_storage::committer`), and `accepted` must never name a
    /// deposit that a crash could still take back.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store cannot be read or synced.
    pub fn status(&self, rkid: &Rkid, id: &DepositId) -> Result<DepositStatus, EngineError> {
        let now = self.shared.clock.now();
        let status = {
            let read = self.shared.store.read()?;
            horizon::status(&read, rkid, id, now, &self.shared.constants())?
        };
        self.shared.store.sync_visible()?;
        Ok(status)
    }

    /// The sweeper (§5a.9): applies every transition due now with no
    /// other traffic (one write transaction), drops expired challenges and
    /// idle meter state. Returns the next due instant (ms), for the
    /// caller's next wake-up.
    ///
    /// # Errors
    /// [`EngineError::Unavailable`] if the store fails.
    pub fn sweep(&self) -> Result<Option<Ms>, EngineError> {
        // The batch prelude applies everything due at the batch's now.
        let (now, next) = self
            .committer
            .execute(|txn, now| Ok((now, txn.next_due()?)))?;
        self.shared.store.purge_challenges(now)?;
        self.shared.meter.retain_recent();
        Ok(next)
    }

    /// §4.4: applies a declaration revision prospectively, in one
    /// linearized transition: the new constants govern every later
    /// decision; a lowered `max-binding-tombstones` trims the store at
    /// once in eviction order (`boundRevision`); a changed `queue-floor`
    /// re-derives the elastic occupancy; a changed `orphan-horizon`
    /// re-measures every live binding's expiry from its last collection
    /// (never earlier than the revision instant). Deadlines, deposit
    /// give-up instants and challenge expiries already fixed keep their
    /// instants. If `record` is given it is stored in the same
    /// transaction, under the generic revision rule
    /// ([`rltp_proofs::declaration::revision_rule`], comparing the stored
    /// document bytes).
    ///
    /// # Errors
    /// [`EngineError::Revision`] for an equivocation or a rollback (state
    /// kept); [`EngineError::Unavailable`] if the store fails (the previous
    /// constants stay in force).
    pub fn apply_constants(
        &self,
        constants: EngineConstants,
        record: Option<DeclarationRecord>,
    ) -> Result<(), EngineError> {
        let shared = Arc::clone(&self.shared);
        let previous = self.shared.constants();
        let result = self.committer.execute(move |txn, now| {
            if let Some(record) = &record {
                let held = txn.declaration()?;
                let rule = rltp_proofs::declaration::revision_rule(
                    held.as_ref().map(|h| (h.revision, h.document.as_slice())),
                    (record.revision, &record.document),
                );
                if rule.is_rejection() {
                    return Ok(Err(EngineError::Revision {
                        held: held.map_or(0, |h| h.revision),
                        offered: record.revision,
                    }));
                }
                if !rule.records() {
                    return Ok(Ok(()));
                }
                txn.put_declaration(record)?;
            }
            let old = shared.constants();
            if old.queue_floor != constants.queue_floor
                || old.orphan_horizon_ms != constants.orphan_horizon_ms
            {
                renormalize(txn, now, &old, &constants)?;
            }
            binding::evict_over_bound(txn, &constants)?;
            shared.set_constants(constants);
            horizon::apply_due(txn, now, &constants)?;
            Ok(Ok(()))
        });
        match result {
            Ok(outcome) => outcome,
            Err(e) => {
                self.shared.set_constants(previous);
                Err(e.into())
            }
        }
    }
}

/// §5a.5 s1, the queue lookup: the `rkid` names a binding held now (`live`
/// or `closing`); a released `rkid` and one never bound alike are
/// `refused(no-such-queue)`.
fn s1_queue_lookup(txn: &dyn WriteTxn, rkid: &Rkid) -> StoreResult<Result<(), SubmitVerdict>> {
    Ok(match txn.holds_binding(rkid)? {
        true => Ok(()),
        false => Err(SubmitVerdict::NoSuchQueue),
    })
}

/// Re-derives what depends on `queue-floor` and `orphan-horizon` for every
/// held binding after a revision changed them (one transaction). The held
/// bindings are found through the due index: every live binding has its
/// orphan-expiry entry and every closing binding its deadline entry.
fn renormalize(
    txn: &mut dyn WriteTxn,
    now: Ms,
    old: &EngineConstants,
    new: &EngineConstants,
) -> StoreResult<()> {
    let held: BTreeSet<Rkid> = txn
        .due(Ms::MAX, usize::MAX)?
        .into_iter()
        .filter_map(|(_, due)| match due {
            rltp_storage::Due::OrphanExpiry(r) | rltp_storage::Due::Deadline(r) => Some(r),
            _ => None,
        })
        .collect();
    let mut elastic: i64 = 0;
    for rkid in &held {
        let Some(b) = txn.binding(rkid)? else {
            continue;
        };
        let queue_bytes = txn.queue_bytes(rkid)?;
        elastic = elastic.saturating_add(capacity::floor_change_delta(
            queue_bytes,
            old.queue_floor,
            new.queue_floor,
        ));
        if b.phase == rltp_storage::Phase::Live && old.orphan_horizon_ms != new.orphan_horizon_ms {
            let due = rltp_storage::Due::OrphanExpiry(*rkid);
            txn.unschedule(binding::orphan_instant(&b, old), &due)?;
            txn.schedule(binding::orphan_instant(&b, new).max(now), &due)?;
        }
    }
    txn.add_elastic_bytes(elastic)
}
