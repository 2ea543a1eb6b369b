//! `rltp-carrier-proof/0.3` (Delivery §5a.3, §11) against the shipped
//! `carrier-proof.json` (`keys`, `registration`, `collection`,
//! `conclusion`, `negatives`, `encodingAcceptanceSurface`,
//! `generationSpelling`). A missing vector file is a failure, never a skip.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use ed25519_dalek::{Signature, SigningKey};
use rltp_proofs::encoding::{
    EncodingError, b64url_decode_array, b64url_encode, base58btc_decode, multibase_z,
    signature_from_z,
};
use rltp_proofs::identity::{CarrierId, GENERATION_MAX, GenerationError};
use rltp_proofs::jcs;
use rltp_proofs::json::{self, JsonError, Number, Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::{
    BuildError, Malformed, PROOF_TYPE, PROOF_V, PossessionFailed, Purpose, UnsignedProof, field,
    parse,
};

// ---------------------------------------------------------------- loading

fn load(name: &str) -> serde_json::Value {
    common::shipped(name)
}

fn vectors() -> serde_json::Value {
    load("carrier-proof.json")
}

fn s(v: &serde_json::Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shipped object as a strict-reader object.
fn object(v: &serde_json::Value) -> Object {
    match json::from_serde(v) {
        Value::Object(o) => o,
        other => panic!("not an object: {other:?}"),
    }
}

/// Wire bytes: JCS of `object` with `sig` set.
fn wire(object: &Object, sig: &str) -> Vec<u8> {
    let mut o = object.clone();
    o.insert(field::SIG, sig);
    jcs::canonicalize(&Value::Object(o)).unwrap()
}

/// Wire bytes of an object as is (no `sig` added).
fn bytes_of(object: &Object) -> Vec<u8> {
    jcs::canonicalize(&Value::Object(object.clone())).unwrap()
}

/// The configured carrier of every shipped proof.
fn carrier(v: &serde_json::Value) -> String {
    s(&v["registration"]["object"]["carrier"]).to_owned()
}

/// The shipped registration proof as wire bytes.
fn registration_wire(v: &serde_json::Value) -> Vec<u8> {
    wire(
        &object(&v["registration"]["object"]),
        s(&v["registration"]["sig"]),
    )
}

fn principal_key(v: &serde_json::Value) -> ed25519_dalek::VerifyingKey {
    DidKey::parse(s(&v["keys"]["principal"]))
        .unwrap()
        .verifying_key()
        .unwrap()
}

fn signing_key(v: &serde_json::Value) -> SigningKey {
    let seed: [u8; 32] = hex(s(&v["keys"]["principalSeed"])).try_into().unwrap();
    SigningKey::from_bytes(&seed)
}

// ------------------------------------------------------ shipped positives

/// `keys`: the principal is the `did:key` of `principalSeed`, and that seed
/// is the control principal of `identity-derivation.json` case 1.
#[test]
fn keys_principal_is_derived_from_the_seed() {
    let v = vectors();
    let keys = &v["keys"];
    let did = DidKey::from_verifying_key(&signing_key(&v).verifying_key());
    assert_eq!(did.to_did_key(), s(&keys["principal"]));

    let id = load("identity-derivation.json");
    let case1 = &id["carrierRelationship"]["cases"][0];
    assert_eq!(s(&case1["carrier"]), carrier(&v));
    assert_eq!(s(&case1["edSeed"]), s(&keys["principalSeed"]));
    assert_eq!(s(&case1["principal"]), s(&keys["principal"]));
    // The second principal of the negatives is the relationship-axis one.
    assert_eq!(
        s(&id["carrierRelationship"]["relationshipAxisCase"]["principal"]),
        s(&keys["otherPrincipal"])
    );
    // The sample rkids are sha2-256 of their labels (as X25519 keys).
    for (key, label) in [
        ("rkid", "rltp/vector/carrier-proof/rkid-1"),
        ("otherRkid", "rltp/vector/carrier-proof/rkid-2"),
    ] {
        let rkid = Rkid::parse(s(&keys[key])).unwrap();
        let sk = x25519_dalek::StaticSecret::from(rltp_proofs::encoding::sha256(label.as_bytes()));
        assert_eq!(
            rkid.as_bytes(),
            x25519_dalek::PublicKey::from(&sk).as_bytes(),
            "{key}"
        );
    }
}

/// PROTOCOL.md §7: a proof body need not be JCS. The shipped registration
/// proof spelled with whitespace and its members reversed parses to the
/// same signing input (the JCS of the received object without `sig`) and
/// its shipped signature verifies.
#[test]
fn a_proof_in_any_strict_json_spelling_verifies() {
    let v = vectors();
    let shipped = &v["registration"];
    let obj = object(&shipped["object"]);
    let mut members: Vec<(String, String)> = obj
        .iter()
        .map(|(k, value)| {
            let text = String::from_utf8(jcs::canonicalize(value).unwrap()).unwrap();
            (k.to_owned(), text)
        })
        .collect();
    members.push(("sig".into(), format!("\"{}\"", s(&shipped["sig"]))));
    members.reverse();
    let spelled = format!(
        "{{\n  {}\n}}\n",
        members
            .iter()
            .map(|(k, value)| format!("\"{k}\" : {value}"))
            .collect::<Vec<_>>()
            .join(",\n  ")
    );
    assert_ne!(spelled.as_bytes(), registration_wire(&v).as_slice());
    let proof = parse(spelled.as_bytes(), &carrier(&v)).unwrap();
    assert_eq!(proof.signing_input(), s(&shipped["jcs"]).as_bytes());
    assert_eq!(proof.verify(), Ok(()));
}

/// `registration`, `collection`, `conclusion`: JCS byte for byte, the
/// shipped `sig` verifies, the typed fields are the shipped values, and
/// re-signing with `principalSeed` reproduces the shipped wire bytes.
#[test]
fn shipped_proofs_parse_verify_and_resign() {
    let v = vectors();
    let key = signing_key(&v);
    let configured = carrier(&v);
    let c = CarrierId::from_bytes(configured.as_bytes()).unwrap();
    for (section, purpose) in [
        ("registration", Purpose::Register),
        ("collection", Purpose::Collect),
        ("conclusion", Purpose::Conclude),
    ] {
        let shipped = &v[section];
        let obj = object(&shipped["object"]);
        let jcs_bytes = bytes_of(&obj);
        assert_eq!(
            String::from_utf8(jcs_bytes.clone()).unwrap(),
            s(&shipped["jcs"]),
            "{section}"
        );

        let sig = s(&shipped["sig"]);
        let wire_bytes = wire(&obj, sig);
        let proof = parse(&wire_bytes, &configured).unwrap_or_else(|e| panic!("{section}: {e}"));
        assert_eq!(
            proof.signing_input(),
            s(&shipped["jcs"]).as_bytes(),
            "{section}"
        );
        assert_eq!(proof.verify(), Ok(()), "{section}");

        // Independently of `verify`: the shipped sig over the shipped jcs.
        let sig_bytes = signature_from_z(sig).unwrap();
        assert!(
            principal_key(&v)
                .verify_strict(
                    s(&shipped["jcs"]).as_bytes(),
                    &Signature::from_bytes(&sig_bytes)
                )
                .is_ok()
        );

        // Typed fields.
        let o = &shipped["object"];
        assert_eq!(proof.purpose(), purpose);
        assert_eq!(proof.purpose().as_str(), s(&o["purpose"]));
        assert_eq!(proof.carrier(), s(&o["carrier"]));
        assert_eq!(proof.principal().to_did_key(), s(&o["principal"]));
        assert_eq!(proof.rkid().to_multikey(), s(&o["rkid"]));
        assert_eq!(proof.signature(), &sig_bytes);
        assert_eq!(
            proof.principal_challenge(),
            &b64url_decode_array::<32>(s(&o["principalChallenge"])).unwrap()
        );
        if purpose.changes_succession() {
            assert_eq!(proof.generation(), o["generation"].as_u64());
            assert_eq!(proof.generation(), Some(1));
            assert_eq!(
                proof.address_challenge(),
                Some(&b64url_decode_array::<32>(s(&o["addressChallenge"])).unwrap())
            );
        } else {
            assert!(o.get("generation").is_none() && o.get("addressChallenge").is_none());
            assert_eq!(proof.generation(), None);
            assert_eq!(proof.address_challenge(), None);
        }

        // Re-sign: Ed25519 is deterministic, so the wire bytes are identical.
        let unsigned = match proof.address_challenge() {
            Some(address) => UnsignedProof::registration(
                purpose,
                c.clone(),
                *proof.rkid(),
                proof.generation().unwrap(),
                *proof.principal_challenge(),
                *address,
            ),
            None => UnsignedProof::session(
                purpose,
                c.clone(),
                *proof.rkid(),
                *proof.principal_challenge(),
            ),
        }
        .unwrap();
        assert_eq!(
            unsigned.signing_input(proof.principal()).unwrap(),
            jcs_bytes,
            "{section}"
        );
        let resigned = unsigned.sign(&key).unwrap();
        assert_eq!(resigned, wire_bytes, "{section}");
        let reparsed = json::parse(&resigned).unwrap();
        assert_eq!(
            reparsed
                .as_object()
                .unwrap()
                .get(field::SIG)
                .and_then(Value::as_str),
            Some(sig),
            "{section}"
        );
    }
}

// ----------------------------------------------------- shipped negatives

/// `negatives`: each transplant changes the signed bytes, so the
/// registration `sig` does not verify; the foreign domain tag is already
/// refused at parse.
#[test]
fn negatives_do_not_verify() {
    let v = vectors();
    let registration_jcs = s(&v["registration"]["jcs"]);
    let reg_sig = s(&v["registration"]["sig"]);
    let reg_sig_bytes = Signature::from_bytes(&signature_from_z(reg_sig).unwrap());
    // §11 names six transplants; the vector also ships a seventh, the
    // generation changed. Every shipped case runs.
    let cases = v["negatives"]["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 7);
    for case in cases {
        let name = s(&case["case"]);
        let obj = object(&case["object"]);
        let jcs_bytes = bytes_of(&obj);
        assert_eq!(
            String::from_utf8(jcs_bytes.clone()).unwrap(),
            s(&case["jcs"]),
            "{name}"
        );
        assert_ne!(s(&case["jcs"]), registration_jcs, "{name}");
        // The shipped signature does not verify over the changed bytes,
        // under the registration principal nor the one the object names.
        assert!(
            principal_key(&v)
                .verify_strict(&jcs_bytes, &reg_sig_bytes)
                .is_err(),
            "{name}"
        );
        let named = DidKey::parse(s(&case["object"]["principal"]))
            .unwrap()
            .verifying_key()
            .unwrap();
        assert!(
            named.verify_strict(&jcs_bytes, &reg_sig_bytes).is_err(),
            "{name}"
        );

        // Through the module, parsed against the carrier the object names
        // (so the second-carrier case reaches the signature too).
        let wire_bytes = wire(&obj, reg_sig);
        let object_carrier = s(&case["object"]["carrier"]);
        let object_v = s(&case["object"]["v"]);
        if object_v != PROOF_V {
            assert_eq!(
                parse(&wire_bytes, object_carrier),
                Err(Malformed::Version {
                    value: object_v.to_owned()
                }),
                "{name}"
            );
            continue;
        }
        let proof = parse(&wire_bytes, object_carrier).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(proof.signing_input(), jcs_bytes.as_slice());
        assert!(
            matches!(proof.verify(), Err(PossessionFailed::Signature { .. })),
            "{name}"
        );
        // Against this carrier's configuration, the second carrier is
        // already malformed.
        if object_carrier != carrier(&v) {
            assert_eq!(
                parse(&wire_bytes, &carrier(&v)),
                Err(Malformed::WrongCarrier {
                    value: object_carrier.to_owned()
                }),
                "{name}"
            );
        }
    }
}

/// `encodingAcceptanceSurface`: six schema-valid aliases, each decoded to
/// the shipped length and prefix and refused `malformed` at r1; plus the
/// positive control.
#[test]
fn encoding_acceptance_surface() {
    let v = vectors();
    let surface = &v["encodingAcceptanceSurface"];
    let reg = object(&v["registration"]["object"]);
    let reg_sig = s(&v["registration"]["sig"]);
    let configured = carrier(&v);
    let cases = surface["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 6);
    for case in cases {
        let f = s(&case["field"]);
        let value = s(&case["value"]);
        assert_eq!(s(&case["verdict"]), Malformed::VERDICT);
        assert_eq!(case["schemaValid"], true);
        let base58 = match f {
            "principal" => value.strip_prefix("did:key:z"),
            "rkid" | "sig" => value.strip_prefix('z'),
            other => panic!("unexpected field {other}"),
        }
        .unwrap_or_else(|| panic!("{value}: no multibase prefix"));
        let decoded = base58btc_decode(base58).unwrap();
        assert_eq!(
            decoded.len() as u64,
            case["decodedByteLength"].as_u64().unwrap(),
            "{value}"
        );
        assert_eq!(
            hex_of(&decoded[..2]),
            s(&case["decodedPrefixHex"]),
            "{value}"
        );

        let mut obj = reg.clone();
        let (wire_bytes, expected) = match f {
            "principal" => {
                obj.insert(field::PRINCIPAL, value);
                (
                    wire(&obj, reg_sig),
                    Malformed::Principal {
                        value: value.to_owned(),
                        source: EncodingError::Prefix {
                            expected: [0xed, 0x01],
                            actual: [decoded[0], decoded[1]],
                        },
                    },
                )
            }
            "rkid" => {
                obj.insert(field::RKID, value);
                (
                    wire(&obj, reg_sig),
                    Malformed::Rkid {
                        value: value.to_owned(),
                        source: EncodingError::Prefix {
                            expected: [0xec, 0x01],
                            actual: [decoded[0], decoded[1]],
                        },
                    },
                )
            }
            _ => (
                wire(&obj, value),
                Malformed::Sig {
                    value: value.to_owned(),
                    source: EncodingError::Length {
                        expected: 64,
                        actual: decoded.len(),
                    },
                },
            ),
        };
        assert_eq!(parse(&wire_bytes, &configured), Err(expected), "{value}");
    }

    // Positive control: the shipped proof decodes on all three fields.
    assert!(surface["positiveControl"].is_string());
    let o = &v["registration"]["object"];
    let principal =
        base58btc_decode(s(&o["principal"]).strip_prefix("did:key:z").unwrap()).unwrap();
    assert_eq!(
        (principal.len(), hex_of(&principal[..2])),
        (34, "ed01".to_owned())
    );
    let rkid = base58btc_decode(s(&o["rkid"]).strip_prefix('z').unwrap()).unwrap();
    assert_eq!((rkid.len(), hex_of(&rkid[..2])), (34, "ec01".to_owned()));
    let sig = base58btc_decode(reg_sig.strip_prefix('z').unwrap()).unwrap();
    assert_eq!(sig.len(), 64);
    assert!(parse(&registration_wire(&v), &configured).is_ok());
}

/// `generationSpelling`: lexemes spliced into the registration's raw
/// bytes. `1.0`/`1e0` parse as JSON, canonicalize to the shipped JCS and
/// let the shipped signature verify — and are refused at r1 on the
/// lexeme. `01`/`+1` die in the JSON reader.
#[test]
fn generation_spelling() {
    let v = vectors();
    let gs = &v["generationSpelling"];
    let configured = carrier(&v);
    let shipped_jcs = s(&v["registration"]["jcs"]);
    let text = String::from_utf8(registration_wire(&v)).unwrap();
    let canonical = format!("\"generation\":{},", s(&gs["canonical"]));
    assert_eq!(text.matches(&canonical).count(), 1);
    let splice = |lexeme: &str| -> Vec<u8> {
        text.replacen(&canonical, &format!("\"generation\":{lexeme},"), 1)
            .into_bytes()
    };
    assert_eq!(s(&gs["verdict"]), Malformed::VERDICT);

    let rejects = gs["rejects"].as_array().expect("rejects");
    assert_eq!(rejects.len(), 4);
    for case in rejects {
        let lexeme = s(&case["lexeme"]);
        let bytes = splice(lexeme);
        assert_ne!(bytes, text.as_bytes(), "{lexeme}");
        let result = parse(&bytes, &configured);
        if case["validJson"] == true {
            // The reader accepts it and keeps the lexeme...
            let value = json::parse(&bytes).unwrap();
            let mut obj = value.as_object().unwrap().clone();
            assert_eq!(
                obj.get(field::GENERATION)
                    .and_then(Value::as_number)
                    .map(Number::lexeme),
                Some(lexeme)
            );
            // ...JCS erases the spelling, and the shipped sig verifies:
            // nothing after r1 could catch it.
            obj.remove(field::SIG);
            let jcs_bytes = bytes_of(&obj);
            assert_eq!(case["jcsIdentical"], true);
            assert_eq!(jcs_bytes, shipped_jcs.as_bytes(), "{lexeme}");
            assert_eq!(case["signatureVerifies"], true);
            let sig =
                Signature::from_bytes(&signature_from_z(s(&v["registration"]["sig"])).unwrap());
            assert!(principal_key(&v).verify_strict(&jcs_bytes, &sig).is_ok());
            // So r1 refuses it on the lexeme.
            assert_eq!(
                result,
                Err(Malformed::Generation(GenerationError::NotCanonical {
                    lexeme: lexeme.to_owned()
                })),
                "{lexeme}"
            );
        } else {
            assert_eq!(case["validJson"], false);
            let json_error = json::parse(&bytes).expect_err(lexeme);
            assert_eq!(result, Err(Malformed::Json(json_error)), "{lexeme}");
        }
    }

    let accepts = gs["accepts"].as_array().expect("accepts");
    assert_eq!(accepts.len(), 3);
    for lexeme in accepts {
        let lexeme = s(lexeme);
        let proof = parse(&splice(lexeme), &configured).unwrap_or_else(|e| panic!("{lexeme}: {e}"));
        assert_eq!(proof.generation(), Some(lexeme.parse().unwrap()));
    }
    assert_eq!(
        parse(&splice("9007199254740991"), &configured)
            .unwrap()
            .generation(),
        Some(GENERATION_MAX)
    );

    // Out of the domain, canonically spelled.
    for lexeme in ["0", "9007199254740992", "18446744073709551616"] {
        assert_eq!(
            parse(&splice(lexeme), &configured),
            Err(Malformed::Generation(GenerationError::OutOfDomain {
                lexeme: lexeme.to_owned()
            })),
            "{lexeme}"
        );
    }
    // Valid JSON, not canonical decimal.
    for lexeme in ["-1", "1E0", "10e-1", "-0", "0.5"] {
        assert_eq!(
            parse(&splice(lexeme), &configured),
            Err(Malformed::Generation(GenerationError::NotCanonical {
                lexeme: lexeme.to_owned()
            })),
            "{lexeme}"
        );
    }
}

// ------------------------------------------------------ r1 structure

/// The four purposes' objects, from the shipped ones (rebind = the
/// registration object with `purpose` changed; r1 does not read `sig`'s
/// validity).
fn purpose_objects(v: &serde_json::Value) -> Vec<(Purpose, Object, String)> {
    let mut rebind = object(&v["registration"]["object"]);
    rebind.insert(field::PURPOSE, "rebind");
    vec![
        (
            Purpose::Register,
            object(&v["registration"]["object"]),
            s(&v["registration"]["sig"]).to_owned(),
        ),
        (
            Purpose::Rebind,
            rebind,
            s(&v["registration"]["sig"]).to_owned(),
        ),
        (
            Purpose::Collect,
            object(&v["collection"]["object"]),
            s(&v["collection"]["sig"]).to_owned(),
        ),
        (
            Purpose::Conclude,
            object(&v["conclusion"]["object"]),
            s(&v["conclusion"]["sig"]).to_owned(),
        ),
    ]
}

/// Every member is REQUIRED for its purpose: removing any one is
/// `MissingField` naming it.
#[test]
fn missing_member_per_purpose() {
    let v = vectors();
    let configured = carrier(&v);
    for (purpose, obj, sig) in purpose_objects(&v) {
        let full = {
            let mut o = obj.clone();
            o.insert(field::SIG, sig.as_str());
            o
        };
        assert!(parse(&bytes_of(&full), &configured).is_ok(), "{purpose}");
        let expected_len = if purpose.changes_succession() { 10 } else { 8 };
        assert_eq!(full.len(), expected_len, "{purpose}");
        for name in field::ALL {
            if !full.contains_key(name) {
                continue;
            }
            let mut o = full.clone();
            o.remove(name);
            assert_eq!(
                parse(&bytes_of(&o), &configured),
                Err(Malformed::MissingField { field: name }),
                "{purpose} without {name}"
            );
        }
    }
}

/// A member outside the closed set is refused, for every purpose.
#[test]
fn extra_member_per_purpose() {
    let v = vectors();
    let configured = carrier(&v);
    for (purpose, obj, sig) in purpose_objects(&v) {
        for extra in ["extra", "Sig", "proof", ""] {
            let mut o = obj.clone();
            o.insert(extra, "x");
            assert_eq!(
                parse(&wire(&o, &sig), &configured),
                Err(Malformed::UnknownField {
                    field: extra.to_owned()
                }),
                "{purpose} with {extra:?}"
            );
        }
    }
}

/// `generation` and `addressChallenge` are forbidden on `collect` and
/// `conclude`.
#[test]
fn succession_members_forbidden_on_session_purposes() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = &v["registration"]["object"];
    for (purpose, obj, sig) in purpose_objects(&v) {
        if purpose.changes_succession() {
            continue;
        }
        for (name, value) in [
            (field::GENERATION, Value::Number(Number::from_u64(1))),
            (
                field::ADDRESS_CHALLENGE,
                Value::from(s(&reg["addressChallenge"])),
            ),
        ] {
            let mut o = obj.clone();
            o.insert(name, value);
            assert_eq!(
                parse(&wire(&o, &sig), &configured),
                Err(Malformed::ForbiddenField {
                    field: name,
                    purpose
                }),
                "{name} on {purpose}"
            );
        }
    }
}

/// `carrier` is compared byte for byte with the configured identifier.
#[test]
fn wrong_carrier() {
    let v = vectors();
    let wire_bytes = registration_wire(&v);
    let shipped = carrier(&v);
    for configured in [
        "did:web:Carrier.example",
        "did:web:carrier.example/",
        "did:web:carrier.exampl",
        "did:web:other-carrier.example",
    ] {
        assert_eq!(
            parse(&wire_bytes, configured),
            Err(Malformed::WrongCarrier {
                value: shipped.clone()
            }),
            "{configured}"
        );
    }
}

/// Challenges: exactly 43 canonical unpadded base64url characters of 32
/// bytes.
#[test]
fn challenge_encodings() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let sig = s(&v["registration"]["sig"]);
    for name in [field::PRINCIPAL_CHALLENGE, field::ADDRESS_CHALLENGE] {
        let good = reg.get(name).and_then(Value::as_str).unwrap().to_owned();
        assert_eq!(good.len(), 43);
        // The shipped values have zero trailing bits; flip one of them.
        let last = good.chars().last().unwrap();
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let index = alphabet.find(last).unwrap();
        assert_eq!(index % 4, 0, "{good}");
        let nonzero_trailing = format!(
            "{}{}",
            &good[..42],
            alphabet.chars().nth(index + 1).unwrap()
        );
        // Canonical 42- and 44-character values: 31 and 33 bytes.
        let short = b64url_encode(&[9u8; 31]);
        let long = b64url_encode(&[9u8; 33]);
        assert_eq!((short.len(), long.len()), (42, 44));
        let cases = [
            (
                short,
                EncodingError::Length {
                    expected: 32,
                    actual: 31,
                },
            ),
            (
                long,
                EncodingError::Length {
                    expected: 32,
                    actual: 33,
                },
            ),
            // The shipped value cut to 42 characters leaves non-zero
            // trailing bits.
            (good[..42].to_owned(), EncodingError::Base64Url),
            (
                format!("{good}A"),
                EncodingError::Length {
                    expected: 32,
                    actual: 33,
                },
            ),
            (nonzero_trailing, EncodingError::Base64Url),
            (format!("{}=", &good[..42]), EncodingError::Base64Url),
            (format!("{good}="), EncodingError::Base64Url),
            (
                good.replace('_', "/").replace('-', "+"),
                EncodingError::Base64Url,
            ),
            (
                String::new(),
                EncodingError::Length {
                    expected: 32,
                    actual: 0,
                },
            ),
        ];
        for (bad, source) in cases {
            if bad == good {
                continue;
            }
            let mut o = reg.clone();
            o.insert(name, bad.as_str());
            assert_eq!(
                parse(&wire(&o, sig), &configured),
                Err(Malformed::Challenge {
                    field: name,
                    value: bad.clone(),
                    source
                }),
                "{name} = {bad:?}"
            );
        }
    }
}

/// `sig` must decode to exactly 64 bytes, canonically.
#[test]
fn signature_lengths() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let shipped = s(&v["registration"]["sig"]);
    for (bad, source) in [
        (
            multibase_z(&[7u8; 63]),
            EncodingError::Length {
                expected: 64,
                actual: 63,
            },
        ),
        (
            multibase_z(&[7u8; 65]),
            EncodingError::Length {
                expected: 64,
                actual: 65,
            },
        ),
        // A leading zero byte is a leading '1': 65 bytes, not 64.
        (
            format!("z1{}", &shipped[1..]),
            EncodingError::Length {
                expected: 64,
                actual: 65,
            },
        ),
        (
            format!("u{}", &shipped[1..]),
            EncodingError::MultibasePrefix(Some('u')),
        ),
        (
            shipped[1..].to_owned(),
            EncodingError::MultibasePrefix(Some(shipped.chars().nth(1).unwrap())),
        ),
        ("z".to_owned(), EncodingError::Base58Btc),
        (format!("{shipped}0"), EncodingError::Base58Btc),
    ] {
        assert_eq!(
            parse(&wire(&reg, &bad), &configured),
            Err(Malformed::Sig {
                value: bad.clone(),
                source
            }),
            "{bad}"
        );
    }
    // All-zero and three-leading-zero 64-byte signatures are encodings the
    // old {86,88} pattern would have refused; they decode (and fail only at
    // verification).
    for sig in [[0u8; 64], {
        let mut b = [0xffu8; 64];
        b[..3].fill(0);
        b
    }] {
        let proof = parse(&wire(&reg, &multibase_z(&sig)), &configured).unwrap();
        assert_eq!(proof.signature(), &sig);
        assert!(matches!(
            proof.verify(),
            Err(PossessionFailed::Signature { .. })
        ));
    }
}

/// The top level must be a JSON object; the bytes must be strict JSON.
#[test]
fn not_an_object_and_not_strict_json() {
    let v = vectors();
    let configured = carrier(&v);
    for (text, found) in [
        ("[]", "array"),
        ("\"x\"", "string"),
        ("1", "number"),
        ("null", "null"),
        ("true", "boolean"),
    ] {
        assert_eq!(
            parse(text.as_bytes(), &configured),
            Err(Malformed::NotAnObject { found }),
            "{text}"
        );
    }
    let good = registration_wire(&v);
    // A duplicate key.
    let mut dup = b"{\"v\":\"rltp-carrier-proof/0.3\",".to_vec();
    dup.extend_from_slice(&good[1..]);
    assert!(
        matches!(
            parse(&dup, &configured),
            Err(Malformed::Json(JsonError::DuplicateKey { ref key, .. })) if key == "v"
        ),
        "{:?}",
        parse(&dup, &configured)
    );
    // Trailing bytes.
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"{}");
    assert!(matches!(
        parse(&trailing, &configured),
        Err(Malformed::Json(JsonError::TrailingBytes { .. }))
    ));
    // Invalid UTF-8 inside a string.
    let text = String::from_utf8(good.clone()).unwrap();
    let at = text.find("did:web:carrier.example").unwrap();
    let mut bad_utf8 = good.clone();
    bad_utf8[at] = 0xC0;
    assert!(matches!(
        parse(&bad_utf8, &configured),
        Err(Malformed::Json(JsonError::InvalidUtf8 { .. }))
    ));
    assert!(matches!(parse(b"", &configured), Err(Malformed::Json(_))));
}

