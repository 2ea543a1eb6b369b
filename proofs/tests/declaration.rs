//! Tests for `constants` (§4.4 guarantee 1, §11, Access §7.3) and
//! `declaration` (`registry-declaration/0.1`, `eddsa-jcs-2022`, the generic
//! revision rule), against the shipped vectors and the W3C vc-di-eddsa
//! `eddsa-jcs-2022` vector stored in `tests/data/w3c-eddsa-jcs-2022/`.

// A test reads top to bottom: long test functions are legitimate here (issue 22 bounds production code).
#![allow(clippy::too_many_lines)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use ed25519_dalek::SigningKey;
use rltp_proofs::constants::{
    CARRIER_ROLE, CONSTANT_NAMES, CarrierConstantLexemes, CarrierConstants, ConstantError,
    DurationFault, IntegerFault, parse_canonical_integer, parse_duration,
};
use rltp_proofs::declaration::{
    CarrierDeclarationError, CryptosuiteError, DeclarationBuildError, DeclarationHeader,
    DeclarationParseError, DeclarationVerifyError, OWN_DOCUMENT_TYPES, REGISTRY_DECLARATION_TYPE,
    RevisionOutcome, accept_carrier_declaration, eddsa_jcs_2022_hash_data,
    eddsa_jcs_2022_proof_config, eddsa_jcs_2022_sign, eddsa_jcs_2022_verify,
    is_known_document_type, parse_declaration, revision_rule, sign_carrier_declaration,
    sign_declaration, verify_declaration,
};
use rltp_proofs::json::{self, Object, Value};
use rltp_proofs::multikey::DidKey;
use rltp_proofs::{encoding, jcs};
use std::path::PathBuf;

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// A shipped vector file; a missing file is a failure, never a skip.
fn shipped(name: &str) -> serde_json::Value {
    common::shipped(name)
}

fn w3c_file(name: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/w3c-eddsa-jcs-2022"
    ))
    .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{} missing: {e}", path.display()))
}

fn w3c_text(name: &str) -> String {
    String::from_utf8(w3c_file(name)).expect("utf-8")
}

fn w3c_object(name: &str) -> Object {
    object(json::parse(&w3c_file(name)).expect("strict json"))
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(o) => o,
        other => panic!("not an object: {other:?}"),
    }
}

fn to_object(value: &serde_json::Value) -> Object {
    object(json::from_serde(value))
}

fn jcs_of(o: &Object) -> Vec<u8> {
    jcs::canonicalize(&Value::Object(o.clone())).expect("jcs")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn g1() -> serde_json::Value {
    shipped("carrier-proof.json")["carrierGuarantees"]["g1_declaration"].clone()
}

/// The `g1_declaration.declaration` constants (a valid carrier declaration).
fn g1_constants() -> Object {
    to_object(&g1()["declaration"])
}

const VALID: CarrierConstantLexemes<'static> = CarrierConstantLexemes {
    orphan_horizon: "P90D",
    give_up_horizon: "P30D",
    challenge_lifetime: "PT1M",
    queue_floor: "65536",
    max_queue_bytes: "1048576",
    max_binding_tombstones: "1000",
    status_horizon: "PT30S",
};

fn carrier_key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

fn counterpart() -> DidKey {
    DidKey::from_verifying_key(&SigningKey::from_bytes(&[9u8; 32]).verifying_key())
}

const HEADER: DeclarationHeader<'static> = DeclarationHeader {
    id: "0b6f4c1e-2d3a-4b5c-8d7e-000000000001",
    thread_id: "0b6f4c1e-2d3a-4b5c-8d7e-000000000002",
    issued_at: "2026-11-29T12:00:00Z",
    created: "2026-11-29T12:00:00Z",
    revision: 1,
};

/// Builds, signs and parses a declaration; the rejection under test must
/// come later than parsing.
fn signed(role: &str, constants: &Object, revision: u64) -> Vec<u8> {
    let header = DeclarationHeader { revision, ..HEADER };
    sign_declaration(&carrier_key(), &counterpart(), &header, role, constants).expect("signs")
}

fn parse_verify(bytes: &[u8]) -> rltp_proofs::declaration::VerifiedDeclaration {
    verify_declaration(parse_declaration(bytes).expect("parses")).expect("verifies")
}

/// Re-serializes a (tampered) document as JCS bytes.
fn reserialize(document: &Object) -> Vec<u8> {
    jcs_of(document)
}

fn document_of(bytes: &[u8]) -> Object {
    object(json::parse(bytes).expect("json"))
}

// ---------------------------------------------------------------------------
// Access §7.3 durations (carrier-proof.json durationGrammar)
// ---------------------------------------------------------------------------

#[test]
fn duration_grammar_accepts_with_exact_milliseconds() {
    let grammar = &shipped("carrier-proof.json")["durationGrammar"];
    let accepts = grammar["accept"].as_array().expect("accept list");
    assert_eq!(accepts.len(), 6);
    for case in accepts {
        let lexeme = case["lexeme"].as_str().expect("lexeme");
        let ms = case["ms"].as_u64().expect("ms");
        assert_eq!(parse_duration(lexeme), Ok(ms), "{lexeme}");
    }
}

