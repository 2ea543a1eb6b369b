//! `identity-derivation.json` (Identity §7a): the control principal
//! derivation, the adapter-scoped siblings, the `C` validation pipeline and
//! the pinned Unicode 15.0 ranges.

use crate::{Report, Section, SpecVectors, array_at, expect_eq, hex, hex32, missing, str_at};
use rltp_proofs::identity::{
    CarrierFamily, CarrierId, control_principal, derivation_info, derive_identity,
    parse_generation_lexeme,
};
use rltp_proofs::json;

const FILE: &str = "identity-derivation.json";
const SECTIONS: [&str; 5] = [
    "carrierRelationship",
    "carrierRelationship.identifierGrammar",
    "carrierRelationship.nonceConvergence.generationDomain",
    "adapterScopedIdentities",
    "unicodePin",
];

/// Runs every section of `identity-derivation.json` the carrier touches.
pub fn run(vectors: &SpecVectors, report: &mut Report) {
    let (_, v) = match vectors.load(FILE) {
        Ok(loaded) => loaded,
        Err(why) => return missing(report, FILE, &SECTIONS, &why),
    };
    let root = match str_at(&v, "/rootIkm").and_then(hex) {
        Ok(root) => root,
        Err(why) => return missing(report, FILE, &SECTIONS, &why),
    };
    let mut s = Section::new(FILE, "carrierRelationship");
    relationship(&v, &root, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "carrierRelationship.identifierGrammar");
    identifier_grammar(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(
        FILE,
        "carrierRelationship.nonceConvergence.generationDomain",
    );
    generation_domain(&v, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "adapterScopedIdentities");
    adapter_scoped(&v, &root, &mut s);
    report.sections.push(s);
    let mut s = Section::new(FILE, "unicodePin");
    unicode_pin(&v, &mut s);
    report.sections.push(s);
}

fn carrier(s: &str) -> Result<CarrierId, String> {
    s.parse::<CarrierId>().map_err(|e| e.to_string())
}

/// One derivation case: carrier digest, info string, seed and principal.
fn derivation_case(root: &[u8], case: &serde_json::Value, nonce_hex: &str) -> Result<(), String> {
    let c = carrier(str_at(case, "/carrier")?)?;
    let nonce = hex32(nonce_hex)?;
    if let Some(expected) = case.get("carrierDigest").and_then(|d| d.as_str()) {
        expect_eq("carrierDigest", c.digest().as_str(), expected)?;
    }
    expect_eq(
        "info",
        derivation_info(CarrierFamily::Relationship, &c, &nonce).as_str(),
        str_at(case, "/info")?,
    )?;
    let (key, principal) = control_principal(root, &c, &nonce);
    expect_eq("edSeed", key.to_bytes(), hex32(str_at(case, "/edSeed")?)?)?;
    expect_eq(
        "principal",
        principal.to_did_key().as_str(),
        str_at(case, "/principal")?,
    )?;
    expect_eq(
        "keyAgreement (Ed25519-only class)",
        case.get("keyAgreement"),
        Some(&serde_json::Value::Null),
    )
}

fn relationship(v: &serde_json::Value, root: &[u8], s: &mut Section) {
    let base = "/carrierRelationship";
    let nonce = str_at(v, &format!("{base}/relationshipNonce")).map(str::to_owned);
    s.case(
        "relationshipDigest",
        nonce.clone().and_then(|n| {
            expect_eq(
                "Dn",
                rltp_proofs::encoding::digest_multibase(&hex32(&n)?),
                str_at(v, &format!("{base}/relationshipDigest"))?.to_owned(),
            )
        }),
    );
    match array_at(v, &format!("{base}/cases")) {
        Ok(cases) => {
            for case in cases {
                let name = case["case"].as_str().unwrap_or("?").to_owned();
                s.case(
                    name,
                    nonce.clone().and_then(|n| derivation_case(root, case, &n)),
                );
            }
        }
        Err(why) => s.case("cases", Err(why)),
    }
    s.case(
        "relationshipAxisCase",
        v.pointer(&format!("{base}/relationshipAxisCase"))
            .ok_or_else(|| "missing".to_owned())
            .and_then(|case| derivation_case(root, case, str_at(case, "/nonce")?)),
    );
}

fn identifier_grammar(v: &serde_json::Value, s: &mut Section) {
    let base = "/carrierRelationship/identifierGrammar";
    match array_at(v, &format!("{base}/accepts")) {
        Ok(accepts) => {
            for value in accepts {
                let text = value.as_str().unwrap_or_default();
                s.case(format!("accept {text:?}"), carrier(text).map(|_| ()));
            }
        }
        Err(why) => s.case("accepts", Err(why)),
    }
    match array_at(v, &format!("{base}/rejects")) {
        Ok(rejects) => {
            for reject in rejects {
                let reason = reject["reason"].as_str().unwrap_or("?").to_owned();
                s.case(format!("reject: {reason}"), grammar_reject(reject));
            }
        }
        Err(why) => s.case("rejects", Err(why)),
    }
    match array_at(v, &format!("{base}/rawByteRejects")) {
        Ok(rejects) => {
            for reject in rejects {
                let reason = reject["reason"].as_str().unwrap_or("?").to_owned();
                s.case(
                    format!("raw bytes reject: {reason}"),
                    str_at(reject, "/bytesHex").and_then(hex).and_then(|bytes| {
                        // The well-formed U+0000 case dies at step 4; every
                        // other raw-byte case is ill-formed UTF-8 (step 1).
                        let expected_step = if std::str::from_utf8(&bytes).is_ok() {
                            4
                        } else {
                            1
                        };
                        match CarrierId::from_bytes(&bytes) {
                            Ok(_) => Err("accepted".to_owned()),
                            Err(e) => expect_eq("failing step", e.step(), expected_step),
                        }
                    }),
                );
            }
        }
        Err(why) => s.case("rawByteRejects", Err(why)),
    }
    match array_at(v, &format!("{base}/rawByteAccepts")) {
        Ok(accepts) => {
            for accept in accepts {
                s.case(
                    "raw bytes accept",
                    str_at(accept, "/bytesHex").and_then(hex).and_then(|bytes| {
                        CarrierId::from_bytes(&bytes)
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    }),
                );
            }
        }
        Err(why) => s.case("rawByteAccepts", Err(why)),
    }
    s.case(
        "nfcPair: both valid, two carriers, two principals",
        array_at(v, &format!("{base}/nfcPair")).and_then(|pair| {
            let [a, b] = pair.as_slice() else {
                return Err("nfcPair is not a pair".to_owned());
            };
            let a = carrier(a.as_str().unwrap_or_default())?;
            let b = carrier(b.as_str().unwrap_or_default())?;
            if a == b || a.digest() == b.digest() {
                return Err("NFC and NFD spellings collapsed into one carrier".to_owned());
            }
            let nonce = [7u8; 32];
            let root = [1u8; 64];
            if control_principal(&root, &a, &nonce).1 == control_principal(&root, &b, &nonce).1 {
                return Err("one principal for two carriers".to_owned());
            }
            Ok(())
        }),
    );
}

fn grammar_reject(reject: &serde_json::Value) -> Result<(), String> {
    if let Some(value) = reject.get("value").and_then(|x| x.as_str()) {
        return match carrier(value) {
            Ok(_) => Err(format!("accepted {value:?}")),
            Err(_) => Ok(()),
        };
    }
    if let Some(escaped) = reject.get("valueEscaped").and_then(|x| x.as_str()) {
        // The value is given as a JSON escape because it is not encodable as
        // UTF-8: the strict reader must refuse to produce it at all.
        let quoted = format!("\"{escaped}\"");
        return match json::parse(quoted.as_bytes()) {
            Err(json::JsonError::UnpairedSurrogate { .. }) => Ok(()),
            other => Err(format!(
                "expected an unpaired-surrogate refusal, got {other:?}"
            )),
        };
    }
    if let Some(repeat) = reject.get("repeat") {
        let ch = str_at(repeat, "/char")?;
        let count = repeat["count"].as_u64().ok_or("repeat without count")?;
        let value = ch.repeat(usize::try_from(count).map_err(|e| e.to_string())?);
        return match CarrierId::from_bytes(value.as_bytes()) {
            Err(e) => expect_eq("failing step", e.step(), 3),
            Ok(_) => Err(format!("accepted {} bytes", value.len())),
        };
    }
    Err("unrecognised reject case".to_owned())
}

fn generation_domain(v: &serde_json::Value, s: &mut Section) {
    let base = "/carrierRelationship/nonceConvergence/generationDomain";
    match array_at(v, &format!("{base}/accepts")) {
        Ok(accepts) => {
            for accept in accepts {
                let lexeme = accept.to_string();
                s.case(
                    format!("accept {lexeme}"),
                    parse_generation_lexeme(&lexeme)
                        .map_err(|e| e.to_string())
                        .and_then(|g| expect_eq("value", Some(g), accept.as_u64())),
                );
            }
        }
        Err(why) => s.case("accepts", Err(why)),
    }
    match array_at(v, &format!("{base}/rejects")) {
        Ok(rejects) => {
            for reject in rejects {
                let lexeme = match (reject.get("valueString"), reject.get("value")) {
                    (Some(text), _) => text.as_str().unwrap_or_default().to_owned(),
                    (None, Some(number)) => number.to_string(),
                    _ => String::new(),
                };
                s.case(
                    format!("reject {lexeme}"),
                    match parse_generation_lexeme(&lexeme) {
                        Ok(g) => Err(format!("accepted as {g}")),
                        Err(_) => Ok(()),
                    },
                );
            }
        }
        Err(why) => s.case("rejects", Err(why)),
    }
}

fn adapter_scoped(v: &serde_json::Value, root: &[u8], s: &mut Section) {
    let nonce = match str_at(v, "/carrierRelationship/relationshipNonce").and_then(hex32) {
        Ok(n) => n,
        Err(why) => return s.case("nonce", Err(why)),
    };
    for (name, family, prefix) in [
        (
            "connection",
            CarrierFamily::Connection,
            "rltp/v1/carrier-connection/ed25519/v1/",
        ),
        (
            "egress",
            CarrierFamily::Egress,
            "rltp/v1/carrier-egress/ed25519/v1/",
        ),
    ] {
        s.case(
            name,
            (|| {
                let c = carrier(str_at(v, "/adapterScopedIdentities/carrier")?)?;
                let base = format!("/adapterScopedIdentities/{name}");
                expect_eq(
                    "prefix",
                    family.prefix(),
                    str_at(v, &format!("{base}/prefix"))?,
                )?;
                expect_eq("prefix literal", family.prefix(), prefix)?;
                expect_eq(
                    "info",
                    derivation_info(family, &c, &nonce).as_str(),
                    str_at(v, &format!("{base}/info"))?,
                )?;
                let (_, did) = derive_identity(family, root, &c, &nonce);
                expect_eq(
                    "did",
                    did.to_did_key().as_str(),
                    str_at(v, &format!("{base}/did"))?,
                )
            })(),
        );
    }
}

/// Executes the pin: every code point of every shipped range is refused at
/// step 4, and the code points just outside each range are not refused by
/// that range (unless another shipped range holds them).
fn unicode_pin(v: &serde_json::Value, s: &mut Section) {
    let base = "/carrierRelationship/identifierGrammar/unicodePin";
    s.case(
        "version",
        str_at(v, &format!("{base}/version"))
            .and_then(|x| expect_eq("version", x, rltp_proofs::identity::unicode_pin::VERSION)),
    );
    let mut all: Vec<(u32, u32)> = Vec::new();
    let mut lists: Vec<(&str, Vec<(u32, u32)>)> = Vec::new();
    for list in ["cc", "cf", "whiteSpace"] {
        match array_at(v, &format!("{base}/{list}")).and_then(|ranges| parse_ranges(ranges)) {
            Ok(ranges) => {
                all.extend(&ranges);
                lists.push((list, ranges));
            }
            Err(why) => s.case(list, Err(why)),
        }
    }
    let in_pin = |cp: u32| all.iter().any(|&(a, b)| (a..=b).contains(&cp));
    for (list, ranges) in lists {
        for (first, last) in ranges {
            s.case(
                format!("{list} {first:04X}-{last:04X}"),
                (|| {
                    for cp in first..=last {
                        let c = char::from_u32(cp).ok_or(format!("{cp:X} is not a scalar"))?;
                        match carrier(&format!("a{c}b")) {
                            Err(_) => {}
                            Ok(_) => return Err(format!("U+{cp:04X} accepted")),
                        }
                    }
                    for cp in [first.wrapping_sub(1), last + 1] {
                        if in_pin(cp) {
                            continue;
                        }
                        if let Some(c) = char::from_u32(cp) {
                            carrier(&format!("a{c}b"))
                                .map_err(|e| format!("U+{cp:04X} outside the pin refused: {e}"))?;
                        }
                    }
                    Ok(())
                })(),
            );
        }
    }
}

fn parse_ranges(ranges: &[serde_json::Value]) -> Result<Vec<(u32, u32)>, String> {
    ranges
        .iter()
        .map(|r| {
            let text = r.as_str().ok_or("range is not a string")?;
            let (a, b) = text.split_once('-').unwrap_or((text, text));
            let parse = |x: &str| u32::from_str_radix(x, 16).map_err(|e| format!("{text}: {e}"));
            Ok((parse(a)?, parse(b)?))
        })
        .collect()
}
