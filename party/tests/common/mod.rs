//! Shared by the party crate's integration tests: parties with fixed key
//! material, document and envelope builders, a fixed-entropy RNG, and the
//! scenario format of `vectors/party/*.json` with its one runner (the
//! generator and the read-back tests both execute scenarios through it).

#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Mutex;

use rand_core::{TryCryptoRng, TryRng};
use rltp_party::bundle::{Bundle, BundleHandler, InLock, InLockFailure, PreLock};
use rltp_party::card::ContactCard;
use rltp_party::document::{Document, Header};
use rltp_party::keyring::KeyRing;
use rltp_party::locks::LockTable;
use rltp_party::registry::{AckClass, TypeRegistry};
use rltp_party::relationship::Relationship;
use rltp_party::sender::{SenderFailure, SenderStatus, SentEntry};
use rltp_party::store::{MemStore, PartyStore};
use rltp_party::{Outcome, Pending, Receiver, Step};
use rltp_proofs::Ms;
use rltp_proofs::context::PairContext;
use rltp_proofs::declaration::{eddsa_jcs_2022_sign, rfc3339_utc};
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::seal::seal_deterministic;
use serde::{Deserialize, Serialize};

/// 2026-09-01T12:00:00Z.
pub const NOW: Ms = 1_788_264_000_000;
/// When every card of the scenarios is signed.
pub const CARD_CREATED: &str = "2026-08-31T12:00:00Z";
/// The one delivery hint every scenario card carries.
pub const HINT: &str =
    "rltp+quic://127.0.0.1:4433#sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub fn unhex32(s: &str) -> [u8; 32] {
    unhex(s).try_into().unwrap()
}

/// An RNG that yields the given bytes, then zeros: the acknowledgement's
/// `id` entropy, fixed so a vector's ack bytes reproduce anywhere.
pub struct FixedRng {
    bytes: Vec<u8>,
    at: usize,
}

impl FixedRng {
    pub fn new(bytes: &[u8]) -> FixedRng {
        FixedRng {
            bytes: bytes.to_vec(),
            at: 0,
        }
    }
}

impl TryRng for FixedRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for byte in dst {
            *byte = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at += 1;
        }
        Ok(())
    }
}
impl TryCryptoRng for FixedRng {}

/// A party's fixed key material.
#[derive(Debug, Clone, Copy)]
pub struct Keys {
    pub root: [u8; 64],
    pub pair_nonce: [u8; 32],
}

/// `delivery-ack.json`'s acknowledged-document sender (its ack `recipient`).
pub const A: Keys = Keys {
    root: [0x09; 64],
    pair_nonce: [0x05; 32],
};
/// `delivery-ack.json`'s acknowledging party (its ack `issuer`).
pub const B: Keys = Keys {
    root: [0x07; 64],
    pair_nonce: [0x03; 32],
};
/// A third party that wraps what is not its own.
pub const MALLORY: Keys = Keys {
    root: [0x0b; 64],
    pair_nonce: [0x0d; 32],
};

pub fn context(keys: Keys) -> PairContext {
    PairContext::from_nonce(&keys.root, &keys.pair_nonce)
}

/// The party's relationship with its own displayed card (one hint).
pub fn relationship(keys: Keys) -> Relationship {
    let mut record = Relationship::derive(&keys.root, keys.pair_nonce)
        .unwrap()
        .to_record();
    let card = ContactCard::sign_displayed(&context(keys), &[HINT.parse().unwrap()], CARD_CREATED)
        .unwrap();
    record.own_card = Some(card_json(&card));
    Relationship::from_record(&record).unwrap()
}

pub fn card_json(card: &ContactCard) -> serde_json::Value {
    rltp_party::document::to_serde(&Value::Object(card.object().clone())).unwrap()
}

/// Seals `plaintext` to `rkid` with ephemeral secret and nonce drawn from
/// `seed` (deterministic, as vectors need).
pub fn seal(plaintext: &[u8], rkid: &Rkid, seed: u8) -> String {
    let (envelope, _) = seal_deterministic(plaintext, rkid, [seed; 32], [seed; 12]).unwrap();
    String::from_utf8(envelope.to_bytes()).unwrap()
}

