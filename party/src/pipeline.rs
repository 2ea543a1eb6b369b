//! Delivery §6.2: the receiver's nine stages, in mandatory order; the first
//! failing stage names the disposition.
//!
//! | stage | check | failure |
//! |---|---|---|
//! | 1 | envelope within the §5 size bound | `failed(oversize)` |
//! | 2 | envelope shape, canonical base64url, `rkid` known (live or tombstoned) | `failed(malformed)` |
//! | 3 | decryption (all-zero check, tag) | `failed(decryption-failed)` |
//! | 4 | strict parse, JCS, digest; the completed-effect cache | `failed(malformed)` / `duplicate-known` |
//! | 5 | document profile; `recipient` = the arrival tuple's anchor | `failed(malformed)` / `failed(wrong-recipient)` |
//! | 6 | `type` registered | `failed(unknown-type)` |
//! | 7 | payload schema (offline, by `$id`) | `failed(malformed)` |
//! | 8 | the type's consistency and pre-lock checks | `failed(validation-failed)` / `failed(stale-issuance)` |
//! | 9 | the lock set, atomically; effect + cache entry + acknowledgement in one transaction | `unique` (or a bundle's in-lock failure) |
//!
//! Sans-IO: stages 1–3 are [`Receiver::open`]; stages 4–8 and the lock
//! acquisition are [`Receiver::evaluate`], which answers with a [`Step`];
//! the critical section is [`Critical::commit`]. Time and randomness come
//! from the caller. Validate, then consume: nothing before stage 9 writes,
//! and a failure at any stage leaves the cache without the digest, so it
//! is evaluated again in full next time.

use rltp_proofs::Ms;
use rltp_proofs::declaration::{rfc3339_utc, uuid_v4};
use rltp_proofs::envelope::{MAX_ENVELOPE_BYTES, ShapeError, check_shape};
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{self, SealError};

use crate::ack::make_ack;
use crate::bundle::{Bundle, BundleHandler, InLock, PreLock};
use crate::card::ContactCard;
use crate::consistency::{self, BundleParts};
use crate::disposition::{Disposition, FailReason, Stage};
use crate::document::{Document, Profiled, profile, to_serde};
use crate::keyring::{KeyRing, Known, Tuple};
use crate::locks::{LockGuard, LockKey, LockTable};
use crate::registry::{TypeEntry, TypeKind, TypeRegistry};
use crate::schema;
use crate::sender::{Transition, check_ack};
use crate::store::{Commit, Committed, CompletedEntry, Effect, PartyStore, StoreError, StoredAck};

/// A terminal result of the pipeline (§5a.8: conclude it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The stage that decided.
    pub stage: Stage,
    /// The disposition.
    pub disposition: Disposition,
    /// The document digest, once stage 4 computed it.
    pub digest: Option<String>,
    /// The acknowledgement to transmit: the fresh one of a `unique`, or the
    /// **stored** one of a `duplicate-known` (byte-identical, §4.2); `None`
    /// for failures and for terminal documents.
    pub ack: Option<Box<StoredAck>>,
    /// For an accepted acknowledgement: what it did to the sender status
    /// (§6.1; [`Transition::LateDelivered`] MUST be surfaced).
    pub transition: Option<Transition>,
    /// Why, for logs (never on the wire, never to the carrier).
    pub detail: String,
}

impl Outcome {
    fn failed(stage: Stage, reason: FailReason, digest: Option<&str>, detail: String) -> Outcome {
        Outcome {
            stage,
            disposition: Disposition::Failed(reason),
            digest: digest.map(str::to_owned),
            ack: None,
            transition: None,
            detail,
        }
    }

    fn duplicate(entry: CompletedEntry) -> Outcome {
        Outcome {
            stage: Stage::DIGEST,
            disposition: Disposition::DuplicateKnown,
            digest: Some(entry.digest),
            ack: entry.ack.map(Box::new),
            transition: None,
            detail: String::new(),
        }
    }
}

/// An envelope that passed stages 1–3.
#[derive(Debug, Clone)]
pub struct Arrival<'k> {
    tuple: &'k Tuple,
    plaintext: Vec<u8>,
}

