//! `identity-derivation.json` through the relationship model: the `pair/…`
//! vector (Identity §5.1–§5.2, §6.1) re-derived from its root IKM and
//! relationship nonce by [`Relationship::derive`], and the
//! carrier-relationship cases (§7a.3–§7a.4) through the record's carrier
//! nonce — which the model keeps apart from the pair nonce.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{hex, unhex, unhex32};
use rltp_party::relationship::{CarrierNonce, Relationship, RelationshipError};
use rltp_proofs::context::{PairLabel, ed_seed, x_seed};
use rltp_proofs::identity::CarrierId;
use rltp_vectors::SpecVectors;
use serde_json::Value;

fn vectors() -> Value {
    SpecVectors::from_env()
        .json("identity-derivation.json")
        .unwrap()
}

fn s<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("identity-derivation.json lacks {pointer}"))
}

#[test]
fn the_pair_vector_reproduces_through_the_relationship_model() {
    let v = vectors();
    let root = unhex(s(&v, "/rootIkm"));
    let pairs: Vec<&Value> = v["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["label"].as_str().is_some_and(|l| l.starts_with("pair/")))
        .collect();
    assert_eq!(pairs.len(), 1, "the shipped file fixes one pair context");
    let case = pairs[0];
    let nonce = unhex32(s(case, "/relationshipNonce"));
    let relationship = Relationship::derive(&root, nonce).unwrap();
    let label = relationship.pair().label();
    assert_eq!(label.as_str(), s(case, "/label"));
    assert_eq!(label.as_str().parse::<PairLabel>().as_ref(), Ok(label));
    assert_eq!(hex(&ed_seed(&root, label)), s(case, "/edSeed"));
    assert_eq!(hex(&x_seed(&root, label)), s(case, "/xSeed"));
    assert_eq!(hex(&relationship.pair().x_secret()), s(case, "/xSeed"));
    assert_eq!(relationship.anchor().to_did_key(), s(case, "/anchor"));
    assert_eq!(relationship.rkid().to_multikey(), s(case, "/keyAgreement"));
}

#[test]
fn the_carrier_relationship_cases_reproduce_through_the_carrier_nonce() {
    let v = vectors();
    let root = unhex(s(&v, "/rootIkm"));
    let carrier = &v["carrierRelationship"];
    // The relationship's pair nonce is the pair vector's; its carrier nonce
    // is the separate `relationshipNonce` of this section (Identity 7a.3).
    let pair_case = v["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"].as_str().is_some_and(|l| l.starts_with("pair/")))
        .unwrap();
    let mut relationship =
        Relationship::derive(&root, unhex32(s(pair_case, "/relationshipNonce"))).unwrap();
    assert!(
        relationship
            .principal(&"did:web:x".parse().unwrap())
            .is_none()
    );
    let first = unhex32(s(carrier, "/relationshipNonce"));
    relationship
        .add_carrier_nonce(CarrierNonce {
            nonce: first,
            generation: 1,
        })
        .unwrap();
    let cases = carrier["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let c: CarrierId = s(case, "/carrier").parse().unwrap();
        let (key, principal) = relationship.principal(&c).unwrap();
        assert_eq!(
            hex(&key.to_bytes()),
            s(case, "/edSeed"),
            "{}",
            s(case, "/case")
        );
        assert_eq!(principal.to_did_key(), s(case, "/principal"));
    }
    // A second relationship nonce at the same carrier: another principal.
    let axis = &carrier["relationshipAxisCase"];
    let mut second =
        Relationship::derive(&root, unhex32(s(pair_case, "/relationshipNonce"))).unwrap();
    second
        .add_carrier_nonce(CarrierNonce {
            nonce: unhex32(s(axis, "/nonce")),
            generation: 1,
        })
        .unwrap();
    let c: CarrierId = s(axis, "/carrier").parse().unwrap();
    assert_eq!(
        second.principal(&c).unwrap().1.to_did_key(),
        s(axis, "/principal")
    );
}

#[test]
fn the_carrier_nonce_register_converges_and_never_takes_the_pair_nonce() {
    let mut relationship = Relationship::derive(&[1u8; 64], [2u8; 32]).unwrap();
    assert_eq!(
        relationship.add_carrier_nonce(CarrierNonce {
            nonce: [2u8; 32],
            generation: 1
        }),
        Err(RelationshipError::NonceReuse)
    );
    for bad in [0, 1u64 << 53] {
        assert_eq!(
            relationship.add_carrier_nonce(CarrierNonce {
                nonce: [3u8; 32],
                generation: bad
            }),
            Err(RelationshipError::Generation(bad))
        );
    }
    for (byte, generation) in [(9u8, 1u64), (8, 2), (7, 2), (1, 1)] {
        relationship
            .add_carrier_nonce(CarrierNonce {
                nonce: [byte; 32],
                generation,
            })
            .unwrap();
    }
    // Highest generation, ties to the bytewise-smallest nonce; nothing deleted.
    let canonical = relationship.canonical_carrier_nonce().unwrap();
    assert_eq!((canonical.nonce, canonical.generation), ([7u8; 32], 2));
    assert_eq!(relationship.carrier_nonces().len(), 4);
}

#[test]
fn every_non_pair_label_of_the_vector_is_refused_as_a_pair_label() {
    let v = vectors();
    for case in v["rejects"].as_array().unwrap() {
        let label = case["label"].as_str().unwrap();
        assert!(label.parse::<PairLabel>().is_err(), "{label}");
    }
}