/// A 0.25 step credential issued by `issuer` to `subject`.
pub fn credential(
    issuer: &PairContext,
    subject: &DidKey,
    challenge: &str,
    binding: &str,
) -> Object {
    let context: Vec<Value> = [
        "https://www.w3.org/ns/credentials/v2",
        "https://firstperson.network/credentials/dtg/v1",
        "https://real-life.org/rltp/v1",
    ]
    .into_iter()
    .map(Value::from)
    .collect();
    let types: Vec<Value> = [
        "VerifiableCredential",
        "DTGCredential",
        "RelationshipCredential",
        "EncounterCredential",
    ]
    .into_iter()
    .map(Value::from)
    .collect();
    let mut cs = Object::new();
    cs.insert("id", subject.to_did_key());
    cs.insert("format", "rltp-encounter-credential/0.25");
    cs.insert("ceremony", "encounter-scan@0.25");
    cs.insert("challenge", challenge);
    cs.insert("enactmentBinding", binding);
    let mut c = Object::new();
    c.insert("@context", context);
    c.insert("type", types);
    c.insert("issuer", issuer.anchor().to_did_key());
    c.insert("validFrom", "2026-09-01T11:59:00Z");
    c.insert("credentialSubject", cs);
    eddsa_jcs_2022_sign(&c, "2026-09-01T11:59:00Z", issuer.signing_key()).unwrap()
}

/// A sent card of `issuer` for a bundle to `to`, answering `bound_to`.
pub fn sent_card(issuer: &PairContext, to: &DidKey, own_challenge: &str, bound_to: &str) -> Object {
    let mut challenge = Object::new();
    challenge.insert("value", own_challenge);
    challenge.insert("issuedAt", "2026-09-01T11:58:00Z");
    let mut card = Object::new();
    card.insert("version", "rltp-card/0.25");
    card.insert("anchor", issuer.anchor().to_did_key());
    card.insert("keyAgreement", issuer.rkid().to_multikey());
    card.insert("challenge", challenge);
    card.insert("sentTo", to.to_did_key());
    card.insert("boundTo", bound_to);
    eddsa_jcs_2022_sign(&card, "2026-09-01T11:58:30Z", issuer.signing_key()).unwrap()
}

/// A document with the given outer members and payload.
pub fn document(
    id: &str,
    type_uri: &str,
    issuer: &DidKey,
    recipient: &DidKey,
    thread: &str,
    payload: Object,
) -> Object {
    Header {
        id: id.into(),
        type_uri: type_uri.into(),
        issuer: *issuer,
        recipient: *recipient,
        thread_id: thread.into(),
        issued_at: rfc3339_utc(NOW - 60_000),
    }
    .with_payload(payload)
}

pub fn jcs(object: &Object) -> Vec<u8> {
    Document::from_value(Value::Object(object.clone()))
        .unwrap()
        .jcs()
        .to_vec()
}

pub fn digest(object: &Object) -> String {
    Document::from_value(Value::Object(object.clone()))
        .unwrap()
        .digest()
        .to_owned()
}

