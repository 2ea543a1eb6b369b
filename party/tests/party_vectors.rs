//! The project's own vectors for the §11 plan (`vectors/party/*.json`):
//! every stage's disposition (with the Mallory-wrapped credential and the
//! byte-identical re-acknowledgement after a crash between commit and
//! transmission), the signature-class forgery matrix, the redelivered and
//! the late acknowledgement at the sender, and concurrent first
//! deliveries.
//!
//! Each file is a scenario: parties (key material, cards, tombstones,
//! sent-register, open challenges) and steps (envelopes in, the expected
//! stage, disposition, acknowledgement bytes, transition and sender status
//! out). The builders below state what each step is meant to show and
//! assert it; the runner (`common::run`) executes a scenario from its JSON
//! alone. `RLTP_REGENERATE_PARTY_VECTORS=1 cargo nextest run -p rltp-party
//! -E 'test(vectors_are_current)'` rewrites the files; without it the test
//! fails if a file differs from what the code generates.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{
    A, B, Expect, Keys, MALLORY, NOW, PartySpec, Scenario, SentSpec, StepSpec, card_json, context,
    credential, digest, document, hex, jcs, relationship, seal, sent_card,
};
use rltp_party::ack::{TupleKeys, make_ack, prove};
use rltp_party::bundle::{ENCOUNTER_SCAN, enactment_binding};
use rltp_party::document::{Document, profile};
use rltp_party::registry::{AckClass, CREDENTIAL_DELIVERY, ENCOUNTER_BUNDLE};
use rltp_proofs::context::PairContext;
use rltp_proofs::declaration::{eddsa_jcs_2022_sign, rfc3339_utc};
use rltp_proofs::encoding::b64url_encode;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::SealedEnvelope;

const ENV: &str = "RLTP_REGENERATE_PARTY_VECTORS";
const CONTRACT: &str = "rltp-delivery@0.80 §4.1–§4.4, §6.1, §6.2; Identity 0.52 §5";
const TOMBSTONE: Keys = Keys {
    root: [0x21; 64],
    pair_nonce: [0x22; 32],
};
const CH_OPEN: &str = "bOpenChallengeOfB_0000000000000000000000AA";
const CH_UNKNOWN: &str = "bUnknownChallengeOfB_00000000000000000000AA";
const CH_A: &str = "aSentChallengeOfA_000000000000000000000000AA";

fn uuid(n: u8) -> String {
    format!("00000000-0000-4000-8000-0000000000{n:02x}")
}

fn party(keys: Keys, counterpart: Option<&str>) -> PartySpec {
    let r = relationship(keys);
    PartySpec {
        root_ikm: hex(&keys.root),
        pair_nonce: hex(&keys.pair_nonce),
        anchor: r.anchor().to_did_key(),
        rkid: r.rkid().to_multikey(),
        card: card_json(r.own_card().unwrap()),
        counterpart: counterpart.map(str::to_owned),
        tombstones: Vec::new(),
        sent: Vec::new(),
        open_challenges: Vec::new(),
    }
}

fn step(name: &str, note: &str, receiver: &str, envelopes: Vec<String>) -> StepSpec {
    StepSpec {
        name: name.into(),
        note: note.into(),
        receiver: receiver.into(),
        envelopes,
        ack_entropy: None,
        expect: Vec::new(),
    }
}

/// Runs the scenario, records what happened, and checks each step's
/// intended (stage, disposition) list.
fn finish(mut scenario: Scenario, intended: &[&[(u8, &str)]]) -> Scenario {
    assert_eq!(scenario.steps.len(), intended.len());
    let results = common::run(&scenario);
    for ((step, actual), want) in scenario.steps.iter_mut().zip(results).zip(intended) {
        let got: Vec<(u8, &str)> = actual
            .iter()
            .map(|e| (e.stage, e.disposition.as_str()))
            .collect();
        assert_eq!(&got, want, "{}", step.name);
        step.expect = actual;
    }
    scenario
}