impl Arrival<'_> {
    /// The decrypted plaintext.
    pub fn plaintext(&self) -> &[u8] {
        &self.plaintext
    }
}

/// Not a disposition: the evaluation must run again later, and the
/// document is **not** concluded (§5a.8: transient).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// The lock set (held by another evaluation), or a skipped bundle whose
    /// state moved: holding nothing, re-enter at stage 4 once it is free.
    Reenter(Vec<LockKey>),
    /// The party store could not answer.
    Store(StoreError),
}

/// What [`Receiver::evaluate`] and [`Critical::commit`] answer.
#[derive(Debug)]
pub enum Step<'a> {
    /// A terminal disposition.
    Done(Outcome),
    /// Try again later, from stage 4.
    Pending(Pending),
    /// This evaluation holds its lock set: run [`Critical::commit`].
    Critical(Box<Critical<'a>>),
}

/// The receiver: its key ring, store, lock table, type registry and the
/// application's bundle handler.
pub struct Receiver<'a, S: ?Sized, H: ?Sized> {
    /// The arrival tuples and tombstones.
    pub keys: &'a KeyRing,
    /// The completed-effect cache, the kept acks, the sent-register.
    pub store: &'a S,
    /// The party's lock table.
    pub locks: &'a LockTable,
    /// The type registry.
    pub registry: &'a TypeRegistry,
    /// The application's Encounter seam.
    pub bundles: &'a H,
}

impl<S: ?Sized, H: ?Sized> Clone for Receiver<'_, S, H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: ?Sized, H: ?Sized> Copy for Receiver<'_, S, H> {}

/// What stage 8 prepared for stage 9.
#[derive(Debug, Clone)]
enum Prepared {
    Ack { acked: String },
    Credential { credential: Vec<u8> },
    Bundle { card: ContactCard, skipped: bool },
}

/// The state an evaluation carries from stage 8 into the critical section.
#[derive(Debug)]
struct Ready<'k> {
    tuple: &'k Tuple,
    document: Document,
    profiled: Profiled,
    entry: TypeEntry,
    prepared: Prepared,
}

/// An evaluation holding its stage-9 lock set.
pub struct Critical<'a> {
    run: &'a dyn Stage9,
    ready: Ready<'a>,
    guard: LockGuard<'a>,
}

impl std::fmt::Debug for Critical<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Critical")
            .field("digest", &self.ready.document.digest())
            .field("locks", &self.guard.keys())
            .finish()
    }
}