#[test]
fn duration_grammar_rejects_every_shipped_negative_with_its_reason() {
    let grammar = &shipped("carrier-proof.json")["durationGrammar"];
    let expected = |lexeme: &str| match lexeme {
        "PT1.0005S" => DurationFault::Fraction,
        "P1M" => DurationFault::Months,
        "P1Y" => DurationFault::Years,
        "P1W" => DurationFault::Weeks,
        "PT3M2H" => DurationFault::OutOfOrder,
        "P" | "PT" => DurationFault::NoComponent,
        "PT1234S" => DurationFault::TooManyDigits,
        "P1DT" => DurationFault::EmptyTimePart,
        other => panic!("shipped reject {other:?} has no expected fault here"),
    };
    let rejects = grammar["reject"].as_array().expect("reject list");
    assert_eq!(rejects.len(), 9);
    for case in rejects {
        let lexeme = case["lexeme"].as_str().expect("lexeme");
        assert_eq!(
            parse_duration(lexeme),
            Err(ConstantError::Duration {
                lexeme: lexeme.to_owned(),
                fault: expected(lexeme),
            }),
            "{lexeme}"
        );
    }
}

#[test]
fn duration_grammar_edges() {
    // Leading zeros inside the 1-3 digits: the literal reading of the grammar.
    assert_eq!(parse_duration("PT05S"), Ok(5_000));
    assert_eq!(parse_duration("P007D"), Ok(7 * 86_400_000));
    assert_eq!(parse_duration("PT0S"), Ok(0));
    assert_eq!(
        parse_duration("P999DT999H999M999S"),
        Ok(999 * 86_400_000 + 999 * 3_600_000 + 999 * 60_000 + 999_000)
    );
    assert_eq!(parse_duration("PT300S"), Ok(300_000));
    assert_eq!(parse_duration("P1DT1S"), Ok(86_401_000));
    for (lexeme, fault) in [
        ("pt1s", DurationFault::Lowercase),
        ("P1d", DurationFault::Lowercase),
        ("P1D1D", DurationFault::OutOfOrder),
        ("PT1S1M", DurationFault::OutOfOrder),
        ("PT1,5S", DurationFault::Fraction),
        ("P0001D", DurationFault::TooManyDigits),
        ("P1", DurationFault::MissingDesignator),
        ("PTS", DurationFault::MissingValue),
        ("P1S", DurationFault::WrongPart),
        ("P1Y2D", DurationFault::Years),
        ("-P1D", DurationFault::MissingP),
        ("P1DT1H ", DurationFault::UnexpectedCharacter),
    ] {
        assert_eq!(
            parse_duration(lexeme),
            Err(ConstantError::Duration {
                lexeme: lexeme.to_owned(),
                fault
            }),
            "{lexeme}"
        );
    }
    assert_eq!(
        parse_duration("P1W").map_err(|e| e.to_string()),
        Err(
            "\"P1W\" is not a duration in Access §7.3's grammar: weeks are not in the subset"
                .into()
        )
    );
}

// ---------------------------------------------------------------------------
// §4.4 integers
// ---------------------------------------------------------------------------

