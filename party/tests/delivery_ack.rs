//! `delivery-ack.json` in full, one test per case: the two pair contexts
//! re-derived from their fill inputs, the ack key's info, the MAC preimage
//! and the MAC (Delivery §4.2); then every negative — tampered preimage,
//! wrong direction, wrong key, missing proof, both class crossings and the
//! hybrid proof — each with its own assertion, the document-level ones run
//! through the whole §6.2 pipeline at the acknowledged document's sender.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{FixedRng, NOW};
use rltp_party::Disposition;
use rltp_party::ack::{AckProofError, TupleKeys, prove, verify_proof};
use rltp_party::document::{Document, profile};
use rltp_party::keyring::KeyRing;
use rltp_party::locks::LockTable;
use rltp_party::registry::{AckClass, TypeRegistry};
use rltp_party::sender::{SenderStatus, SentEntry};
use rltp_party::store::{MemStore, PartyStore};
use rltp_party::{FailReason, Receiver, bundle::NoEncounterState};
use rltp_proofs::ack_mac::{AckKey, ack_mac_info};
use rltp_proofs::context::PairContext;
use rltp_proofs::jcs::canonicalize;
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::DidKey;
use rltp_vectors::SpecVectors;

fn vectors() -> serde_json::Value {
    SpecVectors::from_env().json("delivery-ack.json").unwrap()
}

/// The acknowledging party (ack `issuer`) and the acknowledged document's
/// sender (ack `recipient`), derived from the vector's fill inputs.
fn contexts(v: &serde_json::Value) -> (PairContext, PairContext) {
    let inputs = &v["inputs"];
    assert_eq!(inputs["issuerRootIkm"], "fill(64, 0x07)");
    assert_eq!(inputs["issuerPairNonce"], "fill(32, 0x03)");
    assert_eq!(inputs["recipientRootIkm"], "fill(64, 0x09)");
    assert_eq!(inputs["recipientPairNonce"], "fill(32, 0x05)");
    let issuer = common::context(common::B);
    let recipient = common::context(common::A);
    assert_eq!(issuer.anchor().to_did_key(), inputs["issuerPairAnchor"]);
    assert_eq!(
        recipient.anchor().to_did_key(),
        inputs["recipientPairAnchor"]
    );
    (issuer, recipient)
}

fn object(v: &serde_json::Value) -> Object {
    json::from_serde(v).as_object().unwrap().clone()
}

fn preimage(document: &Object) -> Vec<u8> {
    canonicalize(&Value::Object(document.clone())).unwrap()
}

fn key(own: &PairContext, other: &PairContext, issuer: &DidKey, recipient: &DidKey) -> AckKey {
    AckKey::derive(&own.x_secret(), &other.rkid(), issuer, recipient).unwrap()
}

#[test]
fn the_positive_mac_reproduces_from_either_side_of_the_tuple() {
    let v = vectors();
    let (b, a) = contexts(&v);
    let document = object(&v["inputs"]["document"]);
    assert_eq!(ack_mac_info(&b.anchor(), &a.anchor()), v["inputs"]["info"]);
    assert_eq!(
        String::from_utf8(preimage(&document)).unwrap(),
        v["intermediate"]["preimage"]
    );
    let mac = v["output"]["proof"]["mac"].as_str().unwrap();
    let (ba, ab) = (b.anchor(), a.anchor());
    assert_eq!(key(&b, &a, &ba, &ab).mac(&preimage(&document)), mac);
    // The acknowledged sender derives the same key from its own secret.
    assert_eq!(
        key(&a, &b, &ba, &ab).verify(&preimage(&document), mac),
        Ok(true)
    );
    // And the crate's prover makes exactly the vector's proof.
    let secured = prove(
        &document,
        AckClass::DesignatedVerifier,
        TupleKeys {
            own: &b,
            counterpart_key: Some(&a.rkid()),
        },
        "ignored for the mac form",
    )
    .unwrap();
    assert_eq!(
        secured.get("proof"),
        Some(&json::from_serde(&v["output"]["proof"]))
    );
}

#[test]
fn tampered_preimage_does_not_verify() {
    let v = vectors();
    let (b, a) = contexts(&v);
    let case = &v["negatives"][0];
    assert_eq!(case["name"], "tampered-preimage");
    let tampered = object(&case["document"]);
    let k = key(&a, &b, &b.anchor(), &a.anchor());
    let mac = v["output"]["proof"]["mac"].as_str().unwrap();
    assert_eq!(k.verify(&preimage(&tampered), mac), Ok(false));
    let wrong = case["wrongMac"].as_str().unwrap();
    assert_eq!(
        k.verify(&preimage(&object(&v["inputs"]["document"])), wrong),
        Ok(false)
    );
}

