//! §5a.3 registration and its five rules, each a named function in the
//! order the contract evaluates them:
//!
//! | rule | function | where it runs |
//! |---|---|---|
//! | r1 syntax | [`r1_syntax`] | the caller's thread |
//! | r2 admission metering | [`r2_admission`] | the caller's thread (a read snapshot) |
//! | r3 possession, the challenge consumed before verification | [`r3_possession`] | the caller's thread |
//! | r4 registration capacity | `r4_capacity` | the write transaction |
//! | r5 generation monotonicity: the state table, as one compare-and-swap | `r5_state_table` | the write transaction |
//!
//! r1–r3 are key-free or state-free work (parsing, a meter check, the
//! Ed25519 verification) and run before the writer; collect and conclude
//! share them ([`Engine::authorize`]). r4 and r5 run inside the write
//! transaction, where r5 is a compare-and-swap by construction (§4.4
//! `stateAtomicity`).

use crate::binding::{self, Held, Install};
use crate::capacity;
use crate::challenge::{self, Possession};
use crate::events::Tally;
use crate::horizon;
use crate::meter::MeterKey;
use crate::outcome::SessionError;
use crate::state::Engine;
use crate::table::{self, Guard, Input, Outcome, State};
use rltp_proofs::Ms;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{self, CarrierProof, Purpose};
use rltp_store::{Store, StoreResult, WriteTxn};
use rltp_wire::Verdict;

/// Which operation a proof is presented to; its `purpose` must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `register` (a `register` or `rebind` proof).
    Register,
    /// `collect`.
    Collect,
    /// `conclude`.
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

/// A proof that passed r1–r3 for one operation: the only way into the
/// write-transaction half of register, collect and conclude (the protocol
/// step is enforced by ownership; nothing else makes one).
#[derive(Debug, Clone)]
pub struct Authorized {
    proof: CarrierProof,
    operation: Operation,
}

impl Authorized {
    /// The `rkid` the proof names.
    pub fn rkid(&self) -> &Rkid {
        self.proof.rkid()
    }

    /// The control principal that signed it (Ed25519 public key bytes).
    pub fn principal(&self) -> [u8; 32] {
        *self.proof.principal().as_bytes()
    }

    /// The operation it was authorized for.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The generation `g′` the proof presents (register/rebind; 0 for
    /// collect/conclude, which carry none).
    pub fn generation(&self) -> u64 {
        self.proof.generation().unwrap_or(0)
    }
}

/// §5a.3 r1, syntax: the proof parses strictly, names this carrier, and
/// its `purpose` is one `operation` accepts (a purpose presented to the
/// wrong operation is not a proof for it). Else `refused(malformed)`.
pub fn r1_syntax(
    proof_bytes: &[u8],
    carrier: &CarrierId,
    operation: Operation,
) -> Result<CarrierProof, Verdict> {
    match proof::parse(proof_bytes, carrier.as_str()) {
        Ok(p) if operation.admits(p.purpose()) => Ok(p),
        _ => Err(Verdict::Malformed),
    }
}

/// §5a.3 r2, the carrier's own admission metering, keyed as §4.4
/// guarantee 4 requires ([`MeterKey::for_request`]: a held binding's own
/// key, else the one unknown-address key), judged at `now`. Else
/// `refused(admission-resource)`, retriable.
///
/// # Errors
/// [`SessionError::Unavailable`] if the store cannot be read.
pub fn r2_admission<S: Store + ?Sized>(
    engine: &Engine,
    store: &S,
    proof: &CarrierProof,
    now: Ms,
) -> Result<(), SessionError> {
    let held = horizon::held_at(&store.read()?, proof.rkid(), now, &engine.constants())?;
    let key = MeterKey::for_request(*proof.rkid(), held, proof.purpose());
    if engine.meter().check(&key, now) {
        Ok(())
    } else {
        Err(SessionError::Refused(Verdict::AdmissionResource))
    }
}

/// §5a.3 r3, possession: the challenge the proof names is consumed first
/// (never restored), then checked (issued, unexpired at `now`, same
/// `rkid` and purpose, the sealed address challenge), and only then the
/// Ed25519 signature verified (`challengeConsumption`). Else
/// `refused(possession-failed)`.
///
/// # Errors
/// [`SessionError::Unavailable`] if the challenge lookup fails.
pub fn r3_possession<S: Store + ?Sized>(
    engine: &Engine,
    store: &S,
    proof: &CarrierProof,
    now: Ms,
) -> Result<(), SessionError> {
    match challenge::consume_and_verify(store, engine.work(), proof, now)? {
        Possession::Proven => Ok(()),
        Possession::Failed => Err(SessionError::Refused(Verdict::PossessionFailed)),
    }
}