/// Every member has one JSON type; another type is malformed.
#[test]
fn wrong_member_types() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let sig = s(&v["registration"]["sig"]);
    for name in field::ALL {
        let replacement = if name == field::GENERATION {
            Value::from("1")
        } else {
            Value::Number(Number::from_u64(1))
        };
        let found = if name == field::GENERATION {
            "string"
        } else {
            "number"
        };
        let mut o = reg.clone();
        o.insert(field::SIG, sig);
        o.insert(name, replacement);
        assert_eq!(
            parse(&bytes_of(&o), &configured),
            Err(Malformed::WrongType { field: name, found }),
            "{name}"
        );
    }
    let mut o = reg.clone();
    o.insert(field::GENERATION, Value::Null);
    assert_eq!(
        parse(&wire(&o, sig), &configured),
        Err(Malformed::WrongType {
            field: field::GENERATION,
            found: "null"
        })
    );
}

/// `v`, `type` and `purpose` are byte-exact constants / a closed set.
#[test]
fn constants_are_byte_exact() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let sig = s(&v["registration"]["sig"]);
    assert_eq!(PROOF_V, s(&v["v"]));
    assert_eq!(PROOF_V, "rltp-carrier-proof/0.3");
    assert_eq!(PROOF_TYPE, "carrier-registration-proof");
    for bad in [
        "rltp-carrier-proof/0.2",
        "rltp-carrier-proof/0.3 ",
        "RLTP-carrier-proof/0.3",
    ] {
        let mut o = reg.clone();
        o.insert(field::V, bad);
        assert_eq!(
            parse(&wire(&o, sig), &configured),
            Err(Malformed::Version {
                value: bad.to_owned()
            })
        );
    }
    for bad in ["carrier-registration", "Carrier-registration-proof"] {
        let mut o = reg.clone();
        o.insert(field::TYPE, bad);
        assert_eq!(
            parse(&wire(&o, sig), &configured),
            Err(Malformed::Type {
                value: bad.to_owned()
            })
        );
    }
    for bad in ["Register", "register ", "submit", ""] {
        let mut o = reg.clone();
        o.insert(field::PURPOSE, bad);
        assert_eq!(
            parse(&wire(&o, sig), &configured),
            Err(Malformed::UnknownPurpose {
                value: bad.to_owned()
            })
        );
    }
    for p in Purpose::ALL {
        assert_eq!(Purpose::from_wire(p.as_str()), Some(p));
        assert_eq!(p.to_string(), p.as_str());
    }
    assert_eq!(
        Purpose::ALL.map(Purpose::as_str),
        ["register", "rebind", "collect", "conclude"]
    );
}