// ---------------------------------------------------------------------------
// The scenario format of vectors/party/*.json, and its runner
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub description: String,
    pub contract: String,
    pub now: String,
    pub now_ms: u64,
    pub parties: BTreeMap<String, PartySpec>,
    pub steps: Vec<StepSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartySpec {
    pub root_ikm: String,
    pub pair_nonce: String,
    pub anchor: String,
    pub rkid: String,
    pub card: serde_json::Value,
    pub counterpart: Option<String>,
    pub tombstones: Vec<String>,
    pub sent: Vec<SentSpec>,
    pub open_challenges: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SentSpec {
    pub digest: String,
    pub thread_id: String,
    pub issuer: String,
    pub recipient: String,
    #[serde(rename = "type")]
    pub type_uri: String,
    pub class: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepSpec {
    pub name: String,
    pub note: String,
    pub receiver: String,
    /// One envelope; two for a concurrent first delivery (evaluated
    /// interleaved: first enters stage 9, second finds the lock set held,
    /// first commits, second re-enters at stage 4).
    pub envelopes: Vec<String>,
    /// 16 bytes of entropy for the acknowledgement's `id`, hex.
    pub ack_entropy: Option<String>,
    pub expect: Vec<Expect>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    pub stage: u8,
    pub disposition: String,
    pub digest: Option<String>,
    /// The acknowledgement to transmit, as its JCS text.
    pub ack: Option<String>,
    pub ack_seal_to: Option<String>,
    pub transition: Option<String>,
    /// For an acknowledgement: the sender status of its `ref` afterwards.
    pub status_after: Option<String>,
}

/// The bundle handler of a scenario party: its own open challenges.
/// `open` → the record-creating effect; skipped-then-open → state moved;
/// anything else `unknown` → `failed(validation-failed)`.
pub struct OpenChallenges {
    pub open: Mutex<BTreeSet<String>>,
}

impl BundleHandler for OpenChallenges {
    fn pre_lock(&self, bundle: &Bundle<'_>, _: Ms) -> PreLock {
        if self.open.lock().unwrap().contains(bundle.bound_challenge) {
            PreLock::Pass
        } else {
            PreLock::Unknown
        }
    }
    fn in_lock(&self, bundle: &Bundle<'_>, skipped: bool, _: Ms) -> InLock {
        let open = self.open.lock().unwrap().contains(bundle.bound_challenge);
        match (open, skipped) {
            (true, false) => InLock::Commit {
                record: format!(
                    "enactment {} with {}",
                    bundle.bound_challenge, bundle.document.issuer
                )
                .into_bytes(),
            },
            (true, true) => InLock::StateMoved,
            (false, _) => InLock::Fail(InLockFailure::ValidationFailed),
        }
    }
}

pub fn parse_status(s: &str) -> SenderStatus {
    match s {
        "accepted" => SenderStatus::Accepted,
        "delivered" => SenderStatus::Delivered,
        "failed(expired-by-adapter-policy)" => {
            SenderStatus::Failed(SenderFailure::ExpiredByAdapterPolicy)
        }
        other => panic!("status {other} not used by the scenarios"),
    }
}

pub fn parse_class(s: &str) -> AckClass {
    match s {
        "signature" => AckClass::Signature,
        "designated-verifier" => AckClass::DesignatedVerifier,
        other => panic!("class {other}"),
    }
}

/// One party of a running scenario.
pub struct RunParty {
    pub keys: KeyRing,
    pub store: MemStore,
    pub locks: LockTable,
    pub bundles: OpenChallenges,
}

/// Builds the party `name` of `scenario` from its spec alone.
pub fn build_party(scenario: &Scenario, name: &str) -> RunParty {
    let spec = &scenario.parties[name];
    let mut record = Relationship::derive(&unhex(&spec.root_ikm), unhex32(&spec.pair_nonce))
        .unwrap()
        .to_record();
    record.own_card = Some(spec.card.clone());
    record.counterpart_card = spec
        .counterpart
        .as_ref()
        .map(|c| scenario.parties[c].card.clone());
    record.tombstones = spec.tombstones.clone();
    let relationship = Relationship::from_record(&record).unwrap();
    assert_eq!(
        relationship.anchor().to_did_key(),
        spec.anchor,
        "{name} anchor"
    );
    assert_eq!(relationship.rkid().to_multikey(), spec.rkid, "{name} rkid");
    let store = MemStore::new();
    for sent in &spec.sent {
        store
            .record_sent(SentEntry {
                digest: sent.digest.clone(),
                thread_id: sent.thread_id.clone(),
                issuer: DidKey::parse(&sent.issuer).unwrap(),
                recipient: DidKey::parse(&sent.recipient).unwrap(),
                type_uri: sent.type_uri.clone(),
                class: parse_class(&sent.class),
                status: parse_status(&sent.status),
                sent_at: scenario.now_ms - 3_600_000,
            })
            .unwrap();
    }
    RunParty {
        keys: KeyRing::new(&[relationship]),
        store,
        locks: LockTable::new(),
        bundles: OpenChallenges {
            open: Mutex::new(spec.open_challenges.iter().cloned().collect()),
        },
    }
}

pub fn expect_of(outcome: &Outcome) -> Expect {
    Expect {
        stage: outcome.stage.number(),
        disposition: outcome.disposition.to_string(),
        digest: outcome.digest.clone(),
        ack: outcome
            .ack
            .as_ref()
            .map(|a| String::from_utf8(a.document.clone()).unwrap()),
        ack_seal_to: outcome
            .ack
            .as_ref()
            .and_then(|a| a.seal_to.map(|r| r.to_multikey())),
        transition: outcome.transition.map(|t| t.as_str().to_owned()),
        status_after: None,
    }
}

/// The `ref` of an acknowledgement envelope's plaintext, when the receiver
/// can open it (for `statusAfter`).
fn status_after(party: &RunParty, envelope: &str) -> Option<String> {
    let receiver = receiver(party);
    let arrival = receiver.open(envelope.as_bytes()).ok()?;
    let value = json::parse(arrival.plaintext()).ok()?;
    let object = value.as_object()?;
    if object.get("type")?.as_str()? != rltp_party::registry::DELIVERY_ACK {
        return None;
    }
    let acked = object.get("payload")?.as_object()?.get("ref")?.as_str()?;
    Some(party.store.sent(acked).ok()??.status.to_string())
}

pub fn receiver(party: &RunParty) -> Receiver<'_, MemStore, OpenChallenges> {
    static REGISTRY: std::sync::OnceLock<TypeRegistry> = std::sync::OnceLock::new();
    Receiver {
        keys: &party.keys,
        store: &party.store,
        locks: &party.locks,
        registry: REGISTRY.get_or_init(TypeRegistry::standard),
        bundles: &party.bundles,
    }
}

/// Runs one step against its receiver; returns what happened.
pub fn run_step(party: &RunParty, step: &StepSpec, now: Ms) -> Vec<Expect> {
    let entropy = step.ack_entropy.as_deref().map(unhex).unwrap_or_default();
    let mut rng = FixedRng::new(&entropy);
    let receiver = receiver(party);
    let outcomes = match step.envelopes.as_slice() {
        [one] => vec![receive(&receiver, one, now, &mut rng)],
        [first, second] => concurrent(&receiver, first, second, now, &mut rng),
        _ => panic!("{}: one or two envelopes", step.name),
    };
    let status = step.envelopes.first().and_then(|e| status_after(party, e));
    outcomes
        .iter()
        .map(|o| Expect {
            status_after: status.clone(),
            ..expect_of(o)
        })
        .collect()
}

fn receive(
    receiver: &Receiver<'_, MemStore, OpenChallenges>,
    envelope: &str,
    now: Ms,
    rng: &mut FixedRng,
) -> Outcome {
    // A state-moved bundle re-enters at stage 4 once; nothing else is pending here.
    for _ in 0..2 {
        match receiver.receive(envelope.as_bytes(), now, rng) {
            Ok(outcome) => return outcome,
            Err(Pending::Reenter(_)) => continue,
            Err(e) => panic!("pending: {e:?}"),
        }
    }
    panic!("still pending after a re-entry")
}

/// §6.2 stage 9 with two evaluations of one document: the first takes the
/// lock set, the second finds it held and holds nothing, the first
/// commits, the second re-enters at stage 4.
fn concurrent(
    receiver: &Receiver<'_, MemStore, OpenChallenges>,
    first: &str,
    second: &str,
    now: Ms,
    rng: &mut FixedRng,
) -> Vec<Outcome> {
    let a1 = receiver.open(first.as_bytes()).unwrap();
    let a2 = receiver.open(second.as_bytes()).unwrap();
    let Step::Critical(critical) = receiver.evaluate(&a1, now) else {
        panic!("the first evaluation takes the lock set");
    };
    let Step::Pending(Pending::Reenter(_)) = receiver.evaluate(&a2, now) else {
        panic!("the second evaluation finds the lock set held");
    };
    let o1 = critical.commit(now, rng).unwrap();
    let Step::Done(o2) = receiver.evaluate(&a2, now) else {
        panic!("the re-entry at stage 4 decides");
    };
    vec![o1, o2]
}

/// Runs every step of `scenario` in order, each party keeping its state.
pub fn run(scenario: &Scenario) -> Vec<Vec<Expect>> {
    let parties: BTreeMap<&str, RunParty> = scenario
        .parties
        .keys()
        .map(|name| (name.as_str(), build_party(scenario, name)))
        .collect();
    scenario
        .steps
        .iter()
        .map(|step| run_step(&parties[step.receiver.as_str()], step, scenario.now_ms))
        .collect()
}