fn scenario(description: &str, parties: Vec<(&str, PartySpec)>, steps: Vec<StepSpec>) -> Scenario {
    Scenario {
        description: description.into(),
        contract: CONTRACT.into(),
        now: rfc3339_utc(NOW),
        now_ms: NOW,
        parties: parties
            .into_iter()
            .map(|(n, p)| (n.to_owned(), p))
            .collect::<BTreeMap<_, _>>(),
        steps,
    }
}

/// A credential delivery to B: a document issued by `outer`, enclosing a
/// credential of `from` (equal for an honest sender).
fn delivery(n: u8, from: &PairContext, outer: &PairContext, thread: &str) -> Object {
    let b = context(B);
    let binding = enactment_binding(ENCOUNTER_SCAN, CH_A, CH_OPEN).unwrap();
    let mut payload = Object::new();
    payload.insert(
        "credential",
        credential(from, &b.anchor(), CH_OPEN, &binding),
    );
    document(
        &uuid(n),
        CREDENTIAL_DELIVERY,
        &outer.anchor(),
        &b.anchor(),
        thread,
        payload,
    )
}

fn bundle(n: u8, challenge: &str) -> Object {
    let (a, b) = (context(A), context(B));
    let binding = enactment_binding(ENCOUNTER_SCAN, CH_A, challenge).unwrap();
    let mut payload = Object::new();
    payload.insert("card", sent_card(&a, &b.anchor(), CH_A, challenge));
    payload.insert(
        "credential",
        credential(&a, &b.anchor(), challenge, &binding),
    );
    document(
        &uuid(n),
        ENCOUNTER_BUNDLE,
        &a.anchor(),
        &b.anchor(),
        &uuid(0x80 + n),
        payload,
    )
}

fn sealed_raw(plaintext: &[u8], rkid: &Rkid, seed: u8) -> SealedEnvelope {
    rltp_proofs::seal::seal_deterministic(plaintext, rkid, [seed; 32], [seed; 12])
        .unwrap()
        .0
}

/// Steps 1–7: the envelope and parse stages.
fn early_stages(b_rkid: &Rkid) -> Vec<StepSpec> {
    let oversize = SealedEnvelope {
        rkid: *b_rkid,
        epk: [1; 32],
        nonce: [1; 12],
        ciphertext: vec![0; 65_553],
    };
    let mut tag = sealed_raw(b"{\"x\":1}", b_rkid, 3);
    tag.ciphertext[0] ^= 1;
    let good = String::from_utf8(sealed_raw(b"{\"x\":1}", b_rkid, 4).to_bytes()).unwrap();
    let epk = b64url_encode(&sealed_raw(b"{\"x\":1}", b_rkid, 4).epk);
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = epk.chars().last().unwrap();
    let bumped = alphabet
        .chars()
        .nth(alphabet.find(last).unwrap() | 1)
        .unwrap();
    let non_canonical = good.replace(&epk, &format!("{}{bumped}", &epk[..epk.len() - 1]));
    vec![
        step(
            "stage-1-oversize",
            "a ciphertext of 65 553 bytes (plaintext 65 537): larger than the §5 bound",
            "B",
            vec![String::from_utf8(oversize.to_bytes()).unwrap()],
        ),
        step(
            "stage-2-not-an-envelope",
            "strict JSON, but not the §5 envelope",
            "B",
            vec!["{\"hello\":\"world\"}".into()],
        ),
        step(
            "stage-2-unknown-rkid",
            "sealed to an rkid B never issued (Mallory's)",
            "B",
            vec![seal(b"{\"x\":1}", &context(MALLORY).rkid(), 5)],
        ),
        step(
            "stage-2-non-canonical-base64url",
            "epk with non-zero trailing bits",
            "B",
            vec![non_canonical],
        ),
        step(
            "stage-3-tombstoned-rkid",
            "sealed to a retired rkid B keeps as a tombstone: known, but its key is gone",
            "B",
            vec![seal(b"{\"x\":1}", &context(TOMBSTONE).rkid(), 6)],
        ),
        step(
            "stage-3-tag",
            "one ciphertext bit flipped",
            "B",
            vec![String::from_utf8(tag.to_bytes()).unwrap()],
        ),
        step(
            "stage-4-not-json",
            "the plaintext is not JSON",
            "B",
            vec![seal(b"not json", b_rkid, 7)],
        ),
    ]
}