/// The documented r1 order: the three base58btc identifiers are decoded
/// before any other check (§11), then the closed set, purpose, matrix,
/// constants, carrier, challenges, generation.
#[test]
fn r1_check_order() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let sig = s(&v["registration"]["sig"]);
    let bad_principal = "did:key:z6Mk11111111111111111111111111111111111111111111";
    let bad_rkid = "z6LS11111111111111111111111111111111111111111111";
    let bad_sig = multibase_z(&[1u8; 63]);

    // Everything wrong at once: the principal is reported.
    let mut o = reg.clone();
    o.insert(field::PRINCIPAL, bad_principal);
    o.insert(field::RKID, bad_rkid);
    o.insert(field::V, "other");
    o.insert("extra", 1u64.to_string());
    o.insert(field::GENERATION, Value::from("1.0"));
    o.remove(field::ADDRESS_CHALLENGE);
    let all_wrong = wire(&o, &bad_sig);
    assert!(matches!(
        parse(&all_wrong, "did:web:elsewhere"),
        Err(Malformed::Principal { .. })
    ));
    // Then the rkid, then the sig.
    o.insert(field::PRINCIPAL, s(&v["keys"]["principal"]));
    assert!(matches!(
        parse(&wire(&o, &bad_sig), "did:web:elsewhere"),
        Err(Malformed::Rkid { .. })
    ));
    o.insert(field::RKID, s(&v["keys"]["rkid"]));
    assert!(matches!(
        parse(&wire(&o, &bad_sig), "did:web:elsewhere"),
        Err(Malformed::Sig { .. })
    ));
    // Then the closed set, before purpose matrix and constants.
    assert!(matches!(
        parse(&wire(&o, sig), "did:web:elsewhere"),
        Err(Malformed::UnknownField { .. })
    ));
    o.remove("extra");
    // Then the purpose matrix (missing addressChallenge) before `v`.
    assert_eq!(
        parse(&wire(&o, sig), "did:web:elsewhere"),
        Err(Malformed::MissingField {
            field: field::ADDRESS_CHALLENGE
        })
    );
    o.insert(field::ADDRESS_CHALLENGE, "x");
    assert!(matches!(
        parse(&wire(&o, sig), "did:web:elsewhere"),
        Err(Malformed::Version { .. })
    ));
    o.insert(field::V, PROOF_V);
    assert!(matches!(
        parse(&wire(&o, sig), "did:web:elsewhere"),
        Err(Malformed::WrongCarrier { .. })
    ));
    assert!(matches!(
        parse(&wire(&o, sig), &configured),
        Err(Malformed::Challenge {
            field: "addressChallenge",
            ..
        })
    ));
    o.insert(
        field::ADDRESS_CHALLENGE,
        s(&v["registration"]["object"]["addressChallenge"]),
    );
    assert!(matches!(
        parse(&wire(&o, sig), &configured),
        Err(Malformed::WrongType {
            field: "generation",
            ..
        })
    ));
    o.insert(field::GENERATION, Number::from_u64(1));
    assert!(parse(&wire(&o, sig), &configured).unwrap().verify().is_ok());
}