/// §5a.3 r4, registration capacity: a return (the `rkid` is held
/// `live`/`closing`) is refused only over the limits, an arrival whenever
/// it would not fit (a return outranks an arrival, §5a.9; see
/// [`crate::capacity`]). Else `registration-refused(capacity)`, retriable.
///
/// # Errors
/// A [`rltp_store::StoreError`] from the occupancy read.
pub(crate) fn r4_capacity(
    engine: &Engine,
    txn: &dyn WriteTxn,
    held: &Held,
) -> StoreResult<Result<(), Verdict>> {
    let returning = matches!(held.state, State::Live | State::Closing);
    let floor = engine.constants().queue_floor;
    let escrowed = if returning {
        txn.over_limits()?
    } else {
        txn.escrow(capacity::arrival_need(floor))?
            .map(|escrow| capacity::escrow_refuses_arrival(&escrow, floor))
    };
    let refused = match escrowed {
        Some(refused) => refused,
        None => {
            capacity::registration_refused(&txn.occupancy()?, floor, engine.limits(), returning)
        }
    };
    Ok(if refused {
        Err(Verdict::RegistrationCapacity)
    } else {
        Ok(())
    })
}

/// §5a.3 r5, generation monotonicity: the state table's
/// `register / rebind` cell for the held state and the guard `(g′, P′)`
/// against the record decides the verdict and the next state, which is
/// realized in the same transaction (`registered`, `registered(idempotent)`,
/// `rebound`, or `refused(stale-generation)` carrying `g` or `t`).
///
/// # Errors
/// A [`rltp_store::StoreError`] from the writes.
pub(crate) fn r5_state_table(
    engine: &Engine,
    txn: &mut dyn WriteTxn,
    authorized: &Authorized,
    held: &Held,
    now: Ms,
    events: &mut Tally,
) -> StoreResult<Verdict> {
    let (generation, principal) = (authorized.generation(), authorized.principal());
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
        let c = engine.constants();
        binding::realize(
            txn,
            authorized.rkid(),
            held,
            next,
            now,
            Some(install),
            &c,
            events,
        )?;
    }
    Ok(verdict)
}

/// The presenter verdict of a table outcome (§5a.3); internal transitions
/// have none.
pub(crate) fn presenter_verdict(outcome: Outcome, held_generation: u64) -> Option<Verdict> {
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

impl Engine {
    /// r1 → r2 → r3 for `operation` at `now`, on the caller's thread:
    /// parse, meter, consume the challenge and verify (§5a.3, §4.4
    /// guarantee 3: no asymmetric work before the admission decision).
    ///
    /// # Errors
    /// [`SessionError::Refused`] with `refused(malformed)`,
    /// `refused(admission-resource)` or `refused(possession-failed)`;
    /// [`SessionError::Unavailable`] if the store fails.
    pub fn authorize<S: Store + ?Sized>(
        &self,
        store: &S,
        proof_bytes: &[u8],
        operation: Operation,
        now: Ms,
    ) -> Result<Authorized, SessionError> {
        let proof =
            r1_syntax(proof_bytes, self.carrier(), operation).map_err(SessionError::Refused)?;
        r2_admission(self, store, &proof, now)?;
        r3_possession(self, store, &proof, now)?;
        Ok(Authorized { proof, operation })
    }

    /// §5a.3 register or rebind (equivalent in effect), the half that
    /// runs in the write transaction at `now`: r4 capacity → r5 the state
    /// table, as one compare-and-swap. `authorized` passed r1–r3 for
    /// [`Operation::Register`] ([`Engine::authorize`]); one authorized for
    /// another operation is `refused(malformed)` (r1). The caller answers
    /// only after the commit is durable.
    ///
    /// # Errors
    /// A [`rltp_store::StoreError`]: nothing of the transaction may be
    /// committed, and the caller answers `unavailable`.
    pub fn register(
        &self,
        txn: &mut dyn WriteTxn,
        authorized: &Authorized,
        now: Ms,
        events: &mut Tally,
    ) -> StoreResult<Verdict> {
        if authorized.operation != Operation::Register {
            return Ok(Verdict::Malformed);
        }
        let held = binding::held(txn, authorized.rkid())?;
        if let Err(verdict) = r4_capacity(self, txn, &held)? {
            return Ok(verdict);
        }
        r5_state_table(self, txn, authorized, &held, now, events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state table spells its presenter-visible outcomes as the wire's
    /// verdicts do, byte for byte: the verdict set (`rltp_wire::Verdict`)
    /// is the one home of those spellings, and this holds the table's
    /// cells to it.
    #[test]
    fn presenter_outcomes_are_spelled_as_their_verdicts() {
        let all = [
            Outcome::Registered,
            Outcome::RegisteredIdempotent,
            Outcome::Rebound,
            Outcome::Served,
            Outcome::NoSuchQueue,
            Outcome::StaleGeneration,
            Outcome::WindUpBegins,
            Outcome::DischargedAndReleased,
            Outcome::Evicted,
            Outcome::CannotArise,
        ];
        let mut presented = 0;
        for outcome in all {
            if let Some(verdict) = presenter_verdict(outcome, 7) {
                assert_eq!(outcome.as_str(), verdict.as_str(), "{outcome:?}");
                presented += 1;
            }
        }
        assert_eq!(presented, 6);
    }
}
