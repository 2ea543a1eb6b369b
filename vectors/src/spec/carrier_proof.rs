//! `carrier-proof.json` (§5a.3, §4.4, §11): the proof artifact in all four
//! purposes, its transplant negatives, the decoded-encoding surface, the
//! `generation` spelling, the duration grammar and the declaration rejects.

use crate::{Report, Section, SpecVectors, array_at, expect_eq, hex32, missing, str_at};
use ed25519_dalek::{Signature, SigningKey, Verifier as _};
use rltp_proofs::encoding::{base58btc_decode, signature_from_z};
use rltp_proofs::identity::CarrierId;
use rltp_proofs::json::from_serde;
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::{self, Malformed, Purpose, UnsignedProof};
use rltp_proofs::{constants, jcs};

const FILE: &str = "carrier-proof.json";
const SECTIONS: [&str; 8] = [
    "registration",
    "collection",
    "conclusion",
    "negatives",
    "encodingAcceptanceSurface",
    "generationSpelling",
    "durationGrammar",
    "carrierGuarantees.g1_declaration",
];

/// Runs the sections of `carrier-proof.json` that `rltp-proofs` answers.
pub fn run(vectors: &SpecVectors, report: &mut Report) {
    let (_, v) = match vectors.load(FILE) {
        Ok(loaded) => loaded,
        Err(why) => return missing(report, FILE, &SECTIONS, &why),
    };
    for (name, pointer, purpose) in [
        ("registration", "/registration", Purpose::Register),
        ("collection", "/collection", Purpose::Collect),
        ("conclusion", "/conclusion", Purpose::Conclude),
    ] {
        let mut s = Section::new(FILE, name);
        signed_form(&v, pointer, purpose, &mut s);
        report.sections.push(s);
    }
    let mut s = Section::new(FILE, "negatives");
    negatives(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "encodingAcceptanceSurface");
    encoding_surface(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "generationSpelling");
    generation_spelling(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "durationGrammar");
    duration_grammar(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "carrierGuarantees.g1_declaration");
    crate::spec::declaration::g1_declaration(&v, &mut s);
    report.sections.push(s);
}

/// The wire bytes of a shipped object with its shipped `sig`.
fn wire_bytes(v: &serde_json::Value, pointer: &str) -> Result<Vec<u8>, String> {
    let mut object = v
        .pointer(&format!("{pointer}/object"))
        .cloned()
        .ok_or_else(|| format!("no {pointer}/object"))?;
    let sig = str_at(v, &format!("{pointer}/sig"))?;
    object
        .as_object_mut()
        .ok_or("object is not an object")?
        .insert("sig".into(), sig.into());
    jcs::canonicalize(&from_serde(&object)).map_err(|e| e.to_string())
}

fn principal_key(v: &serde_json::Value) -> Result<SigningKey, String> {
    Ok(SigningKey::from_bytes(&hex32(str_at(
        v,
        "/keys/principalSeed",
    )?)?))
}

fn signed_form(v: &serde_json::Value, pointer: &str, purpose: Purpose, s: &mut Section) {
    let object = v.pointer(&format!("{pointer}/object"));
    s.case(
        "JCS of the object equals the shipped jcs",
        object
            .ok_or_else(|| "no object".to_owned())
            .and_then(|o| jcs::canonicalize_string(&from_serde(o)).map_err(|e| e.to_string()))
            .and_then(|bytes| {
                expect_eq("jcs", bytes.as_str(), str_at(v, &format!("{pointer}/jcs"))?)
            }),
    );
    let carrier = str_at(v, &format!("{pointer}/object/carrier"))
        .unwrap_or_default()
        .to_owned();
    let parsed = wire_bytes(v, pointer)
        .and_then(|bytes| proof::parse(&bytes, &carrier).map_err(|e| e.to_string()));
    s.case(
        "r1 parse accepts, purpose and signing input exact",
        parsed.clone().and_then(|p| {
            expect_eq("purpose", p.purpose(), purpose)?;
            expect_eq(
                "signing input",
                p.signing_input(),
                str_at(v, &format!("{pointer}/jcs"))?.as_bytes(),
            )?;
            expect_eq(
                "generation present",
                p.generation().is_some(),
                purpose.changes_succession(),
            )?;
            expect_eq(
                "addressChallenge present",
                p.address_challenge().is_some(),
                purpose.changes_succession(),
            )
        }),
    );
    s.case(
        "shipped sig verifies (Ed25519 verify_strict under principal)",
        parsed.and_then(|p| p.verify().map_err(|e| e.to_string())),
    );
    s.case(
        "principal is the did:key of keys.principalSeed",
        principal_key(v).and_then(|key| {
            expect_eq(
                "principal",
                DidKey::from_verifying_key(&key.verifying_key()).to_did_key(),
                str_at(v, "/keys/principal")?.to_owned(),
            )
        }),
    );
    s.case(
        "signing reproduces the shipped sig byte for byte",
        (|| {
            let key = principal_key(v)?;
            let o = |f: &str| str_at(v, &format!("{pointer}/object/{f}"));
            let carrier =
                CarrierId::from_bytes(o("carrier")?.as_bytes()).map_err(|e| e.to_string())?;
            let rkid = Rkid::parse(o("rkid")?).map_err(|e| e.to_string())?;
            let pc = rltp_proofs::encoding::b64url_decode_array(o("principalChallenge")?)
                .map_err(|e| e.to_string())?;
            let unsigned = if purpose.changes_succession() {
                let ac = rltp_proofs::encoding::b64url_decode_array(o("addressChallenge")?)
                    .map_err(|e| e.to_string())?;
                let generation = v
                    .pointer(&format!("{pointer}/object/generation"))
                    .and_then(serde_json::Value::as_u64)
                    .ok_or("no generation")?;
                UnsignedProof::registration(purpose, carrier, rkid, generation, pc, ac)
            } else {
                UnsignedProof::session(purpose, carrier, rkid, pc)
            }
            .map_err(|e| e.to_string())?;
            let signed = unsigned.sign(&key).map_err(|e| e.to_string())?;
            expect_eq("wire bytes", signed, wire_bytes(v, pointer)?)
        })(),
    );
}