// ------------------------------------------------------ verify (r3 half)

/// A principal that decodes (r1) but is not a curve point fails at
/// verification, not at parse; a small-order key fails `verify_strict`.
#[test]
fn principal_key_checked_at_verification() {
    let v = vectors();
    let configured = carrier(&v);
    let reg = object(&v["registration"]["object"]);
    let sig = s(&v["registration"]["sig"]);
    let not_a_point = (0u8..=255)
        .map(|i| {
            let mut b = [0u8; 32];
            b[0] = i;
            b[1] = 1;
            b
        })
        .find(|b| ed25519_dalek::VerifyingKey::from_bytes(b).is_err())
        .expect("some y has no x");
    let did = DidKey::from_bytes(not_a_point);
    let mut o = reg.clone();
    o.insert(field::PRINCIPAL, did.to_did_key());
    let proof = parse(&wire(&o, sig), &configured).unwrap();
    assert_eq!(
        proof.verify(),
        Err(PossessionFailed::PrincipalKey {
            principal: did.to_did_key(),
            source: EncodingError::InvalidEd25519Key
        })
    );

    // The identity point (small order): a weak key, refused by verify_strict.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let did = DidKey::from_bytes(identity);
    let mut o = reg.clone();
    o.insert(field::PRINCIPAL, did.to_did_key());
    let proof = parse(&wire(&o, sig), &configured).unwrap();
    assert_eq!(
        proof.verify(),
        Err(PossessionFailed::Signature {
            principal: did.to_did_key()
        })
    );
    assert_eq!(Malformed::VERDICT, "refused(malformed)");
    assert_eq!(PossessionFailed::VERDICT, "refused(possession-failed)");
}

