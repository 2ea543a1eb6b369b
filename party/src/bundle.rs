//! The `encounter-bundle/0.1` seam (Delivery §4.1): the crate runs a
//! bundle through stage 8 — the outer/inner consistency and pre-lock checks
//! 1–4 ([`crate::consistency::bundle`]) — and hands the rest to a
//! [`BundleHandler`] the **application** owns, because checks 5–6 and the
//! stage-9 effect need the Encounter state model (own challenges, the aging
//! latch, enactment records), which lives there.
//!
//! What the seam receives ([`Bundle`]): the profiled document and its
//! digest, the **verified** sent card (schema, keys, binding, signature),
//! the **verified** step credential (schema, signature under its issuer),
//! the bound challenge — which is also the record key the crate has
//! already locked together with the digest when [`BundleHandler::in_lock`]
//! runs — and the claimed enactment binding. What it answers: the
//! provisional resolution before the lock ([`PreLock`]), and under the lock
//! the authoritative one with the effect as **data** ([`InLock::Commit`]),
//! which the crate commits in the same transaction as the cache entry and
//! the kept acknowledgement. The handler writes nothing itself (except
//! Encounter 5.3's aging latch, which every resolution may write).

use rltp_proofs::Ms;
use rltp_proofs::encoding::digest_multibase;
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json::{Object, Value};

use crate::card::ContactCard;
use crate::disposition::FailReason;
use crate::document::Profiled;

/// The ceremony a bundle carries (§4.1 check 5: `encounter-scan@0.25`).
pub const ENCOUNTER_SCAN: &str = "encounter-scan@0.25";

/// A bundle that passed stage 8's state-free checks, as the seam sees it.
#[derive(Debug, Clone, Copy)]
pub struct Bundle<'a> {
    /// The document (profile-valid, addressed to this party's anchor).
    pub document: &'a Profiled,
    /// Its digest.
    pub digest: &'a str,
    /// The scanner's sent card, verified.
    pub card: &'a ContactCard,
    /// The scanner's step credential, verified.
    pub credential: &'a Object,
    /// `credential.credentialSubject.challenge` (= the card's `boundTo`):
    /// the record key.
    pub bound_challenge: &'a str,
    /// `credential.credentialSubject.enactmentBinding`, as claimed.
    pub enactment_binding: &'a str,
}

/// Dispositions a bundle can earn before the lock (§4.1, §6.2 stage 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreLockFailure {
    /// `failed(validation-failed)`.
    ValidationFailed,
    /// `failed(stale-issuance)` (the issuance window, check 6).
    StaleIssuance,
}

/// §4.1 checks 5–6, provisional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreLock {
    /// The bound challenge resolved `open` or `recorded` and the rest of
    /// checks 5–6 passed.
    Pass,
    /// The bound challenge resolved `unknown`: the remaining checks are
    /// skipped and stage 9's authoritative resolution decides.
    Unknown,
    /// A check failed.
    Fail(PreLockFailure),
}

/// Dispositions a bundle can earn under the lock (§4.1, §6.2 stage 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InLockFailure {
    /// `failed(validation-failed)`: still `unknown`, a foreign card on the
    /// record, an Encounter 5.6 rejection, …
    ValidationFailed,
    /// `failed(stale-issuance)`: Encounter's `ERR_STALE_ISSUANCE`.
    StaleIssuance,
    /// `failed(gate-future)`: an own challenge future-dated beyond
    /// `skew-tolerance`.
    GateFuture,
    /// `failed(consumed-challenge)`: the record's counterparty is not the
    /// document's issuer.
    ConsumedChallenge,
}

impl From<PreLockFailure> for FailReason {
    fn from(f: PreLockFailure) -> FailReason {
        match f {
            PreLockFailure::ValidationFailed => FailReason::ValidationFailed,
            PreLockFailure::StaleIssuance => FailReason::StaleIssuance,
        }
    }
}

impl From<InLockFailure> for FailReason {
    fn from(f: InLockFailure) -> FailReason {
        match f {
            InLockFailure::ValidationFailed => FailReason::ValidationFailed,
            InLockFailure::StaleIssuance => FailReason::StaleIssuance,
            InLockFailure::GateFuture => FailReason::GateFuture,
            InLockFailure::ConsumedChallenge => FailReason::ConsumedChallenge,
        }
    }
}

/// §4.1 / §6.2 stage 9 inside the critical section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InLock {
    /// The record-creating (`open`) or record-aware (`recorded`) effect:
    /// the record to commit, as the application's own bytes. The crate
    /// commits it with the cache entry and the acknowledgement, as one
    /// transaction, and answers `unique`.
    Commit {
        /// What the application wants written (record, accepted credential
        /// with direction and credential digest).
        record: Vec<u8>,
    },
    /// A terminal failure; nothing is consumed and nothing acknowledged.
    Fail(InLockFailure),
    /// The pre-lock checks were skipped on `unknown` and the state has moved
    /// since: the crate releases the lock and re-enters at stage 4.
    StateMoved,
}

/// The application's Encounter state, as the pipeline needs it.
pub trait BundleHandler {
    /// §4.1 checks 5–6, provisional and read-only (but for the aging latch).
    fn pre_lock(&self, bundle: &Bundle<'_>, now: Ms) -> PreLock;

    /// §6.2 stage 9 for a bundle, with the lock set (digest and record key)
    /// held: the authoritative resolution and the effect. `skipped` is true
    /// when the pre-lock checks were skipped on `unknown`; then any state
    /// other than `unknown` MUST be [`InLock::StateMoved`].
    fn in_lock(&self, bundle: &Bundle<'_>, skipped: bool, now: Ms) -> InLock;
}

/// The handler of a party that holds no Encounter state: every bound
/// challenge resolves `unknown`, so every bundle is
/// `failed(validation-failed)` under the lock — the one state-free outcome
/// (§4.1 check 5).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEncounterState;

impl BundleHandler for NoEncounterState {
    fn pre_lock(&self, _: &Bundle<'_>, _: Ms) -> PreLock {
        PreLock::Unknown
    }

    fn in_lock(&self, _: &Bundle<'_>, _: bool, _: Ms) -> InLock {
        InLock::Fail(InLockFailure::ValidationFailed)
    }
}

/// Encounter 5.4: the enactment binding of a ceremony over two challenges,
/// the digest over `JCS({ceremony, challenges: [ascending]})`. For a
/// handler's check 5 (it holds the own challenge).
pub fn enactment_binding(ceremony: &str, a: &str, b: &str) -> Option<String> {
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let mut object = Object::new();
    object.insert("ceremony", ceremony);
    object.insert("challenges", vec![Value::from(low), Value::from(high)]);
    canonicalize(&Value::Object(object))
        .ok()
        .map(|jcs| digest_multibase(&jcs))
}