/// Steps 8–13: profile, recipient, type, payload, consistency.
fn middle_stages(b_rkid: &Rkid) -> Vec<StepSpec> {
    let (a, m) = (context(A), context(MALLORY));
    let mut expiring = delivery(1, &a, &a, &uuid(0x41));
    expiring.insert("expiresAt", "2026-09-02T00:00:00Z");
    let mut misaddressed = delivery(2, &a, &a, &uuid(0x42));
    misaddressed.insert("recipient", m.anchor().to_did_key());
    let mut unknown = delivery(3, &a, &a, &uuid(0x43));
    unknown.insert(
        "type",
        "https://real-life.org/trust-tasks/delivery-carrier/0.1",
    );
    let mut empty = delivery(4, &a, &a, &uuid(0x44));
    empty.insert("payload", Object::new());
    let wrapped = delivery(5, &a, &m, &uuid(0x45));
    let mut ceremony = Object::new();
    ceremony.insert(
        "enactment",
        "uEiAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    );
    let mut lying = delivery(6, &a, &a, &uuid(0x46));
    lying.insert("ceremony", ceremony);
    let sealed = |o: &Object, s: u8| vec![seal(&jcs(o), b_rkid, s)];
    vec![
        step(
            "stage-5-profile",
            "expiresAt present: the §3 profile is closed",
            "B",
            sealed(&expiring, 8),
        ),
        step(
            "stage-5-wrong-recipient",
            "sealed to B, addressed to Mallory's anchor",
            "B",
            sealed(&misaddressed, 9),
        ),
        step(
            "stage-6-unknown-type",
            "the carrier role URI is nobody's document type (§11)",
            "B",
            sealed(&unknown, 10),
        ),
        step(
            "stage-7-payload",
            "an encounter-credential-delivery without its credential",
            "B",
            sealed(&empty, 11),
        ),
        step(
            "stage-8-mallory-wrapped-credential",
            "Mallory wraps A's credential for B in its own document: issuer ≠ credential.issuer (§4.3) — no acknowledgement, to anyone",
            "B",
            sealed(&wrapped, 12),
        ),
        step(
            "stage-8-enactment-does-not-recompute",
            "ceremony.enactment present and ≠ the credential's enactmentBinding (§3)",
            "B",
            sealed(&lying, 13),
        ),
    ]
}

fn stages() -> Scenario {
    let mut b = party(B, Some("A"));
    b.tombstones = vec![context(TOMBSTONE).rkid().to_multikey()];
    b.open_challenges = vec![CH_OPEN.into()];
    let b_rkid = context(B).rkid();
    let a = context(A);
    let mut steps = early_stages(&b_rkid);
    steps.extend(middle_stages(&b_rkid));
    let unknown_bundle = seal(&jcs(&bundle(7, CH_UNKNOWN)), &b_rkid, 14);
    let d = delivery(9, &a, &a, &uuid(0x49));
    let mut tail = vec![
        step(
            "stage-9-bundle-unknown",
            "a well-formed bundle whose bound challenge B does not hold: unknown under the lock (§4.1 check 5)",
            "B",
            vec![unknown_bundle.clone()],
        ),
        step(
            "stage-9-bundle-unique",
            "a bundle answering B's open challenge: the record-creating effect, the cache entry and the signed acknowledgement in one transaction; the ack is sealed to the card's keyAgreement",
            "B",
            vec![seal(&jcs(&bundle(8, CH_OPEN)), &b_rkid, 15)],
        ),
        step(
            "stage-9-credential-delivery-unique",
            "A's credential delivery: durable buffering, acknowledgement kept",
            "B",
            vec![seal(&jcs(&d), &b_rkid, 16)],
        ),
        step(
            "crash-after-commit-re-ack",
            "the same document redelivered (a fresh seal) after B committed but never transmitted its ack: duplicate-known re-sends the STORED ack byte-identical",
            "B",
            vec![seal(&jcs(&d), &b_rkid, 17)],
        ),
        step(
            "stage-9-bundle-unknown-again",
            "the rejected bundle again: a rejected digest is not in the cache and is evaluated in full",
            "B",
            vec![unknown_bundle],
        ),
    ];
    tail[1].ack_entropy = Some(hex(&[0xb1; 16]));
    tail[2].ack_entropy = Some(hex(&[0xb2; 16]));
    steps.extend(tail);
    let s = scenario(
        "Delivery §6.2: each stage's disposition, at receiver B (A's counterpart)",
        vec![
            ("A", party(A, Some("B"))),
            ("B", b),
            ("M", party(MALLORY, None)),
        ],
        steps,
    );
    let s = finish(
        s,
        &[
            &[(1, "failed(oversize)")],
            &[(2, "failed(malformed)")],
            &[(2, "failed(malformed)")],
            &[(2, "failed(malformed)")],
            &[(3, "failed(decryption-failed)")],
            &[(3, "failed(decryption-failed)")],
            &[(4, "failed(malformed)")],
            &[(5, "failed(malformed)")],
            &[(5, "failed(wrong-recipient)")],
            &[(6, "failed(unknown-type)")],
            &[(7, "failed(malformed)")],
            &[(8, "failed(validation-failed)")],
            &[(8, "failed(validation-failed)")],
            &[(9, "failed(validation-failed)")],
            &[(9, "unique")],
            &[(9, "unique")],
            &[(4, "duplicate-known")],
            &[(9, "failed(validation-failed)")],
        ],
    );
    let acks: Vec<&Expect> = s.steps.iter().flat_map(|st| &st.expect).collect();
    assert!(
        acks[..14].iter().all(|e| e.ack.is_none()),
        "no ack for a rejected document"
    );
    assert!(acks[14].ack.is_some() && acks[15].ack.is_some());
    assert_eq!(
        acks[14].ack_seal_to.as_deref(),
        Some(a.rkid().to_multikey().as_str())
    );
    assert_eq!(acks[16].ack, acks[15].ack, "the stored ack, byte-identical");
    s
}

/// B's signed acknowledgement of `acked`, with `edit` applied before signing
/// by `signer`.
fn ack_of(acked: &Object, signer: &PairContext, edit: impl FnOnce(&mut Object)) -> Object {
    let (a, b) = (context(A), context(B));
    let doc = Document::from_value(Value::Object(acked.clone())).unwrap();
    let profiled = profile(&doc).unwrap();
    let keys = TupleKeys {
        own: &b,
        counterpart_key: Some(&a.rkid()),
    };
    let made = make_ack(
        &profiled,
        doc.digest(),
        AckClass::Signature,
        keys,
        uuid(0xa0),
        &rfc3339_utc(NOW - 30_000),
    )
    .unwrap();
    let mut unsecured = made.value().as_object().unwrap().clone();
    unsecured.remove("proof");
    edit(&mut unsecured);
    eddsa_jcs_2022_sign(&unsecured, &rfc3339_utc(NOW - 30_000), signer.signing_key()).unwrap()
}

fn sent(document: &Object, class: &str, status: &str) -> SentSpec {
    let get = |m: &str| document.get(m).and_then(Value::as_str).unwrap().to_owned();
    SentSpec {
        digest: digest(document),
        thread_id: get("threadId"),
        issuer: get("issuer"),
        recipient: get("recipient"),
        type_uri: get("type"),
        class: class.into(),
        status: status.into(),
    }
}

/// Sender A with D1 (accepted) and D2 (given up) in its register, and the
/// acknowledgements that arrive for them, forged and valid.
fn sender_ack_steps() -> (PartySpec, Vec<StepSpec>) {
    let (a, b, m) = (context(A), context(B), context(MALLORY));
    let d1 = delivery(0x21, &a, &a, &uuid(0x61));
    let d2 = bundle(0x22, CH_OPEN);
    let mut a_spec = party(A, Some("B"));
    a_spec.sent = vec![
        sent(&d1, "signature", "accepted"),
        sent(&d2, "signature", "failed(expired-by-adapter-policy)"),
    ];
    let to_a = |o: &Object, s: u8| vec![seal(&jcs(o), &a.rkid(), s)];
    let mut unsigned = ack_of(&d1, &b, |_| {});
    unsigned.remove("proof");
    let swapped = ack_of(&d1, &b, |o| {
        o.insert("issuer", a.anchor().to_did_key());
        o.insert("recipient", b.anchor().to_did_key());
    });
    let never = ack_of(&d1, &b, |o| {
        let mut p = Object::new();
        p.insert("ref", digest(&bundle(0x23, CH_UNKNOWN)));
        p.insert("meaning", "received");
        o.insert("payload", p);
    });
    let mut unsecured = ack_of(&d1, &b, |_| {});
    unsecured.remove("proof");
    let keys = TupleKeys {
        own: &b,
        counterpart_key: Some(&a.rkid()),
    };
    let mac_form = prove(&unsecured, AckClass::DesignatedVerifier, keys, "").unwrap();
    let k1 = ack_of(&d1, &b, |_| {});
    let k2 = ack_of(&d2, &b, |_| {});
    let steps = vec![
        step(
            "forgery-unsigned",
            "an acknowledgement without proof: the profile requires one",
            "A",
            to_a(&unsigned, 1),
        ),
        step(
            "forgery-foreign-signed",
            "issuer B, signed by Mallory",
            "A",
            to_a(&ack_of(&d1, &m, |_| {}), 2),
        ),
        step(
            "forgery-wrong-thread",
            "signed by B, another threadId",
            "A",
            to_a(
                &ack_of(&d1, &b, |o| {
                    o.insert("threadId", uuid(0x7f));
                }),
                3,
            ),
        ),
        step(
            "forgery-wrong-direction",
            "issuer and recipient swapped (A's own direction): not addressed to A",
            "A",
            to_a(&swapped, 4),
        ),
        step(
            "forgery-ref-never-sent",
            "signed by B, ref of a document A never sent",
            "A",
            to_a(&never, 5),
        ),
        step(
            "forgery-wrong-class-form",
            "a valid MAC-form proof for a signature-class document (§4.4 class rule)",
            "A",
            to_a(&mac_form, 6),
        ),
        step(
            "valid-ack",
            "B's signed acknowledgement of D1: accepted → delivered",
            "A",
            to_a(&k1, 7),
        ),
        step(
            "redelivered-ack",
            "the same acknowledgement again: duplicate-known, and nothing is re-sent (an ack is terminal)",
            "A",
            to_a(&k1, 8),
        ),
        step(
            "late-ack-after-failed",
            "a valid acknowledgement of D2, which A had given up on: failed → delivered, surfaced",
            "A",
            to_a(&k2, 9),
        ),
    ];
    (a_spec, steps)
}

fn sender_acks() -> Scenario {
    let (a_spec, steps) = sender_ack_steps();
    let s = scenario(
        "Delivery §4.2 / §6.1 at sender A: the signature-class forgery matrix (every failure discards the ack and leaves the status), the valid, redelivered and late acknowledgement",
        vec![
            ("A", a_spec),
            ("B", party(B, Some("A"))),
            ("M", party(MALLORY, None)),
        ],
        steps,
    );
    let s = finish(
        s,
        &[
            &[(5, "failed(malformed)")],
            &[(8, "failed(validation-failed)")],
            &[(8, "failed(validation-failed)")],
            &[(5, "failed(wrong-recipient)")],
            &[(8, "failed(validation-failed)")],
            &[(8, "failed(validation-failed)")],
            &[(9, "unique")],
            &[(4, "duplicate-known")],
            &[(9, "unique")],
        ],
    );
    let statuses: Vec<(Option<&str>, Option<&str>)> = s
        .steps
        .iter()
        .map(|st| {
            (
                st.expect[0].status_after.as_deref(),
                st.expect[0].transition.as_deref(),
            )
        })
        .collect();
    let accepted = (Some("accepted"), None);
    assert_eq!(
        statuses,
        [
            accepted,
            accepted,
            accepted,
            accepted,
            (None, None),
            accepted,
            (Some("delivered"), Some("accepted->delivered")),
            (Some("delivered"), None),
            (Some("delivered"), Some("failed->delivered")),
        ]
    );
    assert!(
        s.steps.iter().all(|st| st.expect[0].ack.is_none()),
        "no ack of an ack"
    );
    s
}

fn concurrent() -> Scenario {
    let (a, b) = (context(A), context(B));
    let d = delivery(0x31, &a, &a, &uuid(0x71));
    let mut both = step(
        "concurrent-first-deliveries",
        "two envelopes of one document evaluated at once: the first takes the lock set (digest) and commits; the second finds it held, holds nothing, re-enters at stage 4 and finds the completed entry — one unique, one duplicate-known, identical acknowledgements",
        "B",
        vec![seal(&jcs(&d), &b.rkid(), 1), seal(&jcs(&d), &b.rkid(), 2)],
    );
    both.ack_entropy = Some(hex(&[0xc1; 16]));
    let s = scenario(
        "Delivery §6.2 stage 9: concurrent first deliveries converge",
        vec![("A", party(A, Some("B"))), ("B", party(B, Some("A")))],
        vec![both],
    );
    let s = finish(s, &[&[(9, "unique"), (4, "duplicate-known")]]);
    let e = &s.steps[0].expect;
    assert!(e[0].ack.is_some());
    assert_eq!(e[0].ack, e[1].ack, "identical acknowledgements");
    s
}

fn files() -> Vec<(&'static str, Scenario)> {
    vec![
        ("stages.json", stages()),
        ("sender-acks.json", sender_acks()),
        ("concurrent.json", concurrent()),
    ]
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors/party")
}

#[test]
fn vectors_are_current() {
    let regenerate = std::env::var_os(ENV).is_some_and(|v| !v.is_empty());
    for (name, scenario) in files() {
        let text = serde_json::to_string_pretty(&scenario).unwrap() + "\n";
        let path = dir().join(name);
        if regenerate {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let held = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (set {ENV}=1 to generate)", path.display()));
        assert!(
            held == text,
            "{} is stale: set {ENV}=1 and rerun",
            path.display()
        );
    }
}

fn replay(name: &str) {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let scenario: Scenario = serde_json::from_str(&text).unwrap();
    let results = common::run(&scenario);
    assert_eq!(results.len(), scenario.steps.len());
    for (step, actual) in scenario.steps.iter().zip(results) {
        assert_eq!(actual, step.expect, "{name}: {}", step.name);
    }
}

#[test]
fn stages_replay_from_the_file() {
    replay("stages.json");
}

#[test]
fn sender_acks_replay_from_the_file() {
    replay("sender-acks.json");
}

#[test]
fn concurrent_first_deliveries_replay_from_the_file() {
    replay("concurrent.json");
}

#[test]
fn every_step_kind_of_the_plan_is_present() {
    let names: Vec<String> = files()
        .iter()
        .flat_map(|(_, s)| s.steps.iter().map(|st| st.name.clone()))
        .collect();
    for needed in [
        "stage-1-oversize",
        "stage-2-unknown-rkid",
        "stage-3-tombstoned-rkid",
        "stage-4-not-json",
        "stage-5-wrong-recipient",
        "stage-6-unknown-type",
        "stage-7-payload",
        "stage-8-mallory-wrapped-credential",
        "stage-9-bundle-unique",
        "crash-after-commit-re-ack",
        "forgery-unsigned",
        "forgery-foreign-signed",
        "forgery-wrong-thread",
        "forgery-wrong-direction",
        "forgery-ref-never-sent",
        "forgery-wrong-class-form",
        "redelivered-ack",
        "late-ack-after-failed",
        "concurrent-first-deliveries",
    ] {
        assert!(names.iter().any(|n| n == needed), "{needed}");
    }
}