/// A valid signature from another proof (another purpose) does not verify:
/// purpose is inside the signed bytes.
#[test]
fn signature_of_another_purpose_does_not_verify() {
    let v = vectors();
    let configured = carrier(&v);
    let collect = object(&v["collection"]["object"]);
    let proof = parse(&wire(&collect, s(&v["conclusion"]["sig"])), &configured).unwrap();
    assert!(matches!(
        proof.verify(),
        Err(PossessionFailed::Signature { .. })
    ));
}

// ------------------------------------------------------------ builder

#[test]
fn builder_enforces_the_purpose_matrix_and_domain() {
    let v = vectors();
    let c = CarrierId::from_bytes(carrier(&v).as_bytes()).unwrap();
    let rkid = Rkid::parse(s(&v["keys"]["rkid"])).unwrap();
    for purpose in [Purpose::Collect, Purpose::Conclude] {
        assert_eq!(
            UnsignedProof::registration(purpose, c.clone(), rkid, 1, [1; 32], [2; 32]),
            Err(BuildError::PurposeMismatch { purpose })
        );
    }
    for purpose in [Purpose::Register, Purpose::Rebind] {
        assert_eq!(
            UnsignedProof::session(purpose, c.clone(), rkid, [1; 32]),
            Err(BuildError::PurposeMismatch { purpose })
        );
    }
    for generation in [0, GENERATION_MAX + 1, u64::MAX] {
        assert_eq!(
            UnsignedProof::registration(
                Purpose::Register,
                c.clone(),
                rkid,
                generation,
                [1; 32],
                [2; 32]
            ),
            Err(BuildError::GenerationOutOfDomain { generation })
        );
    }
}