/// The receiver's stage 9, object-safe so [`Critical`] needs no type
/// parameters.
trait Stage9 {
    fn stage9(&self, ready: &Ready<'_>, now: Ms, id: String) -> Result<Step9, StoreError>;
}

enum Step9 {
    Done(Outcome),
    Reenter,
}

impl<'a> Critical<'a> {
    /// §6.2 stage 9 under the held lock set: re-checks the cache (a
    /// completed entry → `duplicate-known` with its stored ack), runs the
    /// effect, and commits effect, cache entry and acknowledgement as one
    /// transaction → `unique`. The lock set is released on return. `rng`
    /// supplies the acknowledgement's `id`; `now` its `issuedAt` and the
    /// commit instant.
    ///
    /// # Errors
    /// [`Pending::Reenter`] when a bundle skipped on `unknown` finds the
    /// state moved; [`Pending::Store`] when the store failed (nothing was
    /// committed).
    pub fn commit<R: rand::CryptoRng + ?Sized>(
        self,
        now: Ms,
        rng: &mut R,
    ) -> Result<Outcome, Pending> {
        let keys = self.guard.keys().to_vec();
        let result = self.run.stage9(&self.ready, now, uuid_v4(rng));
        drop(self.guard);
        match result {
            Ok(Step9::Done(outcome)) => Ok(outcome),
            Ok(Step9::Reenter) => Err(Pending::Reenter(keys)),
            Err(e) => Err(Pending::Store(e)),
        }
    }
}

fn shape_failure(e: &ShapeError) -> (Stage, FailReason) {
    match e {
        ShapeError::TooLarge { .. } | ShapeError::CiphertextTooLarge { .. } => {
            (Stage::SIZE, FailReason::Oversize)
        }
        _ => (Stage::ENVELOPE, FailReason::Malformed),
    }
}

impl<'a, S: PartyStore + ?Sized, H: BundleHandler + ?Sized> Receiver<'a, S, H> {
    /// §6.2 stages 1–3: size, envelope shape with a known `rkid`, decryption.
    ///
    /// # Errors
    /// The terminal [`Outcome`] of the first failing stage.
    pub fn open(&self, envelope: &[u8]) -> Result<Arrival<'a>, Outcome> {
        let fail = |(stage, reason): (Stage, FailReason), detail: String| {
            Outcome::failed(stage, reason, None, detail)
        };
        if envelope.len() > MAX_ENVELOPE_BYTES {
            let detail = format!("{} bytes", envelope.len());
            return Err(fail((Stage::SIZE, FailReason::Oversize), detail));
        }
        let malformed = |detail: String| fail((Stage::ENVELOPE, FailReason::Malformed), detail);
        let rkid = json::parse(envelope)
            .ok()
            .and_then(|v| v.as_object()?.get("rkid")?.as_str().map(str::to_owned))
            .and_then(|s| Rkid::parse(&s).ok())
            .ok_or_else(|| malformed("no envelope rkid".into()))?;
        let known = self
            .keys
            .find(&rkid)
            .ok_or_else(|| malformed("an rkid this party never issued".into()))?;
        let sealed = check_shape(envelope, &rkid, MAX_ENVELOPE_BYTES)
            .map_err(|e| fail(shape_failure(&e), e.to_string()))?;
        let decryption = (Stage::DECRYPTION, FailReason::DecryptionFailed);
        let Known::Live(tuple) = known else {
            return Err(fail(
                decryption,
                "a tombstoned rkid: its key is gone".into(),
            ));
        };
        match seal::open(&sealed, &tuple.own().x_secret()) {
            Ok(plaintext) => Ok(Arrival { tuple, plaintext }),
            Err(e @ SealError::CiphertextTooLarge { .. }) => {
                Err(fail((Stage::SIZE, FailReason::Oversize), e.to_string()))
            }
            Err(e) => Err(fail(decryption, e.to_string())),
        }
    }

    /// §6.2 stages 4–8 and the stage-9 lock acquisition (a re-entry starts
    /// here too). A [`Step::Critical`] holds the lock set until
    /// [`Critical::commit`] returns.
    pub fn evaluate(&'a self, arrival: &Arrival<'a>, now: Ms) -> Step<'a>
    where
        S: 'a,
        H: 'a,
    {
        let ready = match self.stages_4_to_8(arrival, now) {
            Ok(ready) => ready,
            Err(step) => return step,
        };
        let mut set = vec![LockKey::Digest(ready.document.digest().to_owned())];
        if let Prepared::Bundle { .. } = ready.prepared
            && let Some(challenge) = bound_challenge(&ready.profiled)
        {
            set.push(LockKey::RecordKey(challenge.to_owned()));
        }
        match self.locks.try_acquire(set.clone()) {
            Some(guard) => Step::Critical(Box::new(Critical {
                run: self,
                ready,
                guard,
            })),
            None => Step::Pending(Pending::Reenter(set)),
        }
    }

    /// Stages 1–9 in one call: the terminal outcome, or what is pending.
    ///
    /// # Errors
    /// [`Pending`]: the lock set is busy or the store failed (transient).
    pub fn receive<R: rand::CryptoRng + ?Sized>(
        &'a self,
        envelope: &[u8],
        now: Ms,
        rng: &mut R,
    ) -> Result<Outcome, Pending>
    where
        S: 'a,
        H: 'a,
    {
        let arrival = match self.open(envelope) {
            Ok(arrival) => arrival,
            Err(outcome) => return Ok(outcome),
        };
        match self.evaluate(&arrival, now) {
            Step::Done(outcome) => Ok(outcome),
            Step::Pending(pending) => Err(pending),
            Step::Critical(critical) => critical.commit(now, rng),
        }
    }