#[test]
fn wrong_direction_does_not_verify() {
    let v = vectors();
    let (b, a) = contexts(&v);
    let case = &v["negatives"][1];
    assert_eq!(case["name"], "wrong-direction");
    let document = preimage(&object(&v["inputs"]["document"]));
    let wrong = case["wrongMac"].as_str().unwrap();
    // The reversed info (recipient first) makes exactly the vector's wrong MAC …
    assert_eq!(key(&b, &a, &a.anchor(), &b.anchor()).mac(&document), wrong);
    // … which the right key refuses.
    assert_eq!(
        key(&a, &b, &b.anchor(), &a.anchor()).verify(&document, wrong),
        Ok(false)
    );
}

#[test]
fn wrong_key_of_another_tuple_does_not_verify() {
    let v = vectors();
    let (b, a) = contexts(&v);
    let case = &v["negatives"][2];
    assert_eq!(case["name"], "wrong-key");
    let foreign_inputs = &v["wrongKeyInputs"];
    assert_eq!(foreign_inputs["foreignPairNonce"], "fill(32, 0x06)");
    let foreign = PairContext::from_nonce(&[0x07; 64], &[0x06; 32]);
    assert_eq!(
        foreign.anchor().to_did_key(),
        foreign_inputs["foreignPairAnchor"]
    );
    assert_eq!(
        ack_mac_info(&foreign.anchor(), &a.anchor()),
        foreign_inputs["info"]
    );
    let document = preimage(&object(&v["inputs"]["document"]));
    let wrong = case["wrongMac"].as_str().unwrap();
    assert_eq!(
        key(&foreign, &a, &foreign.anchor(), &a.anchor()).mac(&document),
        wrong
    );
    assert_eq!(
        key(&a, &b, &b.anchor(), &a.anchor()).verify(&document, wrong),
        Ok(false)
    );
}

/// The acknowledged document's sender (party A) with the vector's
/// acknowledged document in its sent-register under `acknowledged_type`,
/// receiving `ack` sealed to its `rkid`.
fn receive_at_sender(ack: &Object, acknowledged_type: &str) -> (rltp_party::Outcome, MemStore) {
    let v = vectors();
    let document = &v["inputs"]["document"];
    let mut a = common::relationship(common::A);
    a.set_counterpart(common::relationship(common::B).own_card().unwrap().clone());
    let store = MemStore::new();
    store
        .record_sent(SentEntry {
            digest: document["payload"]["ref"].as_str().unwrap().into(),
            thread_id: document["threadId"].as_str().unwrap().into(),
            issuer: a.anchor(),
            recipient: DidKey::parse(document["issuer"].as_str().unwrap()).unwrap(),
            type_uri: acknowledged_type.into(),
            class: AckClass::of_type(acknowledged_type).unwrap(),
            status: SenderStatus::Accepted,
            sent_at: NOW - 1,
        })
        .unwrap();
    let keys = KeyRing::new(&[a.clone()]);
    let (locks, registry) = (LockTable::new(), TypeRegistry::standard());
    let receiver = Receiver {
        keys: &keys,
        store: &store,
        locks: &locks,
        registry: &registry,
        bundles: &NoEncounterState,
    };
    let envelope = common::seal(&common::jcs(ack), &a.rkid(), 0x42);
    let outcome = receiver
        .receive(envelope.as_bytes(), NOW, &mut FixedRng::new(&[]))
        .unwrap();
    (outcome, store)
}

fn status(store: &MemStore) -> String {
    let v = vectors();
    let acked = v["inputs"]["document"]["payload"]["ref"].as_str().unwrap();
    store.sent(acked).unwrap().unwrap().status.to_string()
}

#[test]
fn the_positive_ack_moves_its_designated_verifier_sender_to_delivered() {
    let v = vectors();
    let mut ack = object(&v["inputs"]["document"]);
    ack.insert("proof", json::from_serde(&v["output"]["proof"]));
    let (outcome, store) = receive_at_sender(&ack, "https://real-life.org/trust-tasks/star/0.1");
    assert_eq!(
        outcome.disposition,
        Disposition::Unique,
        "{}",
        outcome.detail
    );
    assert_eq!(
        outcome.ack, None,
        "an acknowledgement is never acknowledged"
    );
    assert_eq!(status(&store), "delivered");
}