/// Built proofs of every purpose round-trip through r1 and verify.
#[test]
fn builder_round_trips() {
    let v = vectors();
    let key = signing_key(&v);
    let configured = carrier(&v);
    let c = CarrierId::from_bytes(configured.as_bytes()).unwrap();
    let rkid = Rkid::parse(s(&v["keys"]["otherRkid"])).unwrap();
    for purpose in Purpose::ALL {
        let unsigned = if purpose.changes_succession() {
            UnsignedProof::registration(purpose, c.clone(), rkid, GENERATION_MAX, [3; 32], [4; 32])
        } else {
            UnsignedProof::session(purpose, c.clone(), rkid, [3; 32])
        }
        .unwrap();
        let bytes = unsigned.sign(&key).unwrap();
        let proof = parse(&bytes, &configured).unwrap();
        assert_eq!(proof.verify(), Ok(()), "{purpose}");
        assert_eq!(proof.purpose(), purpose);
        assert_eq!(proof.rkid(), &rkid);
        assert_eq!(
            proof.principal(),
            &DidKey::from_verifying_key(&key.verifying_key())
        );
        assert_eq!(proof.principal_challenge(), &[3; 32]);
        if purpose.changes_succession() {
            assert_eq!(proof.generation(), Some(GENERATION_MAX));
            assert_eq!(proof.address_challenge(), Some(&[4; 32]));
        } else {
            assert_eq!(proof.generation(), None);
            assert_eq!(proof.address_challenge(), None);
        }
        // The proof is bound to the carrier it names.
        assert!(matches!(
            parse(&bytes, "did:web:other-carrier.example"),
            Err(Malformed::WrongCarrier { .. })
        ));
    }
}
