//! `encounter-cards.json` (vendored, Encounter wire 0.25) through the card
//! and schema code: every positive card verifies, each negative fails at
//! the check its `checkOrder` names, the 0.25 credential verifies against
//! the offline schema closure and its signature, and the enactment binding
//! recomputes from the two challenge fixtures (Encounter 5.4). Plus the
//! relationship record: own card, counterpart card and hints round-trip.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use rltp_party::bundle::{ENCOUNTER_SCAN, enactment_binding};
use rltp_party::card::{CardError, ContactCard};
use rltp_party::relationship::{Relationship, RelationshipRecord};
use rltp_party::schema::{ENCOUNTER_CREDENTIAL, SchemaError, validate};
use rltp_proofs::declaration::eddsa_jcs_2022_verify;
use rltp_proofs::json::{self, Value};
use rltp_vectors::SpecVectors;

fn vectors() -> serde_json::Value {
    SpecVectors::from_env()
        .json("encounter-cards.json")
        .unwrap()
}

fn strict(v: &serde_json::Value) -> Value {
    json::from_serde(v)
}

#[test]
fn every_positive_card_verifies_under_its_anchor() {
    let v = vectors();
    let cards = v["cards"].as_object().unwrap();
    assert_eq!(cards.len(), 4);
    for (name, card) in cards {
        let verified = ContactCard::verify(&strict(card)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            verified.anchor().to_did_key(),
            card["anchor"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            verified.key_agreement().to_multikey(),
            card["keyAgreement"].as_str().unwrap()
        );
    }
    // The sent card is signed by identity-derivation.json's pair context.
    let sent = ContactCard::verify(&strict(&v["cards"]["sent"])).unwrap();
    let pair = Relationship::derive(
        &common::unhex(
            SpecVectors::from_env()
                .json("identity-derivation.json")
                .unwrap()["rootIkm"]
                .as_str()
                .unwrap(),
        ),
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
            24, 25, 26, 27, 28, 29, 30, 31,
        ],
    )
    .unwrap();
    assert_eq!(sent.anchor(), &pair.anchor());
    assert_eq!(sent.key_agreement(), &pair.rkid());
    assert_eq!(sent.text("boundTo"), v["fixtures"]["challengeB"].as_str());
}

#[test]
fn card_mutated_after_signing_fails_the_signature_only() {
    let v = vectors();
    let case = &v["negative"][0];
    assert_eq!(case["name"], "card-mutated-after-signing");
    assert!(matches!(
        ContactCard::verify(&strict(&case["artifact"])),
        Err(CardError::Proof(_))
    ));
}

#[test]
fn a_foreign_verification_method_is_refused_before_cryptography() {
    let v = vectors();
    let case = &v["negative"][1];
    assert_eq!(case["name"], "verification-method-foreign-anchor");
    assert_eq!(
        ContactCard::verify(&strict(&case["artifact"])),
        Err(CardError::Unbound)
    );
}

#[test]
fn a_sent_card_without_bound_to_fails_the_schema() {
    let v = vectors();
    let case = &v["negative"][2];
    assert_eq!(case["name"], "sent-card-missing-boundTo");
    assert!(matches!(
        ContactCard::verify(&strict(&case["artifact"])),
        Err(CardError::Schema(SchemaError::Invalid { .. }))
    ));
}

#[test]
fn the_0_25_credential_passes_the_offline_schema_and_its_signature() {
    let v = vectors();
    let credential = &v["credential025"];
    assert_eq!(validate(ENCOUNTER_CREDENTIAL, credential), Ok(()));
    let object = strict(credential);
    let signer = eddsa_jcs_2022_verify(object.as_object().unwrap()).unwrap();
    assert_eq!(signer.to_did_key(), credential["issuer"].as_str().unwrap());
    // The 0.26 form is signed too, but it is not the wire form Delivery
    // 0.80 pins: the 0.25 schema refuses its format and context.
    let newer = &v["credential"];
    assert!(eddsa_jcs_2022_verify(strict(newer).as_object().unwrap()).is_ok());
    assert!(matches!(
        validate(ENCOUNTER_CREDENTIAL, newer),
        Err(SchemaError::Invalid { .. })
    ));
}

#[test]
fn the_enactment_binding_recomputes_from_the_challenge_fixtures() {
    let v = vectors();
    let fixtures = &v["fixtures"];
    let a = fixtures["challengeA"].as_str().unwrap();
    let b = fixtures["challengeB"].as_str().unwrap();
    let expected = v["credential025"]["credentialSubject"]["enactmentBinding"]
        .as_str()
        .unwrap();
    assert_eq!(
        enactment_binding(ENCOUNTER_SCAN, a, b).as_deref(),
        Some(expected)
    );
    assert_eq!(
        enactment_binding(ENCOUNTER_SCAN, b, a).as_deref(),
        Some(expected)
    );
    assert_ne!(
        enactment_binding("encounter-scan@0.24", a, b).as_deref(),
        Some(expected)
    );
}

#[test]
fn a_relationship_record_round_trips_and_refuses_a_foreign_own_card() {
    let a = common::relationship(common::A);
    let mut b = common::relationship(common::B);
    b.set_counterpart(a.own_card().unwrap().clone());
    let record = b.to_record();
    let text = serde_json::to_string(&record).unwrap();
    let back: RelationshipRecord = serde_json::from_str(&text).unwrap();
    let again = Relationship::from_record(&back).unwrap();
    assert_eq!(again.to_record(), record);
    assert_eq!(again.counterpart().unwrap().anchor(), &a.anchor());
    let hints: Vec<String> = again
        .own_card()
        .unwrap()
        .hints()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(hints, [common::HINT]);
    // The counterpart's card as one's own: refused, naming the own card.
    let mut swapped = record.clone();
    swapped.own_card = record.counterpart_card.clone();
    assert!(matches!(
        Relationship::from_record(&swapped),
        Err(rltp_party::relationship::RelationshipError::OwnCard(_))
    ));
}