#[test]
fn missing_proof_fails_the_document_schema() {
    let v = vectors();
    assert_eq!(v["negatives"][3]["name"], "missing-proof");
    let ack = object(&v["inputs"]["document"]);
    let doc = Document::from_value(Value::Object(ack.clone())).unwrap();
    assert!(profile(&doc).is_err());
    let (outcome, store) = receive_at_sender(&ack, "https://real-life.org/trust-tasks/star/0.1");
    assert_eq!(outcome.stage.number(), 5);
    assert_eq!(
        outcome.disposition,
        Disposition::Failed(FailReason::Malformed)
    );
    assert_eq!(status(&store), "accepted");
}

#[test]
fn signature_form_for_a_dv_payload_is_rejected_by_the_class_rule_alone() {
    let v = vectors();
    let case = &v["negatives"][4];
    assert_eq!(case["name"], "signature-form-for-dv-payload");
    let ack = object(&case["document"]);
    // Schema-valid and signature-valid …
    let profiled = profile(&Document::from_value(Value::Object(ack.clone())).unwrap()).unwrap();
    let (b, a) = contexts(&v);
    let keys = TupleKeys {
        own: &a,
        counterpart_key: Some(&b.rkid()),
    };
    assert_eq!(verify_proof(&profiled, AckClass::Signature, keys), Ok(()));
    // … and wrong for the class.
    assert_eq!(
        verify_proof(&profiled, AckClass::DesignatedVerifier, keys),
        Err(AckProofError::WrongClassForm {
            expected: "designated-verifier"
        })
    );
    let acknowledged = case["acknowledgedType"].as_str().unwrap();
    let (outcome, store) = receive_at_sender(&ack, acknowledged);
    assert_eq!(outcome.disposition.to_string(), case["expected"]);
    assert_eq!(outcome.stage.number(), 8);
    assert_eq!(status(&store), "accepted");
}

#[test]
fn a_hybrid_proof_fails_the_document_schema() {
    let v = vectors();
    let case = &v["negatives"][5];
    assert_eq!(case["name"], "hybrid-proof");
    let mut ack = object(&case["document"]);
    ack.insert("proof", json::from_serde(&case["proof"]));
    let (outcome, store) = receive_at_sender(&ack, "https://real-life.org/trust-tasks/star/0.1");
    assert_eq!(outcome.disposition.to_string(), case["expected"]);
    assert_eq!(outcome.stage.number(), 5);
    assert_eq!(status(&store), "accepted");
}

#[test]
fn mac_form_for_a_signature_payload_is_rejected_by_the_class_rule_alone() {
    let v = vectors();
    let case = &v["negatives"][6];
    assert_eq!(case["name"], "mac-form-for-signature-payload");
    let mut ack = object(&case["document"]);
    ack.insert("proof", json::from_serde(&case["proof"]));
    let profiled = profile(&Document::from_value(Value::Object(ack.clone())).unwrap()).unwrap();
    let (b, a) = contexts(&v);
    let keys = TupleKeys {
        own: &a,
        counterpart_key: Some(&b.rkid()),
    };
    assert_eq!(
        verify_proof(&profiled, AckClass::DesignatedVerifier, keys),
        Ok(())
    );
    let acknowledged = case["acknowledgedType"].as_str().unwrap();
    let (outcome, store) = receive_at_sender(&ack, acknowledged);
    assert_eq!(outcome.disposition.to_string(), case["expected"]);
    assert_eq!(outcome.stage.number(), 8);
    assert_eq!(status(&store), "accepted");
}

#[test]
fn every_case_of_the_file_has_a_test_here() {
    let v = vectors();
    let names: Vec<&str> = v["negatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tampered-preimage",
            "wrong-direction",
            "wrong-key",
            "missing-proof",
            "signature-form-for-dv-payload",
            "hybrid-proof",
            "mac-form-for-signature-payload",
        ]
    );
}

#[test]
fn an_all_zero_shared_secret_derives_no_ack_key() {
    // A low-order point (all zeros) as the counterpart's key.
    let a = common::context(common::A);
    let zero = rltp_proofs::multikey::Rkid::from_bytes([0u8; 32]);
    assert_eq!(
        AckKey::derive(&a.x_secret(), &zero, &a.anchor(), &a.anchor()).map(|_| ()),
        Err(rltp_proofs::ack_mac::AckMacError::NonContributory)
    );
}