fn negatives(v: &serde_json::Value, s: &mut Section) {
    let shipped_sig = str_at(v, "/registration/sig").and_then(|z| {
        signature_from_z(z)
            .map(|b| Signature::from_bytes(&b))
            .map_err(|e| e.to_string())
    });
    let cases = match array_at(v, "/negatives/cases") {
        Ok(cases) => cases,
        Err(why) => return s.case("cases", Err(why)),
    };
    for case in cases {
        let name = case["case"].as_str().unwrap_or("?").to_owned();
        s.case(
            name,
            (|| {
                let object = case.get("object").ok_or("no object")?;
                let bytes =
                    jcs::canonicalize_string(&from_serde(object)).map_err(|e| e.to_string())?;
                expect_eq("jcs", bytes.as_str(), str_at(case, "/jcs")?)?;
                if bytes == str_at(v, "/registration/jcs")? {
                    return Err("negative has the registration's bytes".into());
                }
                let principal =
                    DidKey::parse(str_at(object, "/principal")?).map_err(|e| e.to_string())?;
                let key = principal.verifying_key().map_err(|e| e.to_string())?;
                let sig = shipped_sig.clone()?;
                if key.verify(bytes.as_bytes(), &sig).is_ok() {
                    return Err(
                        "the shipped registration sig verifies over transplanted bytes".into(),
                    );
                }
                // Through the carrier: parse with the shipped sig attached, then
                // r1 refuses (foreign v) or r3 refuses (signature).
                let mut with_sig = object.clone();
                with_sig
                    .as_object_mut()
                    .ok_or("not an object")?
                    .insert("sig".into(), str_at(v, "/registration/sig")?.into());
                let wire = jcs::canonicalize(&from_serde(&with_sig)).map_err(|e| e.to_string())?;
                let carrier = str_at(object, "/carrier")?;
                match proof::parse(&wire, carrier) {
                    Err(Malformed::Version { .. }) if str_at(object, "/v")? != proof::PROOF_V => {
                        Ok(())
                    }
                    Err(e) => Err(format!("unexpected r1 refusal {e}")),
                    Ok(p) => match p.verify() {
                        Err(_) => Ok(()),
                        Ok(()) => Err("verified".into()),
                    },
                }
            })(),
        );
    }
}

fn encoding_surface(v: &serde_json::Value, s: &mut Section) {
    let cases = match array_at(v, "/encodingAcceptanceSurface/cases") {
        Ok(cases) => cases,
        Err(why) => return s.case("cases", Err(why)),
    };
    let carrier = str_at(v, "/registration/object/carrier")
        .unwrap_or_default()
        .to_owned();
    for case in cases {
        let field = case["field"].as_str().unwrap_or("?").to_owned();
        let value = case["value"].as_str().unwrap_or_default().to_owned();
        s.case(
            format!("{field} = {value}"),
            (|| {
                expect_eq(
                    "shipped verdict",
                    str_at(case, "/verdict")?,
                    Malformed::VERDICT,
                )?;
                let encoded = value.strip_prefix("did:key:").unwrap_or(&value);
                let decoded = base58btc_decode(encoded.strip_prefix('z').ok_or("no z prefix")?)
                    .map_err(|e| e.to_string())?;
                expect_eq(
                    "decoded length",
                    Some(decoded.len() as u64),
                    case["decodedByteLength"].as_u64(),
                )?;
                let prefix: String = decoded.iter().take(2).map(|b| format!("{b:02x}")).collect();
                expect_eq(
                    "decoded prefix",
                    prefix.as_str(),
                    str_at(case, "/decodedPrefixHex")?,
                )?;
                // The alias in place of the shipped field: refused at r1.
                let mut object = v
                    .pointer("/registration/object")
                    .cloned()
                    .ok_or("no object")?;
                let map = object.as_object_mut().ok_or("not an object")?;
                map.insert("sig".into(), str_at(v, "/registration/sig")?.into());
                map.insert(field.clone(), value.clone().into());
                let wire = jcs::canonicalize(&from_serde(&object)).map_err(|e| e.to_string())?;
                let refused = match (field.as_str(), proof::parse(&wire, &carrier)) {
                    ("principal", Err(Malformed::Principal { .. }))
                    | ("rkid", Err(Malformed::Rkid { .. }))
                    | ("sig", Err(Malformed::Sig { .. })) => true,
                    (_, other) => {
                        return Err(format!(
                            "expected refused(malformed) on {field}, got {other:?}"
                        ));
                    }
                };
                expect_eq("refused(malformed)", refused, true)
            })(),
        );
    }
    s.case(
        "positiveControl: the shipped proof decodes on all three fields",
        wire_bytes(v, "/registration").and_then(|wire| {
            let p = proof::parse(&wire, str_at(v, "/registration/object/carrier")?)
                .map_err(|e| e.to_string())?;
            expect_eq(
                "principal",
                p.principal().to_did_key(),
                str_at(v, "/registration/object/principal")?.to_owned(),
            )?;
            expect_eq(
                "rkid",
                p.rkid().to_multikey(),
                str_at(v, "/registration/object/rkid")?.to_owned(),
            )?;
            expect_eq("sig bytes", p.signature().len(), 64)
        }),
    );
}