    fn stages_4_to_8(&self, arrival: &Arrival<'a>, now: Ms) -> Result<Ready<'a>, Step<'a>> {
        let done = |o: Outcome| Step::Done(o);
        let document = Document::parse(&arrival.plaintext).ok_or_else(|| {
            done(Outcome::failed(
                Stage::DIGEST,
                FailReason::Malformed,
                None,
                "the plaintext is not strict json".into(),
            ))
        })?;
        let digest = document.digest().to_owned();
        match self.store.completed(&digest) {
            Ok(Some(entry)) => return Err(done(Outcome::duplicate(entry))),
            Ok(None) => {}
            Err(e) => return Err(Step::Pending(Pending::Store(e))),
        }
        let fail = |stage, reason, detail: String| {
            done(Outcome::failed(stage, reason, Some(&digest), detail))
        };
        let profiled = profile(&document)
            .map_err(|e| fail(Stage::PROFILE, FailReason::Malformed, e.to_string()))?;
        if profiled.recipient != arrival.tuple.own().anchor() {
            return Err(fail(
                Stage::PROFILE,
                FailReason::WrongRecipient,
                profiled.recipient.to_did_key(),
            ));
        }
        let entry = *self.registry.get(&profiled.type_uri).ok_or_else(|| {
            fail(
                Stage::TYPE,
                FailReason::UnknownType,
                profiled.type_uri.clone(),
            )
        })?;
        let payload = to_serde(&Value::Object(profiled.payload.clone())).unwrap_or_default();
        schema::validate(entry.payload_schema, &payload)
            .map_err(|e| fail(Stage::PAYLOAD, FailReason::Malformed, e.to_string()))?;
        let prepared = self
            .stage_8(arrival.tuple, &profiled, &document, entry.kind, now)
            .map_err(|step| match step {
                Stage8Error::Fail(reason, detail) => fail(Stage::CONSISTENCY, reason, detail),
                Stage8Error::Store(e) => Step::Pending(Pending::Store(e)),
            })?;
        Ok(Ready {
            tuple: arrival.tuple,
            document,
            profiled,
            entry,
            prepared,
        })
    }

    /// §6.2 stage 8 by type: §4.2 for acknowledgements (against the
    /// sent-register), §4.3 for credential deliveries, §4.1 for bundles
    /// (the state-free checks here, checks 5–6 at the application's seam).
    fn stage_8(
        &self,
        tuple: &Tuple,
        profiled: &Profiled,
        document: &Document,
        kind: TypeKind,
        now: Ms,
    ) -> Result<Prepared, Stage8Error> {
        let invalid = |detail: String| Stage8Error::Fail(FailReason::ValidationFailed, detail);
        match kind {
            TypeKind::DeliveryAck => {
                let acked = profiled
                    .payload
                    .get("ref")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let sent = self.store.sent(&acked).map_err(Stage8Error::Store)?;
                check_ack(profiled, sent.as_ref(), tuple.keys())
                    .map_err(|e| invalid(e.to_string()))?;
                Ok(Prepared::Ack { acked })
            }
            TypeKind::CredentialDelivery => {
                let credential = consistency::credential_delivery(profiled)
                    .map_err(|e| invalid(e.to_string()))?;
                let credential = rltp_proofs::jcs::canonicalize(&Value::Object(credential.clone()))
                    .map_err(|e| invalid(e.to_string()))?;
                Ok(Prepared::Credential { credential })
            }
            TypeKind::Bundle => {
                let parts = consistency::bundle(profiled).map_err(|e| invalid(e.to_string()))?;
                let view = bundle_view(profiled, document.digest(), &parts);
                match self.bundles.pre_lock(&view, now) {
                    PreLock::Pass => Ok(Prepared::Bundle {
                        card: parts.card,
                        skipped: false,
                    }),
                    PreLock::Unknown => Ok(Prepared::Bundle {
                        card: parts.card,
                        skipped: true,
                    }),
                    PreLock::Fail(f) => Err(Stage8Error::Fail(f.into(), "pre-lock check".into())),
                }
            }
        }
    }
}

enum Stage8Error {
    Fail(FailReason, String),
    Store(StoreError),
}

fn bound_challenge(profiled: &Profiled) -> Option<&str> {
    profiled
        .payload
        .get("credential")?
        .as_object()?
        .get("credentialSubject")?
        .as_object()?
        .get("challenge")?
        .as_str()
}