#[test]
fn canonical_integers() {
    assert_eq!(parse_canonical_integer("1"), Ok(1));
    assert_eq!(parse_canonical_integer("65536"), Ok(65_536));
    assert_eq!(
        parse_canonical_integer("9007199254740991"),
        Ok(9_007_199_254_740_991)
    );
    for (lexeme, fault) in [
        ("01", IntegerFault::LeadingZero),
        ("00", IntegerFault::LeadingZero),
        ("1.0", IntegerFault::Fraction),
        ("1e3", IntegerFault::Exponent),
        ("1E3", IntegerFault::Exponent),
        ("+1", IntegerFault::Sign),
        ("-1", IntegerFault::Sign),
        ("", IntegerFault::Empty),
        (" 1", IntegerFault::NotDecimal),
        ("0x10", IntegerFault::NotDecimal),
        ("0", IntegerFault::OutOfRange),
        ("9007199254740992", IntegerFault::OutOfRange),
        ("99999999999999999999999", IntegerFault::OutOfRange),
    ] {
        assert_eq!(
            parse_canonical_integer(lexeme),
            Err(ConstantError::Integer {
                lexeme: lexeme.to_owned(),
                fault
            }),
            "{lexeme:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// CarrierConstants (§4.4 guarantee 1, §11 domains)
// ---------------------------------------------------------------------------

#[test]
fn constant_names_are_the_shipped_required_list() {
    let required: Vec<String> = g1()["required"]
        .as_array()
        .expect("required")
        .iter()
        .map(|v| v.as_str().expect("name").to_owned())
        .collect();
    assert_eq!(required, CONSTANT_NAMES);
    assert_eq!(g1()["roleURI"].as_str(), Some(CARRIER_ROLE));
}

#[test]
fn shipped_g1_declaration_reads_with_exact_values_and_round_trips() {
    let declared = g1_constants();
    let constants = CarrierConstants::from_declared(&declared).expect("valid");
    assert_eq!(constants.orphan_horizon_ms(), 90 * 86_400_000);
    assert_eq!(constants.give_up_horizon_ms(), 30 * 86_400_000);
    assert_eq!(constants.challenge_lifetime_ms(), 60_000);
    assert_eq!(constants.queue_floor_bytes(), 65_536);
    assert_eq!(constants.max_queue_bytes(), 1_048_576);
    assert_eq!(constants.max_binding_tombstones(), 1_000);
    assert_eq!(constants.status_horizon_ms(), 30_000);
    // The status-horizon the behaviour vector plans with.
    assert_eq!(
        Some(constants.status_horizon_ms()),
        g1()["behaviour"]["statusHorizon"]["declaredMs"].as_u64()
    );
    assert_eq!(jcs_of(&constants.to_declared()), jcs_of(&declared));
    assert_eq!(
        constants
            .get("give-up-horizon")
            .map(|c| (c.lexeme(), c.value())),
        Some(("P30D", 30 * 86_400_000))
    );
    assert_eq!(constants.get("ack-delay"), None);
    assert_eq!(CarrierConstants::from_lexemes(&VALID), Ok(constants));
}

fn with(name: &str, lexeme: &'static str) -> CarrierConstantLexemes<'static> {
    let mut l = VALID;
    match name {
        "orphan-horizon" => l.orphan_horizon = lexeme,
        "give-up-horizon" => l.give_up_horizon = lexeme,
        "challenge-lifetime" => l.challenge_lifetime = lexeme,
        "queue-floor" => l.queue_floor = lexeme,
        "max-queue-bytes" => l.max_queue_bytes = lexeme,
        "max-binding-tombstones" => l.max_binding_tombstones = lexeme,
        "status-horizon" => l.status_horizon = lexeme,
        other => panic!("{other}"),
    }
    l
}

#[test]
fn every_domain_bound_is_accepted_and_one_step_outside_rejected() {
    // (name, low, one step below, high, one step above, domain text)
    let cases = [
        (
            "orphan-horizon",
            "P7D",
            "P6DT23H59M59S",
            "P365D",
            "P365DT1S",
            "[P7D, P365D]",
        ),
        (
            "give-up-horizon",
            "P1D",
            "PT23H59M59S",
            "P90D",
            "P90DT1S",
            "[P1D, P90D]",
        ),
        (
            "challenge-lifetime",
            "PT5S",
            "PT4S",
            "PT5M",
            "PT5M1S",
            "[PT5S, PT5M]",
        ),
        (
            "status-horizon",
            "PT5S",
            "PT4S",
            "PT5M",
            "PT5M1S",
            "[PT5S, PT5M]",
        ),
        (
            "max-binding-tombstones",
            "1",
            "0",
            "9007199254740991",
            "9007199254740992",
            "[1, 2^53-1]",
        ),
    ];
    for (name, low, below, high, above, domain) in cases {
        for ok in [low, high] {
            let constants = CarrierConstants::from_lexemes(&with(name, ok))
                .unwrap_or_else(|e| panic!("{name} {ok}: {e}"));
            assert_eq!(constants.get(name).map(|c| c.lexeme()), Some(ok));
        }
        for bad in [below, above] {
            assert_eq!(
                CarrierConstants::from_lexemes(&with(name, bad)),
                Err(ConstantError::OutOfDomain {
                    name: CONSTANT_NAMES
                        .into_iter()
                        .find(|n| *n == name)
                        .expect("name"),
                    lexeme: bad.to_owned(),
                    domain: domain.to_owned(),
                }),
                "{name} {bad}"
            );
        }
    }

    // max-queue-bytes [1048576, 1073741824] (queue-floor kept at 65536).
    let mqb =
        |lexeme: &'static str| CarrierConstants::from_lexemes(&with("max-queue-bytes", lexeme));
    assert_eq!(mqb("1048576").map(|c| c.max_queue_bytes()), Ok(1_048_576));
    assert_eq!(
        mqb("1073741824").map(|c| c.max_queue_bytes()),
        Ok(1_073_741_824)
    );
    for bad in ["1048575", "1073741825"] {
        assert_eq!(
            mqb(bad),
            Err(ConstantError::OutOfDomain {
                name: "max-queue-bytes",
                lexeme: bad.to_owned(),
                domain: "[1048576, 1073741824]".to_owned(),
            })
        );
    }

    // queue-floor [65536, max-queue-bytes] with max-queue-bytes 1048576.
    let qf = |lexeme: &'static str| CarrierConstants::from_lexemes(&with("queue-floor", lexeme));
    assert_eq!(qf("65536").map(|c| c.queue_floor_bytes()), Ok(65_536));
    assert_eq!(qf("1048576").map(|c| c.queue_floor_bytes()), Ok(1_048_576));
    assert_eq!(
        qf("65535"),
        Err(ConstantError::OutOfDomain {
            name: "queue-floor",
            lexeme: "65535".to_owned(),
            domain: "[65536, max-queue-bytes] (max-queue-bytes is 1048576)".to_owned(),
        })
    );
    let above_max = qf("1048577");
    assert_eq!(
        above_max,
        Err(ConstantError::OutOfDomain {
            name: "queue-floor",
            lexeme: "1048577".to_owned(),
            domain: "[65536, max-queue-bytes] (max-queue-bytes is 1048576)".to_owned(),
        })
    );
    assert_eq!(
        above_max.map_err(|e| e.to_string()),
        Err(
            "queue-floor \"1048577\" is outside its domain [65536, max-queue-bytes] \
             (max-queue-bytes is 1048576)"
                .to_owned()
        )
    );
}

#[test]
fn error_text_names_constant_value_and_domain() {
    assert_eq!(
        CarrierConstants::from_lexemes(&with("give-up-horizon", "P91D")).map_err(|e| e.to_string()),
        Err("give-up-horizon \"P91D\" is outside its domain [P1D, P90D]".to_owned())
    );
    assert_eq!(
        CarrierConstants::from_lexemes(&with("status-horizon", "PT1.5S"))
            .map_err(|e| e.to_string()),
        Err(
            "status-horizon \"PT1.5S\" is not a duration in Access §7.3's grammar: \
             a fractional component"
                .to_owned()
        )
    );
    assert_eq!(
        CarrierConstants::from_lexemes(&with("max-binding-tombstones", "01"))
            .map_err(|e| e.to_string()),
        Err(
            "max-binding-tombstones \"01\" is not a canonical decimal integer: a leading zero"
                .to_owned()
        )
    );
}

#[test]
fn non_canonical_integer_constants_reject_on_the_received_bytes() {
    for name in ["queue-floor", "max-queue-bytes", "max-binding-tombstones"] {
        for (lexeme, fault) in [
            ("01", IntegerFault::LeadingZero),
            ("1.0", IntegerFault::Fraction),
            ("1e3", IntegerFault::Exponent),
            ("+1", IntegerFault::Sign),
            ("", IntegerFault::Empty),
            ("1048576.0", IntegerFault::Fraction),
            ("065536", IntegerFault::LeadingZero),
        ] {
            let result = CarrierConstants::from_lexemes(&with(name, lexeme));
            assert!(
                matches!(
                    &result,
                    Err(ConstantError::ConstantInteger { name: n, lexeme: l, fault: f })
                        if *n == name && l == lexeme && *f == fault
                ),
                "{name} {lexeme:?}: {result:?}"
            );
        }
    }
    // Canonical but above 2^53-1: a domain error.
    assert_eq!(
        CarrierConstants::from_lexemes(&with("max-binding-tombstones", "9007199254740992")),
        Err(ConstantError::OutOfDomain {
            name: "max-binding-tombstones",
            lexeme: "9007199254740992".to_owned(),
            domain: "[1, 2^53-1]".to_owned(),
        })
    );
}

#[test]
fn duration_constants_reject_outside_the_grammar_never_rounded() {
    // PT5.0S would "round" to PT5S, inside the domain; it is rejected.
    assert_eq!(
        CarrierConstants::from_lexemes(&with("challenge-lifetime", "PT5.0S")),
        Err(ConstantError::ConstantDuration {
            name: "challenge-lifetime",
            lexeme: "PT5.0S".to_owned(),
            fault: DurationFault::Fraction,
        })
    );
    assert_eq!(
        CarrierConstants::from_lexemes(&with("orphan-horizon", "P2W")),
        Err(ConstantError::ConstantDuration {
            name: "orphan-horizon",
            lexeme: "P2W".to_owned(),
            fault: DurationFault::Weeks,
        })
    );
    // A duration where an integer belongs and vice versa.
    assert!(matches!(
        CarrierConstants::from_lexemes(&with("queue-floor", "PT1S")),
        Err(ConstantError::ConstantInteger {
            name: "queue-floor",
            fault: IntegerFault::NotDecimal,
            ..
        })
    ));
    assert!(matches!(
        CarrierConstants::from_lexemes(&with("status-horizon", "30")),
        Err(ConstantError::ConstantDuration {
            name: "status-horizon",
            fault: DurationFault::MissingP,
            ..
        })
    ));
}

#[test]
fn orphan_horizon_below_give_up_horizon_is_accepted() {
    // Not a §11 rule; §5a.9's fixed wind-up deadline makes it unnecessary.
    let mut lexemes = VALID;
    lexemes.orphan_horizon = "P7D";
    lexemes.give_up_horizon = "P90D";
    let constants = CarrierConstants::from_lexemes(&lexemes).expect("conformant declaration");
    assert!(constants.orphan_horizon_ms() < constants.give_up_horizon_ms());
}

#[test]
fn declared_object_rules() {
    // Each of the seven missing.
    for name in CONSTANT_NAMES {
        let mut declared = g1_constants();
        declared.remove(name);
        assert_eq!(
            CarrierConstants::from_declared(&declared),
            Err(ConstantError::Missing { name }),
            "{name}"
        );
    }
    // Unknown name (also one another role admits).
    for unknown in ["ack-delay", "max-queue-byte"] {
        let mut declared = g1_constants();
        declared.insert(unknown, "PT1S");
        assert_eq!(
            CarrierConstants::from_declared(&declared),
            Err(ConstantError::Unknown {
                name: unknown.to_owned()
            })
        );
    }
    // Non-string values.
    let mut declared = g1_constants();
    declared.insert("queue-floor", json::Number::from_u64(65_536));
    assert_eq!(
        CarrierConstants::from_declared(&declared),
        Err(ConstantError::NotAString {
            name: "queue-floor",
            kind: "number"
        })
    );
    let mut declared = g1_constants();
    declared.insert("status-horizon", Value::Null);
    assert_eq!(
        CarrierConstants::from_declared(&declared).map_err(|e| e.to_string()),
        Err("status-horizon is a JSON null, not a value string".to_owned())
    );
}

// ---------------------------------------------------------------------------
// eddsa-jcs-2022: the W3C vc-di-eddsa vector (REC Appendix B.3)
// ---------------------------------------------------------------------------

fn w3c_key() -> SigningKey {
    let pair = w3c_object("key-pair.json");
    let secret = pair
        .get("secretKeyMultibase")
        .and_then(Value::as_str)
        .expect("secretKeyMultibase");
    let bytes = encoding::multibase_decode(secret).expect("multibase");
    // Multikey ed25519-priv: 0x80 0x26 ‖ 32 bytes.
    assert_eq!(bytes.len(), 34);
    assert_eq!(bytes[..2], [0x80, 0x26]);
    let seed: [u8; 32] = bytes[2..].try_into().expect("32 bytes");
    let key = SigningKey::from_bytes(&seed);
    let public = pair
        .get("publicKeyMultibase")
        .and_then(Value::as_str)
        .expect("publicKeyMultibase");
    assert_eq!(
        DidKey::from_verifying_key(&key.verifying_key()).multikey(),
        public
    );
    key
}

#[test]
fn w3c_vector_intermediate_values_are_reproduced() {
    let unsecured = w3c_object("unsecured.json");
    assert_eq!(
        jcs_of(&unsecured),
        w3c_file("canonical-document.txt"),
        "canonical document"
    );
    assert_eq!(
        hex(&encoding::sha256(&jcs_of(&unsecured))),
        w3c_text("document-hash.hex")
    );

    let options = w3c_object("proof-options.json");
    let method = options
        .get("verificationMethod")
        .and_then(Value::as_str)
        .expect("verificationMethod");
    let created = options
        .get("created")
        .and_then(Value::as_str)
        .expect("created");
    let config = eddsa_jcs_2022_proof_config(&unsecured, created, method);
    // The document has @context, so the proof configuration carries it.
    assert_eq!(config, options);
    assert_eq!(
        jcs_of(&config),
        w3c_file("canonical-proof-options.txt"),
        "canonical proof options"
    );
    assert_eq!(
        hex(&encoding::sha256(&jcs_of(&config))),
        w3c_text("proof-options-hash.hex")
    );
    let hash_data = eddsa_jcs_2022_hash_data(&config, &unsecured).expect("hash data");
    assert_eq!(hex(&hash_data), w3c_text("combined-hash.hex"));
}

#[test]
fn w3c_vector_signature_and_signed_document_are_reproduced() {
    let key = w3c_key();
    let unsecured = w3c_object("unsecured.json");
    let secured = eddsa_jcs_2022_sign(&unsecured, "2023-02-24T23:36:38Z", &key).expect("signs");
    let proof_value = secured
        .get("proof")
        .and_then(Value::as_object)
        .and_then(|p| p.get("proofValue"))
        .and_then(Value::as_str)
        .expect("proofValue");
    assert_eq!(proof_value, w3c_text("proof-value.txt"));
    assert_eq!(
        hex(&encoding::signature_from_z(proof_value).expect("64 bytes")),
        w3c_text("signature.hex")
    );
    let published = w3c_object("signed.json");
    assert_eq!(secured, published, "member for member, in published order");
    assert_eq!(
        eddsa_jcs_2022_sign(&published, "2023-02-24T23:36:38Z", &key),
        Err(CryptosuiteError::AlreadySigned)
    );
}

#[test]
fn w3c_signed_document_verifies_and_context_is_checked() {
    let published = w3c_object("signed.json");
    let signer = eddsa_jcs_2022_verify(&published).expect("verifies");
    assert_eq!(
        signer.multikey(),
        "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"
    );

    // A document @context the proof's is not a prefix of.
    let mut reordered = published.clone();
    reordered.insert(
        "@context",
        Value::Array(vec![
            "https://www.w3.org/ns/credentials/examples/v2".into(),
            "https://www.w3.org/ns/credentials/v2".into(),
        ]),
    );
    assert_eq!(
        eddsa_jcs_2022_verify(&reordered),
        Err(CryptosuiteError::Context)
    );
    // A longer document @context that starts with the proof's: the proof's
    // stands in the hash (W3C vc-di-eddsa §3.3.2 step 4), so it verifies.
    let mut extended = published.clone();
    extended.insert(
        "@context",
        Value::Array(vec![
            "https://www.w3.org/ns/credentials/v2".into(),
            "https://www.w3.org/ns/credentials/examples/v2".into(),
            "https://example.org/extra/v1".into(),
        ]),
    );
    assert_eq!(eddsa_jcs_2022_verify(&extended), Ok(signer));
    // The generic proof form is closed too: nothing is silently ignored.
    let with_proof = |edit: &dyn Fn(&mut Object)| {
        let mut document = published.clone();
        let mut proof = document
            .get("proof")
            .and_then(Value::as_object)
            .cloned()
            .expect("proof");
        edit(&mut proof);
        document.insert("proof", proof);
        eddsa_jcs_2022_verify(&document)
    };
    assert_eq!(
        with_proof(&|p| {
            p.insert("expires", "2030-01-01T00:00:00Z");
        }),
        Err(CryptosuiteError::UnknownProofMember {
            member: "expires".to_owned()
        })
    );
    assert_eq!(
        with_proof(&|p| {
            p.insert("cryptosuite", "eddsa-rdfc-2022");
        }),
        Err(CryptosuiteError::ProofConstant {
            member: "cryptosuite",
            found: "eddsa-rdfc-2022".to_owned(),
            expected: "eddsa-jcs-2022"
        })
    );
    assert_eq!(
        with_proof(&|p| {
            p.insert(
                "verificationMethod",
                "https://vc.example/issuers/5678#z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2",
            );
        }),
        Err(CryptosuiteError::VerificationMethod {
            value:
                "https://vc.example/issuers/5678#z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"
                    .to_owned()
        })
    );
    assert!(matches!(
        with_proof(&|p| {
            p.insert(
                "proofValue",
                "z2HnFSSPPBzR36zdDgK8PbEHeXbR56YF24jwMpt3R1eHXQzJD",
            );
        }),
        Err(CryptosuiteError::ProofValue(_))
    ));
    assert_eq!(
        with_proof(&|p| {
            p.insert("created", "2023-02-24T23:36:39Z");
        }),
        Err(CryptosuiteError::BadSignature)
    );
    let mut array_proof = published.clone();
    array_proof.insert("proof", Value::Array(vec![]));
    assert_eq!(
        eddsa_jcs_2022_verify(&array_proof),
        Err(CryptosuiteError::NoProof)
    );
    let mut without = published;
    without.remove("@context");
    assert_eq!(
        eddsa_jcs_2022_verify(&without),
        Err(CryptosuiteError::Context)
    );
}

// ---------------------------------------------------------------------------
// eddsa-jcs-2022: the delivery-ack.json signature-form vector
// ---------------------------------------------------------------------------

fn ack_signature_form_document() -> Object {
    let vector = shipped("delivery-ack.json");
    let case = vector["negatives"]
        .as_array()
        .expect("negatives")
        .iter()
        .find(|c| c["name"] == "signature-form-for-dv-payload")
        .expect("case signature-form-for-dv-payload")
        .clone();
    to_object(&case["document"])
}

#[test]
fn delivery_ack_signature_form_verifies_under_its_issuer() {
    let document = ack_signature_form_document();
    let signer = eddsa_jcs_2022_verify(&document).expect("validly signed");
    let issuer = document
        .get("issuer")
        .and_then(Value::as_str)
        .expect("issuer");
    assert_eq!(signer.to_did_key(), issuer);
    // It is a delivery-ack, never a declaration.
    assert_eq!(
        parse_declaration(&jcs_of(&document)).map(|_| ()),
        Err(DeclarationParseError::NotADeclaration {
            found: "https://real-life.org/trust-tasks/delivery-ack/0.1".to_owned()
        })
    );
}

/// Every single-character substitution of the document's JCS bytes —
/// document members and proof alike — fails: either the bytes stop being
/// JSON of the right shape, or the signature no longer verifies.
#[test]
fn delivery_ack_any_single_character_change_fails() {
    let bytes = jcs_of(&ack_signature_form_document());
    let mut checked = 0;
    for i in 0..bytes.len() {
        for replacement in [b'A', b'1'] {
            if bytes[i] == replacement {
                continue;
            }
            let mut mutated = bytes.clone();
            mutated[i] = replacement;
            let verdict = json::parse(&mutated)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .map(|o| eddsa_jcs_2022_verify(&o));
            assert!(
                !matches!(verdict, Some(Ok(_))),
                "byte {i} -> {:?} still verifies",
                replacement as char
            );
            checked += 1;
        }
    }
    assert!(checked > 2 * 600, "{checked} mutations checked");
}

// ---------------------------------------------------------------------------
// registry-declaration/0.1: round trip, g1 rejects, parse ≠ verify ≠ accept
// ---------------------------------------------------------------------------

#[test]
fn carrier_declaration_round_trip() {
    let constants = CarrierConstants::from_lexemes(&VALID).expect("valid");
    let bytes = sign_carrier_declaration(&carrier_key(), &counterpart(), &HEADER, &constants)
        .expect("signs");
    // The wire form is JCS.
    assert_eq!(
        jcs::canonicalize(&json::parse(&bytes).expect("json")).expect("jcs"),
        bytes
    );
    let parsed = parse_declaration(&bytes).expect("parses");
    let issuer = DidKey::from_verifying_key(&carrier_key().verifying_key());
    assert_eq!(parsed.issuer(), &issuer);
    assert_eq!(parsed.recipient(), &counterpart());
    assert_eq!(parsed.id(), HEADER.id);
    assert_eq!(parsed.thread_id(), HEADER.thread_id);
    assert_eq!(parsed.issued_at(), HEADER.issued_at);
    assert_eq!(parsed.role(), CARRIER_ROLE);
    assert_eq!(parsed.revision(), 1);
    let verified = verify_declaration(parsed).expect("verifies");
    let accepted = accept_carrier_declaration(&verified).expect("accepted");
    assert_eq!(accepted.constants(), &constants);
    assert_eq!(accepted.issuer(), &issuer);
    assert_eq!(accepted.revision(), 1);
    let document = document_of(&bytes);
    assert_eq!(
        accepted.payload_jcs(),
        jcs::canonicalize(document.get("payload").expect("payload")).expect("jcs")
    );
    // Same inputs, same bytes (Ed25519 is deterministic, no clock, no RNG).
    assert_eq!(
        sign_carrier_declaration(&carrier_key(), &counterpart(), &HEADER, &constants),
        Ok(bytes)
    );
}

#[test]
fn shipped_g1_rejects_reject_with_the_exact_error() {
    let g1 = g1();
    let rejects = g1["rejects"].as_array().expect("rejects");
    assert_eq!(rejects.len(), 3);
    for case in rejects {
        let (role, constants, expected) = if let Some(missing) = case["missing"].as_str() {
            let mut constants = g1_constants();
            assert!(constants.remove(missing).is_some(), "{missing}");
            let name = CONSTANT_NAMES
                .into_iter()
                .find(|n| *n == missing)
                .expect("a carrier constant");
            (
                CARRIER_ROLE.to_owned(),
                constants,
                CarrierDeclarationError::Constants(ConstantError::Missing { name }),
            )
        } else {
            let role = case["wrongRole"].as_str().expect("missing or wrongRole");
            (
                role.to_owned(),
                g1_constants(),
                CarrierDeclarationError::NotCarrierRole {
                    role: role.to_owned(),
                },
            )
        };
        // Well-formed and validly signed: the rejection is the carrier
        // role's, at step 3.
        let verified = parse_verify(&signed(&role, &constants, 1));
        assert_eq!(
            accept_carrier_declaration(&verified),
            Err(expected),
            "{case}"
        );
    }
}

#[test]
fn carrier_role_is_not_a_document_type() {
    assert!(!is_known_document_type(CARRIER_ROLE));
    for t in OWN_DOCUMENT_TYPES {
        assert!(is_known_document_type(t), "{t}");
    }
    assert!(is_known_document_type(REGISTRY_DECLARATION_TYPE));
    assert!(!is_known_document_type(
        "https://real-life.org/trust-tasks/seal-vector-sample/0.1"
    ));
    assert!(!is_known_document_type(
        "https://real-life.org/trust-tasks/registry-declaration/0.2"
    ));
    // A carrier-role URI as the document type never parses as a declaration.
    let mut document = document_of(&signed(CARRIER_ROLE, &g1_constants(), 1));
    document.insert("type", CARRIER_ROLE);
    assert_eq!(
        parse_declaration(&reserialize(&document)).map(|_| ()),
        Err(DeclarationParseError::NotADeclaration {
            found: CARRIER_ROLE.to_owned()
        })
    );
}

#[test]
fn verify_requires_the_issuer_and_an_intact_signature() {
    let bytes = signed(CARRIER_ROLE, &g1_constants(), 1);
    let carrier = DidKey::from_verifying_key(&carrier_key().verifying_key());

    // Foreign-signed: the proof is valid but by someone other than `issuer`.
    let mut document = document_of(&bytes);
    document.insert("issuer", counterpart().to_did_key());
    assert_eq!(
        verify_declaration(parse_declaration(&reserialize(&document)).expect("parses")),
        Err(DeclarationVerifyError::ForeignSigner {
            issuer: counterpart(),
            signer: carrier,
        })
    );

    // A constant changed after signing.
    let mut document = document_of(&bytes);
    let mut payload = document
        .get("payload")
        .and_then(Value::as_object)
        .cloned()
        .expect("payload");
    let mut declaration = payload
        .get("declaration")
        .and_then(Value::as_object)
        .cloned()
        .expect("declaration");
    let mut constants = g1_constants();
    constants.insert("give-up-horizon", "P7D");
    declaration.insert("constants", constants);
    payload.insert("declaration", declaration);
    document.insert("payload", payload);
    assert_eq!(
        verify_declaration(parse_declaration(&reserialize(&document)).expect("parses")),
        Err(DeclarationVerifyError::Signature(
            CryptosuiteError::BadSignature
        ))
    );

    // Unsigned: refused at parse (proof REQUIRED on this type).
    let mut document = document_of(&bytes);
    document.remove("proof");
    assert_eq!(
        parse_declaration(&reserialize(&document)).map(|_| ()),
        Err(DeclarationParseError::MissingMember {
            at: "document",
            member: "proof"
        })
    );
}

#[test]
fn parse_enforces_the_closed_profile() {
    let bytes = signed(CARRIER_ROLE, &g1_constants(), 1);
    let reject = |edit: &dyn Fn(&mut Object)| {
        let mut document = document_of(&bytes);
        edit(&mut document);
        parse_declaration(&reserialize(&document)).map(|_| ())
    };
    let proof_of = |d: &Object| {
        d.get("proof")
            .and_then(Value::as_object)
            .cloned()
            .expect("proof")
    };

    assert_eq!(
        reject(&|d| {
            d.insert("expiresAt", "2027-01-01T00:00:00Z");
        }),
        Err(DeclarationParseError::UnknownMember {
            at: "document",
            member: "expiresAt".to_owned()
        })
    );
    assert_eq!(
        reject(&|d| {
            let mut proof = proof_of(d);
            proof.insert("@context", "https://www.w3.org/ns/credentials/v2");
            d.insert("proof", proof);
        }),
        Err(DeclarationParseError::UnknownMember {
            at: "proof",
            member: "@context".to_owned()
        })
    );
    assert_eq!(
        reject(&|d| {
            let mut proof = proof_of(d);
            proof.insert("proofPurpose", "authentication");
            d.insert("proof", proof);
        }),
        Err(DeclarationParseError::Proof(
            CryptosuiteError::ProofConstant {
                member: "proofPurpose",
                found: "authentication".to_owned(),
                expected: "assertionMethod"
            }
        ))
    );
    assert_eq!(
        reject(&|d| {
            d.insert("id", "0B6F4C1E-2D3A-4B5C-8D7E-000000000001");
        }),
        Err(DeclarationParseError::Uuid {
            member: "id",
            value: "0B6F4C1E-2D3A-4B5C-8D7E-000000000001".to_owned()
        })
    );
    assert_eq!(
        reject(&|d| {
            d.insert("issuedAt", "2026-11-29T12:00:00+00:00");
        }),
        Err(DeclarationParseError::Timestamp {
            member: "issuedAt",
            value: "2026-11-29T12:00:00+00:00".to_owned()
        })
    );
    assert!(matches!(
        reject(&|d| {
            d.insert(
                "recipient",
                "did:key:z6Mkzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            );
        }),
        Err(DeclarationParseError::DidKey {
            member: "recipient",
            ..
        })
    ));
    // A verification method whose two halves differ.
    let other = counterpart().multikey();
    let carrier = DidKey::from_verifying_key(&carrier_key().verifying_key());
    let split = format!("{}#{other}", carrier.to_did_key());
    assert_eq!(
        reject(&|d| {
            let mut proof = proof_of(d);
            proof.insert("verificationMethod", split.as_str());
            d.insert("proof", proof);
        }),
        Err(DeclarationParseError::Proof(
            CryptosuiteError::VerificationMethod {
                value: split.clone()
            }
        ))
    );
    // An optional `ceremony` object passes through (§3); a non-object does not.
    assert_eq!(
        reject(&|d| {
            d.insert("ceremony", Object::new());
        }),
        Ok(())
    );
    assert_eq!(
        reject(&|d| {
            d.insert("ceremony", "x");
        }),
        Err(DeclarationParseError::NotAnObject { at: "ceremony" })
    );
}

#[test]
fn parse_enforces_the_payload_schema() {
    let base = g1_constants();
    let build = |role: &str, revision: &str, constants: Value| {
        // Assemble the payload by hand: the builder would refuse these.
        let mut document = document_of(&signed(CARRIER_ROLE, &base, 1));
        let mut declaration = Object::new();
        declaration.insert("role", role);
        declaration.insert("revision", revision);
        declaration.insert("constants", constants);
        let mut payload = Object::new();
        payload.insert("declaration", declaration);
        document.insert("payload", payload);
        parse_declaration(&reserialize(&document)).map(|_| ())
    };
    assert_eq!(
        build(CARRIER_ROLE, "01", Value::Object(base.clone())),
        Err(DeclarationParseError::Revision {
            value: "01".to_owned()
        })
    );
    assert_eq!(
        build(CARRIER_ROLE, "0", Value::Object(base.clone())),
        Err(DeclarationParseError::Revision {
            value: "0".to_owned()
        })
    );
    assert_eq!(
        build(
            "https://real-life.org/trust-tasks/Delivery-Carrier/0.1",
            "1",
            Value::Object(base.clone())
        ),
        Err(DeclarationParseError::Role {
            value: "https://real-life.org/trust-tasks/Delivery-Carrier/0.1".to_owned()
        })
    );
    assert_eq!(
        build(CARRIER_ROLE, "1", Value::Object(Object::new())),
        Err(DeclarationParseError::ConstantCount { count: 0 })
    );
    let mut numeric = base.clone();
    numeric.insert("queue-floor", json::Number::from_u64(65_536));
    assert_eq!(
        build(CARRIER_ROLE, "1", Value::Object(numeric)),
        Err(DeclarationParseError::ConstantValue {
            name: "queue-floor".to_owned()
        })
    );
    let mut upper = base.clone();
    upper.insert("Queue-Floor", "65536");
    assert_eq!(
        build(CARRIER_ROLE, "1", Value::Object(upper)),
        Err(DeclarationParseError::ConstantName {
            name: "Queue-Floor".to_owned()
        })
    );
    assert_eq!(
        build(CARRIER_ROLE, "1", Value::String("x".to_owned())),
        Err(DeclarationParseError::NotAnObject { at: "constants" })
    );
}

#[test]
fn builder_refuses_what_the_parser_would_refuse() {
    let constants = CarrierConstants::from_lexemes(&VALID).expect("valid");
    let build = |header: DeclarationHeader<'_>| {
        sign_carrier_declaration(&carrier_key(), &counterpart(), &header, &constants)
    };
    assert_eq!(
        build(DeclarationHeader {
            revision: 0,
            ..HEADER
        }),
        Err(DeclarationBuildError::WouldNotParse(
            DeclarationParseError::Revision {
                value: "0".to_owned()
            }
        ))
    );
    assert_eq!(
        build(DeclarationHeader {
            thread_id: "not-a-uuid",
            ..HEADER
        }),
        Err(DeclarationBuildError::WouldNotParse(
            DeclarationParseError::Uuid {
                member: "threadId",
                value: "not-a-uuid".to_owned()
            }
        ))
    );
    assert_eq!(
        build(DeclarationHeader {
            created: "yesterday",
            ..HEADER
        }),
        Err(DeclarationBuildError::WouldNotParse(
            DeclarationParseError::Timestamp {
                member: "created",
                value: "yesterday".to_owned()
            }
        ))
    );
    assert_eq!(
        build(DeclarationHeader {
            revision: 999_999_999_999_999_999,
            ..HEADER
        })
        .map(|b| parse_declaration(&b).map(|p| p.revision())),
        Ok(Ok(999_999_999_999_999_999))
    );
}

// ---------------------------------------------------------------------------
// The generic revision rule (§4.4)
// ---------------------------------------------------------------------------

#[test]
fn revision_rule_outcomes() {
    let payload = |constants: &Object, revision: u64| {
        let verified = parse_verify(&signed(CARRIER_ROLE, constants, revision));
        let accepted = accept_carrier_declaration(&verified).expect("accepted");
        (accepted.revision(), accepted.payload_jcs().to_vec())
    };
    let base = g1_constants();
    let mut changed = g1_constants();
    changed.insert("give-up-horizon", "P60D");
    let (r1, p1) = payload(&base, 1);
    let (_, p1_again) = payload(&base, 1);
    let (_, p1_other) = payload(&changed, 1);
    let (r2, p2) = payload(&changed, 2);
    assert_eq!(p1, p1_again);
    assert_ne!(p1, p1_other);

    let held = Some((r1, p1.as_slice()));
    assert_eq!(revision_rule(None, (r1, &p1)), RevisionOutcome::Install);
    assert_eq!(revision_rule(held, (r2, &p2)), RevisionOutcome::Supersedes);
    assert_eq!(
        revision_rule(held, (r1, &p1_again)),
        RevisionOutcome::Idempotent
    );
    assert_eq!(
        revision_rule(held, (r1, &p1_other)),
        RevisionOutcome::Equivocation
    );
    assert_eq!(
        revision_rule(Some((r2, p2.as_slice())), (r1, &p1)),
        RevisionOutcome::Rollback
    );

    let all = [
        RevisionOutcome::Install,
        RevisionOutcome::Supersedes,
        RevisionOutcome::Idempotent,
        RevisionOutcome::Equivocation,
        RevisionOutcome::Rollback,
    ];
    let records: Vec<bool> = all.iter().map(|o| o.records()).collect();
    let rejects: Vec<bool> = all.iter().map(|o| o.is_rejection()).collect();
    assert_eq!(records, [true, true, false, false, false]);
    assert_eq!(rejects, [false, false, false, true, true]);
}