/// Splices `lexeme` into the registration's wire text as the generation.
fn with_generation(v: &serde_json::Value, lexeme: &str) -> Result<Vec<u8>, String> {
    let wire = String::from_utf8(wire_bytes(v, "/registration")?).map_err(|e| e.to_string())?;
    let needle = "\"generation\":1,";
    if !wire.contains(needle) {
        return Err("registration wire has no generation 1".into());
    }
    Ok(wire
        .replacen(needle, &format!("\"generation\":{lexeme},"), 1)
        .into_bytes())
}

fn generation_spelling(v: &serde_json::Value, s: &mut Section) {
    let carrier = str_at(v, "/registration/object/carrier")
        .unwrap_or_default()
        .to_owned();
    match array_at(v, "/generationSpelling/rejects") {
        Ok(rejects) => {
            for reject in rejects {
                let lexeme = reject["lexeme"].as_str().unwrap_or_default().to_owned();
                s.case(
                    format!(
                        "reject {lexeme} ({})",
                        reject["reason"].as_str().unwrap_or("?")
                    ),
                    (|| {
                        let bytes = with_generation(v, &lexeme)?;
                        let valid_json = reject["validJson"].as_bool().ok_or("no validJson")?;
                        match proof::parse(&bytes, &carrier) {
                            Err(Malformed::Json(_)) if !valid_json => Ok(()),
                            Err(Malformed::Generation(_)) if valid_json => {
                                // It survives to a verifying signature: the JCS of the
                                // received object equals the shipped bytes, so only the
                                // lexical check can refuse it.
                                let parsed =
                                    rltp_proofs::json::parse(&bytes).map_err(|e| e.to_string())?;
                                let mut object = parsed.as_object().ok_or("not an object")?.clone();
                                object.remove("sig");
                                let jcs = jcs::canonicalize_string(&object.into())
                                    .map_err(|e| e.to_string())?;
                                expect_eq(
                                    "jcsIdentical",
                                    jcs.as_str(),
                                    str_at(v, "/registration/jcs")?,
                                )
                            }
                            other => Err(format!("expected refused(malformed), got {other:?}")),
                        }
                    })(),
                );
            }
        }
        Err(why) => s.case("rejects", Err(why)),
    }
    match array_at(v, "/generationSpelling/accepts") {
        Ok(accepts) => {
            for accept in accepts {
                let lexeme = accept.as_str().unwrap_or_default().to_owned();
                s.case(
                    format!("accept {lexeme}"),
                    with_generation(v, &lexeme).and_then(|bytes| {
                        let p = proof::parse(&bytes, &carrier).map_err(|e| e.to_string())?;
                        expect_eq(
                            "generation",
                            p.generation().map(|g| g.to_string()),
                            Some(lexeme.clone()),
                        )
                    }),
                );
            }
        }
        Err(why) => s.case("accepts", Err(why)),
    }
}

fn duration_grammar(v: &serde_json::Value, s: &mut Section) {
    match array_at(v, "/durationGrammar/accept") {
        Ok(accepts) => {
            for accept in accepts {
                let lexeme = accept["lexeme"].as_str().unwrap_or_default().to_owned();
                s.case(
                    format!("accept {lexeme}"),
                    constants::parse_duration(&lexeme)
                        .map_err(|e| e.to_string())
                        .and_then(|ms| expect_eq("ms", Some(ms), accept["ms"].as_u64())),
                );
            }
        }
        Err(why) => s.case("accept", Err(why)),
    }
    match array_at(v, "/durationGrammar/reject") {
        Ok(rejects) => {
            for reject in rejects {
                let lexeme = reject["lexeme"].as_str().unwrap_or_default().to_owned();
                s.case(
                    format!("reject {lexeme}"),
                    match constants::parse_duration(&lexeme) {
                        Ok(ms) => Err(format!("accepted as {ms} ms")),
                        Err(_) => Ok(()),
                    },
                );
            }
        }
        Err(why) => s.case("reject", Err(why)),
    }
}