fn bundle_view<'b>(
    profiled: &'b Profiled,
    digest: &'b str,
    parts: &'b BundleParts<'b>,
) -> Bundle<'b> {
    Bundle {
        document: profiled,
        digest,
        card: &parts.card,
        credential: parts.credential,
        bound_challenge: parts.bound_challenge,
        enactment_binding: parts.enactment_binding,
    }
}

impl<S: PartyStore + ?Sized, H: BundleHandler + ?Sized> Stage9 for Receiver<'_, S, H> {
    fn stage9(&self, ready: &Ready<'_>, now: Ms, id: String) -> Result<Step9, StoreError> {
        let digest = ready.document.digest();
        if let Some(entry) = self.store.completed(digest)? {
            return Ok(Step9::Done(Outcome::duplicate(entry)));
        }
        let (effect, seal_to) = match &ready.prepared {
            Prepared::Ack { acked } => (
                Effect::SenderStatus {
                    acked: acked.clone(),
                },
                None,
            ),
            Prepared::Credential { credential } => (
                Effect::Buffered {
                    credential: credential.clone(),
                },
                counterpart_route(ready),
            ),
            Prepared::Bundle { card, skipped } => {
                match self.bundle_in_lock(ready, card, *skipped, now) {
                    Ok(record) => (Effect::Application { record }, Some(*card.key_agreement())),
                    Err(step) => return Ok(step),
                }
            }
        };
        let ack = match ready.entry.ack_class {
            Some(class) => {
                let made = make_ack(
                    &ready.profiled,
                    digest,
                    class,
                    ready.tuple.keys(),
                    id,
                    &rfc3339_utc(now),
                );
                match made {
                    Ok(ack) => Some(StoredAck {
                        document: ack.jcs().to_vec(),
                        digest: ack.digest().to_owned(),
                        seal_to,
                    }),
                    // No tuple key for a MAC-class ack: nothing is committed.
                    Err(e) => return Err(StoreError(format!("acknowledgement: {e}"))),
                }
            }
            None => None,
        };
        let commit = Commit {
            entry: CompletedEntry {
                digest: digest.to_owned(),
                type_uri: ready.profiled.type_uri.clone(),
                committed_at: now,
                ack: ack.clone(),
            },
            effect,
        };
        Ok(Step9::Done(match self.store.commit(commit)? {
            Committed::AlreadyCompleted(entry) => Outcome::duplicate(entry),
            Committed::Fresh { transition } => Outcome {
                stage: Stage::EFFECT,
                disposition: Disposition::Unique,
                digest: Some(digest.to_owned()),
                ack: ack.map(Box::new),
                transition,
                detail: String::new(),
            },
        }))
    }
}

impl<S: PartyStore + ?Sized, H: BundleHandler + ?Sized> Receiver<'_, S, H> {
    /// §4.1 inside the critical section: the application's authoritative
    /// resolution and effect.
    fn bundle_in_lock(
        &self,
        ready: &Ready<'_>,
        card: &ContactCard,
        skipped: bool,
        now: Ms,
    ) -> Result<Vec<u8>, Step9> {
        let digest = ready.document.digest();
        let credential = ready
            .profiled
            .payload
            .get("credential")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(Object::new);
        let text = |member: &str| {
            credential
                .get("credentialSubject")
                .and_then(Value::as_object)
                .and_then(|s| s.get(member))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let view = Bundle {
            document: &ready.profiled,
            digest,
            card,
            credential: &credential,
            bound_challenge: text("challenge"),
            enactment_binding: text("enactmentBinding"),
        };
        match self.bundles.in_lock(&view, skipped, now) {
            InLock::Commit { record } => Ok(record),
            InLock::Fail(f) => Err(Step9::Done(Outcome::failed(
                Stage::EFFECT,
                f.into(),
                Some(digest),
                "in-lock resolution".into(),
            ))),
            InLock::StateMoved => Err(Step9::Reenter),
        }
    }
}

/// Where an acknowledgement of a non-bundle document goes: the
/// counterpart's key-agreement key, when its card names the document's
/// issuer.
fn counterpart_route(ready: &Ready<'_>) -> Option<Rkid> {
    ready
        .tuple
        .counterpart()
        .filter(|card| card.anchor() == &ready.profiled.issuer)
        .map(|card| *card.key_agreement())
}
