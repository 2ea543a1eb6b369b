//! Identity §7a.2–§7a.4 against the shipped `identity-derivation.json`
//! (`rootIkm`, `hkdf`, `carrierRelationship`, `adapterScopedIdentities`).
//! A missing vector file is a failure, never a skip.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use std::str::FromStr;

use rltp_proofs::encoding::digest_multibase;
use rltp_proofs::identity::{
    CARRIER_CONNECTION_PREFIX, CARRIER_EGRESS_PREFIX, CARRIER_ID_MAX_BYTES,
    CARRIER_RELATIONSHIP_PREFIX, CarrierFamily, CarrierId, CarrierIdError, ForbiddenClass,
    GENERATION_MAX, GENERATION_MIN, carrier_seed, control_principal, derivation_info,
    derive_identity, derive_seed, parse_generation_lexeme, unicode_pin,
};
use rltp_proofs::json;
use serde_json::Value;

fn vectors() -> Value {
    common::shipped("identity-derivation.json")
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn hex32(s: &str) -> [u8; 32] {
    hex(s).try_into().expect("32 bytes")
}

fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

fn root_ikm(v: &Value) -> Vec<u8> {
    let ikm = hex(s(&v["rootIkm"]));
    assert_eq!(ikm.len(), 64);
    ikm
}

fn cr(v: &Value) -> &Value {
    &v["carrierRelationship"]
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The HKDF parameters this module hard-codes are the shipped ones.
#[test]
fn hkdf_parameters_are_the_shipped_ones() {
    let v = vectors();
    assert_eq!(v["hkdf"]["hash"], "SHA-256");
    assert_eq!(v["hkdf"]["salt"], "");
}

/// The step-4 tables are the shipped Unicode 15.0 pin, range for range.
#[test]
fn unicode_pin_tables_equal_the_shipped_pin() {
    let v = vectors();
    let pin = &cr(&v)["identifierGrammar"]["unicodePin"];
    assert_eq!(s(&pin["version"]), unicode_pin::VERSION);
    let render = |table: &[(u32, u32)]| -> Vec<String> {
        table
            .iter()
            .map(|&(first, last)| {
                if first == last {
                    format!("{first:04X}")
                } else {
                    format!("{first:04X}-{last:04X}")
                }
            })
            .collect()
    };
    let shipped = |key: &str| -> Vec<String> {
        pin[key]
            .as_array()
            .unwrap_or_else(|| panic!("unicodePin.{key} is not an array"))
            .iter()
            .map(|r| s(r).to_owned())
            .collect()
    };
    assert_eq!(render(unicode_pin::CC), shipped("cc"));
    assert_eq!(render(unicode_pin::CF), shipped("cf"));
    assert_eq!(render(unicode_pin::WHITE_SPACE), shipped("whiteSpace"));
}

/// Every code point of every pinned range is rejected anywhere in `C`, and
/// the code points just outside each range are not (where they are in no
/// other range).
#[test]
fn every_pinned_code_point_is_rejected_at_step_4() {
    let tables = [
        (unicode_pin::CC, ForbiddenClass::Cc),
        (unicode_pin::CF, ForbiddenClass::Cf),
        (unicode_pin::WHITE_SPACE, ForbiddenClass::WhiteSpace),
    ];
    for (table, _) in tables {
        for &(first, last) in table {
            for cp in first..=last {
                let c = char::from_u32(cp).expect("pinned ranges hold no surrogate");
                let err = CarrierId::from_str(&format!("did:web:x{c}y")).unwrap_err();
                assert_eq!(err.step(), 4, "U+{cp:04X}");
                match err {
                    CarrierIdError::ForbiddenCodePoint {
                        code_point, offset, ..
                    } => {
                        assert_eq!(code_point, c);
                        assert_eq!(offset, "did:web:x".len());
                    }
                    other => panic!("U+{cp:04X}: {other:?}"),
                }
            }
            for cp in [first.wrapping_sub(1), last + 1] {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                let in_any = tables
                    .iter()
                    .any(|(t, _)| t.iter().any(|&(a, b)| (a..=b).contains(&cp)));
                assert_eq!(
                    CarrierId::from_str(&format!("x{c}")).is_ok(),
                    !in_any,
                    "U+{cp:04X}"
                );
            }
        }
    }
    // The reported class for a code point in two sets is the first of
    // Cc, Cf, White_Space.
    assert_eq!(ForbiddenClass::of('\u{0A}'), Some(ForbiddenClass::Cc));
    assert_eq!(
        ForbiddenClass::of('\u{3000}'),
        Some(ForbiddenClass::WhiteSpace)
    );
}

/// The pin, not the runtime: U+180E is `Cf` in Unicode 15.0 and not
/// `White_Space`; U+200B is `Cf` and Rust does not call it whitespace.
#[test]
fn the_pin_governs_not_the_platform() {
    assert!(!'\u{200B}'.is_whitespace());
    assert_eq!(ForbiddenClass::of('\u{200B}'), Some(ForbiddenClass::Cf));
    assert_eq!(ForbiddenClass::of('\u{180E}'), Some(ForbiddenClass::Cf));
    assert_eq!(ForbiddenClass::of('\u{00AD}'), Some(ForbiddenClass::Cf));
}

/// `carrierRelationship.cases`: `Dc`, info, seed and principal for each
/// carrier, with one relationship nonce.
#[test]
fn carrier_relationship_cases() {
    let v = vectors();
    let cr = cr(&v);
    let ikm = root_ikm(&v);
    assert_eq!(s(&cr["prefix"]), CARRIER_RELATIONSHIP_PREFIX);
    assert_eq!(
        CarrierFamily::Relationship.prefix(),
        CARRIER_RELATIONSHIP_PREFIX
    );
    let nonce = hex32(s(&cr["relationshipNonce"]));
    assert_eq!(digest_multibase(&nonce), s(&cr["relationshipDigest"]));

    let cases = cr["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3);
    let mut principals = Vec::new();
    for case in cases {
        let name = s(&case["case"]);
        let c = CarrierId::from_str(s(&case["carrier"])).expect(name);
        assert_eq!(c.as_str(), s(&case["carrier"]), "{name}");
        assert_eq!(c.digest(), s(&case["carrierDigest"]), "{name}");
        assert_eq!(c.digest().len(), 47);
        let info = derivation_info(CarrierFamily::Relationship, &c, &nonce);
        assert_eq!(info, s(&case["info"]), "{name}");
        assert_eq!(info.len(), CARRIER_RELATIONSHIP_PREFIX.len() + 94);
        let seed = carrier_seed(&ikm, &c, &nonce);
        assert_eq!(hex_of(&seed), s(&case["edSeed"]), "{name}");
        assert_eq!(
            seed,
            derive_seed(CarrierFamily::Relationship, &ikm, &c, &nonce)
        );
        let (key, did) = control_principal(&ikm, &c, &nonce);
        assert_eq!(key.to_bytes(), seed, "{name}");
        assert_eq!(did.to_did_key(), s(&case["principal"]), "{name}");
        // Identity §7a.1: no key-agreement key exists for this class.
        assert!(
            case.get("keyAgreement").is_some_and(Value::is_null),
            "{name}"
        );
        principals.push(did);
    }
    assert!(cr.get("keyAgreement").is_some_and(Value::is_null));
    // two carriers → two principals; a case variant → a third.
    assert_ne!(principals[0], principals[1]);
    assert_ne!(principals[0], principals[2]);
    assert_ne!(principals[1], principals[2]);
}

/// `relationshipAxisCase`: the same carrier, a second nonce → a different
/// principal.
#[test]
fn relationship_axis_case() {
    let v = vectors();
    let cr = cr(&v);
    let ikm = root_ikm(&v);
    let case = &cr["relationshipAxisCase"];
    let nonce = hex32(s(&case["nonce"]));
    assert_eq!(s(&case["nonce"]), s(&cr["secondRelationshipNonce"]));
    assert_eq!(digest_multibase(&nonce), s(&cr["secondRelationshipDigest"]));
    let c = CarrierId::from_str(s(&case["carrier"])).unwrap();
    assert_eq!(
        derivation_info(CarrierFamily::Relationship, &c, &nonce),
        s(&case["info"])
    );
    assert_eq!(hex_of(&carrier_seed(&ikm, &c, &nonce)), s(&case["edSeed"]));
    let (_, did) = control_principal(&ikm, &c, &nonce);
    assert_eq!(did.to_did_key(), s(&case["principal"]));
    assert!(case.get("keyAgreement").is_some_and(Value::is_null));
    let first = s(&cr["cases"][0]["principal"]);
    assert_ne!(did.to_did_key(), first);
}

/// `adapterScopedIdentities`: the connection and egress identities share
/// `Dc ‖ Dn` with the control principal and differ only in the prefix.
#[test]
fn adapter_scoped_identities() {
    let v = vectors();
    let ikm = root_ikm(&v);
    let nonce = hex32(s(&cr(&v)["relationshipNonce"]));
    let a = &v["adapterScopedIdentities"];
    let c = CarrierId::from_str(s(&a["carrier"])).unwrap();
    let mut dids = vec![control_principal(&ikm, &c, &nonce).1];
    for (key, family, prefix) in [
        (
            "connection",
            CarrierFamily::Connection,
            CARRIER_CONNECTION_PREFIX,
        ),
        ("egress", CarrierFamily::Egress, CARRIER_EGRESS_PREFIX),
    ] {
        let case = &a[key];
        assert_eq!(s(&case["prefix"]), prefix, "{key}");
        assert_eq!(family.prefix(), prefix, "{key}");
        assert_eq!(
            derivation_info(family, &c, &nonce),
            s(&case["info"]),
            "{key}"
        );
        let (signing, did) = derive_identity(family, &ikm, &c, &nonce);
        assert_eq!(signing.to_bytes(), derive_seed(family, &ikm, &c, &nonce));
        assert_eq!(did.to_did_key(), s(&case["did"]), "{key}");
        dids.push(did);
    }
    assert_ne!(dids[0], dids[1]);
    assert_ne!(dids[0], dids[2]);
    assert_ne!(dids[1], dids[2]);
}

/// `identifierGrammar.accepts`: valid as a string and as raw bytes, and
/// stored unchanged (no normalization).
#[test]
fn identifier_grammar_accepts() {
    let v = vectors();
    let g = &cr(&v)["identifierGrammar"];
    assert_eq!(g["maxBytes"].as_u64(), Some(CARRIER_ID_MAX_BYTES as u64));
    let accepts = g["accepts"].as_array().expect("accepts");
    assert_eq!(accepts.len(), 5);
    for value in accepts {
        let value = s(value);
        let c = CarrierId::from_str(value).unwrap_or_else(|e| panic!("{value:?}: {e}"));
        assert_eq!(c.as_bytes(), value.as_bytes());
        assert_eq!(CarrierId::from_bytes(value.as_bytes()).unwrap(), c);
    }
}

/// `identifierGrammar.rejects`, each at the step its reason names.
#[test]
fn identifier_grammar_rejects() {
    let v = vectors();
    let g = &cr(&v)["identifierGrammar"];
    let rejects = g["rejects"].as_array().expect("rejects");
    assert_eq!(rejects.len(), 8);
    for case in rejects {
        let reason = s(&case["reason"]);
        if let Some(value) = case.get("value") {
            let value = s(value);
            let err = CarrierId::from_str(value).expect_err(reason);
            assert_eq!(CarrierId::from_bytes(value.as_bytes()).unwrap_err(), err);
            let expected_class = if reason.starts_with("empty") {
                assert_eq!(err, CarrierIdError::Length { len: 0 }, "{reason}");
                continue;
            } else if reason.contains("White_Space") {
                ForbiddenClass::WhiteSpace
            } else if reason.contains("(Cc)") {
                ForbiddenClass::Cc
            } else if reason.contains("(Cf)") {
                ForbiddenClass::Cf
            } else {
                panic!("no expectation for reject {reason:?}")
            };
            match err {
                CarrierIdError::ForbiddenCodePoint { class, .. } => {
                    assert_eq!(class, expected_class, "{reason}")
                }
                other => panic!("{reason}: {other:?}"),
            }
        } else if let Some(escaped) = case.get("valueEscaped") {
            // The value is a JSON string escape holding an unpaired
            // surrogate: the strict reader refuses it — never U+FFFD.
            let escaped = s(escaped);
            assert!(escaped.contains("\\ud800"), "{escaped}");
            let text = format!("\"{escaped}\"");
            assert!(
                matches!(
                    json::parse(text.as_bytes()),
                    Err(json::JsonError::UnpairedSurrogate { .. })
                ),
                "{reason}"
            );
            // The same value as bytes (CESU-8 surrogate) fails at step 1.
            let (head, tail) = escaped.split_once("\\ud800").unwrap();
            let mut bytes = head.as_bytes().to_vec();
            bytes.extend_from_slice(&[0xED, 0xA0, 0x80]);
            bytes.extend_from_slice(tail.as_bytes());
            let err = CarrierId::from_bytes(&bytes).unwrap_err();
            assert_eq!(err.step(), 1, "{reason}");
            assert_eq!(err, CarrierIdError::InvalidUtf8 { offset: head.len() });
            // And as UTF-16 code units, the other reading of step 1.
            let units: Vec<u16> = head
                .encode_utf16()
                .chain([0xD800])
                .chain(tail.encode_utf16())
                .collect();
            assert!(String::from_utf16(&units).is_err());
        } else if let Some(repeat) = case.get("repeat") {
            let count = repeat["count"].as_u64().unwrap() as usize;
            assert_eq!(count, CARRIER_ID_MAX_BYTES + 1);
            let value = s(&repeat["char"]).repeat(count);
            assert_eq!(value.len(), 1025);
            let err = CarrierId::from_str(&value).unwrap_err();
            assert_eq!(err, CarrierIdError::Length { len: 1025 }, "{reason}");
            assert_eq!(err.step(), 3);
            // The boundary itself is accepted.
            let at_bound = s(&repeat["char"]).repeat(count - 1);
            assert!(CarrierId::from_str(&at_bound).is_ok());
        } else {
            panic!("unrecognized reject case {case}");
        }
    }
}

/// `rawByteRejects` (step 1, or step 4 for the well-formed U+0000 case) and
/// `rawByteAccepts`.
#[test]
fn raw_byte_rejects_and_accepts() {
    let v = vectors();
    let g = &cr(&v)["identifierGrammar"];
    let rejects = g["rawByteRejects"].as_array().expect("rawByteRejects");
    assert_eq!(rejects.len(), 7);
    for case in rejects {
        let reason = s(&case["reason"]);
        let bytes = hex(s(&case["bytesHex"]));
        let err = CarrierId::from_bytes(&bytes).expect_err(reason);
        if reason.contains("rejected at step 4") {
            assert_eq!(
                err,
                CarrierIdError::ForbiddenCodePoint {
                    code_point: '\0',
                    class: ForbiddenClass::Cc,
                    offset: bytes.len() - 1,
                },
                "{reason}"
            );
        } else {
            assert!(
                matches!(err, CarrierIdError::InvalidUtf8 { offset: 0 }),
                "{reason}: {err:?}"
            );
            assert_eq!(err.step(), 1, "{reason}");
        }
    }
    let accepts = g["rawByteAccepts"].as_array().expect("rawByteAccepts");
    assert_eq!(accepts.len(), 1);
    for case in accepts {
        let bytes = hex(s(&case["bytesHex"]));
        let reason = s(&case["reason"]);
        let c = CarrierId::from_bytes(&bytes).unwrap_or_else(|e| panic!("{reason}: {e}"));
        assert_eq!(c.as_bytes(), &bytes[..]);
        assert_eq!(c.as_str(), "did:web:carrier.example");
    }
}

/// `nfcPair`: NFC and NFD spellings are both valid and are two carriers.
#[test]
fn nfc_pair_derives_two_principals() {
    let v = vectors();
    let g = &cr(&v)["identifierGrammar"];
    let ikm = root_ikm(&v);
    let nonce = hex32(s(&cr(&v)["relationshipNonce"]));
    let pair = g["nfcPair"].as_array().expect("nfcPair");
    assert_eq!(pair.len(), 2);
    let nfc = CarrierId::from_str(s(&pair[0])).unwrap();
    let nfd = CarrierId::from_str(s(&pair[1])).unwrap();
    assert_eq!(nfc.as_str(), "did:web:tr\u{e4}ger.example");
    assert_eq!(nfd.as_str(), "did:web:tra\u{308}ger.example");
    assert_ne!(nfc, nfd);
    assert_ne!(nfc.digest(), nfd.digest());
    let (_, p1) = control_principal(&ikm, &nfc, &nonce);
    let (_, p2) = control_principal(&ikm, &nfd, &nonce);
    assert_ne!(p1, p2);
}

/// `nonceConvergence.generationDomain`: the domain and the canonical
/// decimal spelling, on the raw lexeme.
#[test]
fn generation_domain() {
    let v = vectors();
    let d = &cr(&v)["nonceConvergence"]["generationDomain"];
    assert_eq!(d["min"].as_u64(), Some(GENERATION_MIN));
    assert_eq!(d["max"].as_u64(), Some(GENERATION_MAX));
    let accepts = d["accepts"].as_array().expect("accepts");
    assert_eq!(accepts.len(), 4);
    for n in accepts {
        let n = n.as_u64().expect("integer accept");
        assert_eq!(parse_generation_lexeme(&n.to_string()), Ok(n));
    }
    let rejects = d["rejects"].as_array().expect("rejects");
    assert_eq!(rejects.len(), 7);
    for case in rejects {
        let lexeme = match (case.get("value"), case.get("valueString")) {
            (Some(n), None) => n.to_string(),
            (None, Some(s)) => s.as_str().expect("string").to_owned(),
            _ => panic!("unrecognized generation reject {case}"),
        };
        assert!(
            parse_generation_lexeme(&lexeme).is_err(),
            "{lexeme}: {}",
            case["reason"]
        );
    }
    assert_eq!(
        parse_generation_lexeme("9007199254740991"),
        Ok(GENERATION_MAX)
    );
}
