//! The [`Engine`]: the carrier's configuration and in-memory state (the
//! constants in force, the private limits, the meter, the guarantee-3
//! counters), and the entry points every operation shares.
//!
//! It holds no store, no clock, no thread and no randomness: each
//! operation is given the store transaction (or read snapshot) it decides
//! on, the instant `now` it decides at, and — for a challenge — the CSPRNG
//! to draw from; it returns its verdict, and records the transitions it
//! realizes into the caller's [`Tally`]. Operations are split by where
//! they run:
//!
//! - **outside the writer**, on the caller's thread, over the store's
//!   shared state: [`Engine::challenge`], [`Engine::authorize`] (r1–r3),
//!   [`Engine::screen`] (the s2 shape check and the content address),
//!   [`Engine::status`], [`Engine::watch_page`];
//! - **inside one write transaction**, serialized with every other
//!   decision: [`Engine::prelude`] first (the horizons due at `now`), then
//!   [`Engine::register`] (r4–r5), [`Engine::submit`] (s1–s6),
//!   [`Engine::collect`], [`Engine::conclude`], [`Engine::apply_constants`].
//!
//! The caller (the shell's group-commit writer) commits the transaction,
//! makes it durable, and only then answers and publishes the tally.

use crate::challenge::{self, CounterSnapshot, Counters, IssuedChallenge};
use crate::config::{EngineConfig, EngineConstants, Limits};
use crate::events::Tally;
use crate::horizon;
use crate::meter::{Meter, MeterKey};
use crate::outcome::SessionError;
use rand_core::CryptoRng;
use rltp_proofs::Ms;
use rltp_proofs::envelope::MAX_ENVELOPE_BYTES;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::Purpose;
use rltp_store::{Store, StoreResult, WriteTxn};
use rltp_wire::Verdict;
use std::sync::{Arc, PoisonError, RwLock};

/// The carrier engine (§4.4, §5a): the rules, with the state they keep in
/// memory. Shared by reference between the caller's threads; see the
/// module docs for what each operation is given.
pub struct Engine {
    carrier: CarrierId,
    constants: RwLock<EngineConstants>,
    limits: RwLock<Limits>,
    meter: Arc<dyn Meter>,
    counters: Counters,
    max_collect: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("carrier", &self.carrier)
            .field("constants", &self.constants())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine answering as the carrier `carrier` (Identity §7a.2;
    /// proofs naming another carrier are `refused(malformed)`), enforcing
    /// `constants` (§4.4) and the private `config`, metering with `meter`.
    pub fn new(
        carrier: CarrierId,
        constants: EngineConstants,
        config: EngineConfig,
        meter: Arc<dyn Meter>,
    ) -> Engine {
        Engine {
            carrier,
            constants: RwLock::new(constants),
            limits: RwLock::new(Limits {
                capacity_bytes: config.capacity_bytes,
                max_bindings: config.max_bindings,
            }),
            meter,
            counters: Counters::default(),
            max_collect: config.max_collect.max(1),
        }
    }

    /// The carrier identifier `C` this engine answers as.
    pub fn carrier(&self) -> &CarrierId {
        &self.carrier
    }

    /// The constants in force (§4.4 guarantee 1).
    pub fn constants(&self) -> EngineConstants {
        *self
            .constants
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `constants` in force for every later decision. Only
    /// [`Engine::apply_constants`] changes them inside a transaction; a
    /// caller whose transaction failed puts the previous ones back with
    /// this.
    pub fn set_constants(&self, constants: EngineConstants) {
        *self
            .constants
            .write()
            .unwrap_or_else(PoisonError::into_inner) = constants;
    }

    /// The private limits in force (§4.4 guarantee 2).
    pub fn limits(&self) -> Limits {
        *self.limits.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the private limits (an operator resizing the carrier);
    /// read by every later r4 and s6 decision. Lowering them below the
    /// held state makes the carrier refuse returns too, retriably, until
    /// room appears (see [`crate::capacity`]).
    pub fn set_limits(&self, limits: Limits) {
        *self.limits.write().unwrap_or_else(PoisonError::into_inner) = limits;
    }

    /// The guarantee-3 work counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    pub(crate) fn work(&self) -> &Counters {
        &self.counters
    }

    /// The meter.
    pub fn meter(&self) -> &Arc<dyn Meter> {
        &self.meter
    }

    /// The largest collect page (a count).
    pub fn max_collect(&self) -> usize {
        self.max_collect
    }

    /// The §5a.5 s2 size bound in force: `min(MAX_ENVELOPE_BYTES,
    /// max-queue-bytes)` bytes. A submission announcing more is decided
    /// without its body ([`Engine::submit_unread`]).
    pub fn envelope_bound(&self) -> usize {
        usize::try_from(self.constants().max_queue_bytes)
            .unwrap_or(usize::MAX)
            .min(MAX_ENVELOPE_BYTES)
    }

    /// The batch prelude (§5a.8, §5a.9): applies every transition due at
    /// or before `now`, each at its own instant ([`horizon::apply_due`]).
    /// The writer runs it first in every write transaction, at that
    /// transaction's `now`, so that every operation of the batch decides
    /// on the state as of its instant.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`]; the transaction is then dropped.
    pub fn prelude(&self, txn: &mut dyn WriteTxn, now: Ms, events: &mut Tally) -> StoreResult<()> {
        horizon::apply_due(txn, now, &self.constants(), events)
    }

    /// §5a.3: issues a challenge for `(rkid, purpose)` at `now`, drawing
    /// from `rng`. Order (§4.4 guarantee 3): the `rkid` is already decoded
    /// (syntax), then the admission meter (r2, keyed per
    /// [`MeterKey::for_request`]), and only then randomness and, for
    /// `register`/`rebind`, sealing the address challenge to `rkid`. Lives
    /// `challenge-lifetime` ms.
    ///
    /// # Errors
    /// [`SessionError::Refused`] with `refused(admission-resource)`
    /// (retriable, no random draw or key operation spent), or
    /// `refused(possession-failed)` for an `rkid` nothing can be sealed to
    /// (a low-order point); [`SessionError::Unavailable`] if the store
    /// fails.
    pub fn challenge<S: Store + ?Sized, R: CryptoRng + ?Sized>(
        &self,
        store: &S,
        rkid: &Rkid,
        purpose: Purpose,
        now: Ms,
        rng: &mut R,
    ) -> Result<IssuedChallenge, SessionError> {
        let c = self.constants();
        let held = horizon::held_at(&store.read()?, rkid, now, &c)?;
        if !self
            .meter
            .check(&MeterKey::for_request(*rkid, held, purpose), now)
        {
            return Err(SessionError::Refused(Verdict::AdmissionResource));
        }
        challenge::issue(
            store,
            &self.counters,
            &self.carrier,
            *rkid,
            purpose,
            now,
            c.challenge_lifetime_ms,
            rng,
        )
        .map_err(|e| match e {
            challenge::IssueError::Unsealable | challenge::IssueError::Encoding => {
                SessionError::Refused(Verdict::PossessionFailed)
            }
            challenge::IssueError::Store(e) => SessionError::from(e),
        })
    }

    /// The housekeeping of a sweep at `now`: drops the challenges that
    /// expired and the meter state indistinguishable from fresh, so that
    /// nothing per key outlives its use (§5a.5).
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`] from the challenge purge.
    pub fn housekeeping<S: Store + ?Sized>(&self, store: &S, now: Ms) -> StoreResult<()> {
        store.purge_challenges(now)?;
        self.meter.retain_recent(now);
        Ok(())
    }
}
