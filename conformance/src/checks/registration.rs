//! The checks of the declaration, challenges and registration (§4.4, §5a.3 r1–r5).

use super::*;

// ---------------------------------------------------------------------------
// §4.4 g1
// ---------------------------------------------------------------------------

pub(super) async fn declaration(
    probe: &Probe,
    target: &Target,
    report: &mut Report,
) -> Option<CarrierConstants> {
    const S: &str = "§4.4 g1";
    let first = match probe.client.declaration().await {
        Ok(d) => d,
        Err(e) => {
            report.record(
                S,
                "the declaration parses, verifies and passes the carrier role",
                Err(e.to_string()),
            );
            return None;
        }
    };
    let constants = first.declaration.constants().clone();
    report.record(
        S,
        "the declaration parses, verifies under its issuer and passes the carrier role",
        Ok(format!(
            "revision {}, issuer {}, seven constants in their §11 domains",
            first.declaration.revision(),
            first.declaration.issuer().to_did_key()
        )),
    );
    if let Some(expected) = &target.issuer {
        report.record(
            S,
            "the issuer is the declaration key bound to C",
            expect(
                "issuer",
                first.declaration.issuer().to_did_key(),
                expected.to_did_key(),
            ),
        );
    } else {
        report.unobservable(
            S,
            "the issuer is the declaration key bound to C",
            "no --issuer given",
        );
    }
    report.record(
        S,
        "the document's shape (PROTOCOL.md §3)",
        declaration_shape(&first.bytes),
    );
    report.record(
        S,
        "the same revision is served byte for byte",
        match probe.client.declaration().await {
            Ok(second) if second.bytes == first.bytes => {
                Ok(format!("{} bytes, twice", first.bytes.len()))
            }
            Ok(_) => Err("two fetches returned different bytes for one revision".into()),
            Err(e) => Err(e.to_string()),
        },
    );
    Some(constants)
}

/// The served document as `PROTOCOL.md` §3 restates it: a JCS
/// `registry-declaration/0.1` whose issuer is also its recipient, with the
/// carrier role and one `eddsa-jcs-2022` `DataIntegrityProof` whose
/// verification method is the issuer's `did:key` with its key as fragment.
pub(super) fn declaration_shape(bytes: &[u8]) -> Result<String, String> {
    let value = rltp_proofs::json::parse(bytes).map_err(|e| e.to_string())?;
    let jcs = rltp_proofs::jcs::canonicalize(&value).map_err(|e| e.to_string())?;
    if jcs != bytes {
        return Err("the served bytes are not JCS".into());
    }
    let doc = value.as_object().ok_or("not an object")?;
    let text = |o: &Object, k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut members: Vec<&str> = doc.keys().collect();
    members.sort_unstable();
    expect(
        "members",
        members,
        vec![
            "id",
            "issuedAt",
            "issuer",
            "payload",
            "proof",
            "recipient",
            "threadId",
            "type",
        ],
    )?;
    expect(
        "type",
        text(doc, "type").as_deref(),
        Some("https://real-life.org/trust-tasks/registry-declaration/0.1"),
    )?;
    let issuer = text(doc, "issuer").ok_or("no issuer")?;
    expect("recipient", text(doc, "recipient"), Some(issuer.clone()))?;
    let declaration = doc
        .get("payload")
        .and_then(Value::as_object)
        .and_then(|p| p.get("declaration"))
        .and_then(Value::as_object)
        .ok_or("no payload.declaration")?;
    expect(
        "role",
        text(declaration, "role").as_deref(),
        Some(rltp_proofs::constants::CARRIER_ROLE),
    )?;
    let proof = doc
        .get("proof")
        .and_then(Value::as_object)
        .ok_or("no proof")?;
    let key = issuer
        .strip_prefix("did:key:")
        .ok_or("issuer is not a did:key")?;
    expect(
        "proof",
        (
            text(proof, "type"),
            text(proof, "cryptosuite"),
            text(proof, "proofPurpose"),
            text(proof, "verificationMethod"),
        ),
        (
            Some("DataIntegrityProof".into()),
            Some("eddsa-jcs-2022".into()),
            Some("assertionMethod".into()),
            Some(format!("{issuer}#{key}")),
        ),
    )?;
    Ok("registry-declaration/0.1, self-addressed, carrier role, eddsa-jcs-2022 by the issuer's key".into())
}

// ---------------------------------------------------------------------------
// §5a.3 challenges
// ---------------------------------------------------------------------------

pub(super) async fn challenges(
    probe: &Probe,
    target: &Target,
    constants: Option<&CarrierConstants>,
    report: &mut Report,
) {
    const S: &str = "§5a.3 challenge";
    let who = Recipient::fresh(&probe.carrier, 1);
    // The address half is sealed to the rkid and names what was asked for.
    let issued = issue(probe, &who, Purpose::Register).await;
    report.record(
        S,
        "a register challenge carries an address challenge sealed to the rkid, naming C, rkid and purpose",
        match &issued {
            Ok((_, Some(_), _)) => Ok("opened with the rkid secret (PROTOCOL.md §8)".into()),
            Ok((_, None, _)) => Err("no addressChallenge".into()),
            Err(e) => Err(e.clone()),
        },
    );
    report.record(
        S,
        "a collect challenge carries no address challenge",
        match issue(probe, &who, Purpose::Collect).await {
            Ok((_, None, _)) => Ok("principalChallenge only".into()),
            Ok((_, Some(_), _)) => Err("a collect challenge carried an addressChallenge".into()),
            Err(e) => Err(e),
        },
    );
    if let (Ok((_, _, expires_at)), Some(constants)) = (&issued, constants) {
        let lifetime = constants.challenge_lifetime_ms();
        let expected = now_ms().saturating_add(lifetime);
        // Clocks differ between hosts; a minute of skew is tolerated.
        let skew = expires_at.abs_diff(expected);
        report.record(
            S,
            "expiresAt is issue time + challenge-lifetime",
            if skew <= 60_000 {
                Ok(format!("within {skew} ms of now + {lifetime} ms"))
            } else {
                Err(format!(
                    "expiresAt {expires_at} is {skew} ms from now + {lifetime} ms"
                ))
            },
        );
    }

    // Consumed by the first response, before verification (challengeConsumption).
    let check = async {
        let (object, _) = registration_object(probe, &who, Purpose::Register).await?;
        let good = sign_object(&who.key, object.clone());
        let junk = {
            let mut o = object;
            o.insert(field::SIG, rltp_proofs::encoding::multibase_z(&[7u8; 64]));
            rltp_proofs::jcs::canonicalize(&Value::Object(o)).unwrap_or_default()
        };
        let first = present(probe, &junk).await?;
        let second = present(probe, &good).await?;
        expect(
            "junk signature, then the valid proof on the same challenge",
            (first, second),
            (Verdict::PossessionFailed, Verdict::PossessionFailed),
        )
    };
    report.record(
        S,
        "a failed response consumes its challenge (a valid one after it is refused)",
        check.await,
    );

    let check = async {
        let (object, _) = registration_object(probe, &who, Purpose::Register).await?;
        let proof = sign_object(&who.key, object);
        let first = present(probe, &proof).await?;
        let replay = present(probe, &proof).await?;
        expect(
            "the proof, then its replay",
            (first, replay),
            (Verdict::Registered, Verdict::PossessionFailed),
        )
    };
    report.record(
        S,
        "a challenge is single use: a replayed proof is refused",
        check.await,
    );

    let check = async {
        let fresh = Recipient::fresh(&probe.carrier, 1);
        let (mut object, _) = registration_object(probe, &fresh, Purpose::Register).await?;
        object.insert(field::PRINCIPAL_CHALLENGE, b64url_encode(&random32()));
        let verdict = present(probe, &sign_object(&fresh.key, object)).await?;
        expect(
            "a never-issued principal challenge",
            verdict,
            Verdict::PossessionFailed,
        )
    };
    report.record(
        S,
        "a challenge the carrier never issued is refused",
        check.await,
    );

    expired_challenge(probe, target, constants, report).await;
}

/// §5a.3: a proof on an expired challenge is refused, observed only when
/// challenge-lifetime fits the runner's patience.
async fn expired_challenge(
    probe: &Probe,
    target: &Target,
    constants: Option<&CarrierConstants>,
    report: &mut Report,
) {
    const S: &str = "§5a.3 challenge";
    // Expiry: only within the runner's patience.
    let Some(lifetime) = constants.map(CarrierConstants::challenge_lifetime_ms) else {
        return;
    };
    let wait = Duration::from_millis(lifetime) + Duration::from_millis(1_500);
    if wait > target.patience {
        report.unobservable(
            S,
            "a proof on an expired challenge is refused",
            format!(
                "challenge-lifetime is {lifetime} ms; rerun with --patience {}s or more",
                wait.as_secs() + 1
            ),
        );
        return;
    }
    let late = Recipient::fresh(&probe.carrier, 1);
    let check = async {
        let (object, _) = registration_object(probe, &late, Purpose::Register).await?;
        tokio::time::sleep(wait).await;
        let verdict = present(probe, &sign_object(&late.key, object)).await?;
        expect(
            "a proof presented after expiresAt",
            verdict,
            Verdict::PossessionFailed,
        )
    };
    report.record(S, "a proof on an expired challenge is refused", check.await);
}

// ---------------------------------------------------------------------------
// §5a.3 r1
// ---------------------------------------------------------------------------

/// A fresh registration proof object with `member` set to `value`, signed
/// (the signature is irrelevant: r1 comes first).
pub(super) async fn mutated(
    probe: &Probe,
    member: &str,
    value: Option<Value>,
) -> Result<Vec<u8>, String> {
    let who = Recipient::fresh(&probe.carrier, 1);
    let (mut object, _) = registration_object(probe, &who, Purpose::Register).await?;
    match value {
        Some(v) => {
            object.insert(member, v);
        }
        None => {
            object.remove(member);
        }
    }
    Ok(sign_object(&who.key, object))
}

/// §5a.3 r1, `carrier-proof.json` encodingAcceptanceSurface: schema-valid
/// identifiers whose decoded bytes are wrong, each in a fresh, otherwise
/// valid proof, are refused(malformed).
async fn encoding_acceptance_surface(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 r1";
    let vectors = SpecVectors::Vendored;
    let surface = vectors
        .json("carrier-proof.json")
        .ok()
        .and_then(|v| v.get("encodingAcceptanceSurface").cloned());
    // encodingAcceptanceSurface: schema-valid identifiers whose decoded
    // bytes are wrong, each in a fresh, otherwise valid proof.
    let cases: Vec<(String, String)> = surface
        .as_ref()
        .and_then(|s| s.get("cases"))
        .and_then(|c| c.as_array())
        .map(|cases| {
            cases
                .iter()
                .filter_map(|c| {
                    Some((
                        c.get("field")?.as_str()?.to_owned(),
                        c.get("value")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if cases.len() != 6 {
        report.record(
            S,
            "carrier-proof.json encodingAcceptanceSurface",
            Err(format!(
                "the vendored vector has {} cases, not 6",
                cases.len()
            )),
        );
    }
    for (member, value) in cases {
        let check = async {
            let proof = if member == field::SIG {
                let who = Recipient::fresh(&probe.carrier, 1);
                let (mut object, _) = registration_object(probe, &who, Purpose::Register).await?;
                object.insert(field::SIG, value.as_str());
                rltp_proofs::jcs::canonicalize(&Value::Object(object)).unwrap_or_default()
            } else {
                mutated(probe, &member, Some(Value::from(value.as_str()))).await?
            };
            expect("verdict", present(probe, &proof).await?, Verdict::Malformed)
        };
        report.record(
            S,
            format!(
                "encodingAcceptanceSurface: {member} {}…",
                value.get(..16).unwrap_or(&value)
            ),
            check.await,
        );
    }
}

pub(super) async fn r1_syntax(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 r1";
    encoding_acceptance_surface(probe, report).await;
    // generationSpelling: the received lexeme decides.
    for lexeme in ["1.0", "1e0", "01", "+1"] {
        let check = async {
            let proof = mutated(
                probe,
                field::GENERATION,
                Some(Value::from(Number::from_u64(1))),
            )
            .await?;
            let text = String::from_utf8_lossy(&proof)
                .replace("\"generation\":1,", &format!("\"generation\":{lexeme},"));
            expect(
                "verdict",
                present(probe, text.as_bytes()).await?,
                Verdict::Malformed,
            )
        };
        report.record(
            S,
            format!("generationSpelling: generation {lexeme}"),
            check.await,
        );
    }
    for (lexeme, generation) in [
        ("1", 1u64),
        ("2", 2),
        ("9007199254740991", 9_007_199_254_740_991),
    ] {
        let check = async {
            let who = Recipient::fresh(&probe.carrier, generation);
            expect("verdict", register(probe, &who).await?, Verdict::Registered)
        };
        report.record(
            S,
            format!("generationSpelling: generation {lexeme} is accepted"),
            check.await,
        );
    }
    // The purpose matrix and the constants of the signed bytes.
    let text_cases: [(&str, &str, Option<Value>); 6] = [
        ("v", field::V, Some(Value::from("rltp-carrier-proof/0.2"))),
        ("type", field::TYPE, Some(Value::from("carrier-proof"))),
        ("an unknown member", "note", Some(Value::from("x"))),
        ("a missing addressChallenge", field::ADDRESS_CHALLENGE, None),
        (
            "a 31-byte principalChallenge",
            field::PRINCIPAL_CHALLENGE,
            Some(Value::from(b64url_encode(&[1u8; 31]))),
        ),
        (
            "a carrier other than C",
            field::CARRIER,
            Some(Value::from("did:web:other-carrier.invalid")),
        ),
    ];
    for (what, member, value) in text_cases {
        let check = async {
            let proof = mutated(probe, member, value).await?;
            expect("verdict", present(probe, &proof).await?, Verdict::Malformed)
        };
        report.record(S, format!("{what} is refused(malformed)"), check.await);
    }
    let check = async {
        let who = registered(probe).await?;
        let mut object = session_object(probe, &who, Purpose::Collect).await?;
        object.insert(field::GENERATION, Number::from_u64(1));
        let proof = sign_object(&who.key, object);
        let page = probe
            .client
            .collect_proof(&proof, None, 10)
            .await
            .map_err(|e| e.to_string())?;
        expect("verdict", page.verdict, Verdict::Malformed)
    };
    report.record(
        S,
        "a collect proof carrying generation is refused(malformed)",
        check.await,
    );
}

// ---------------------------------------------------------------------------
// §5a.3 r3
// ---------------------------------------------------------------------------

pub(super) async fn r3_possession(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 r3";
    let check = async {
        let who = Recipient::fresh(&probe.carrier, 1);
        let stranger = ed25519_dalek::SigningKey::from_bytes(&random32());
        let (object, _) = registration_object(probe, &who, Purpose::Register).await?;
        // principal names who's key; the signature is by another key.
        expect(
            "verdict",
            present(probe, &sign_object(&stranger, object)).await?,
            Verdict::PossessionFailed,
        )
    };
    report.record(S, "a signature by a key other than principal", check.await);
    let check = async {
        let who = Recipient::fresh(&probe.carrier, 1);
        let (mut object, _) = registration_object(probe, &who, Purpose::Register).await?;
        object.insert(field::ADDRESS_CHALLENGE, b64url_encode(&random32()));
        expect(
            "verdict",
            present(probe, &sign_object(&who.key, object)).await?,
            Verdict::PossessionFailed,
        )
    };
    report.record(
        S,
        "an address challenge that was not opened with the rkid secret",
        check.await,
    );
    let check = async {
        let who = Recipient::fresh(&probe.carrier, 1);
        let other = Recipient::fresh(&probe.carrier, 1);
        let (mut object, _) = registration_object(probe, &who, Purpose::Register).await?;
        object.insert(field::RKID, other.rkid().to_multikey());
        expect(
            "verdict",
            present(probe, &sign_object(&who.key, object)).await?,
            Verdict::PossessionFailed,
        )
    };
    report.record(S, "a proof transplanted to a second rkid", check.await);
    let check = async {
        let who = Recipient::fresh(&probe.carrier, 1);
        let (mut object, _) = registration_object(probe, &who, Purpose::Register).await?;
        object.insert(field::PURPOSE, Purpose::Rebind.as_str());
        expect(
            "verdict",
            present(probe, &sign_object(&who.key, object)).await?,
            Verdict::PossessionFailed,
        )
    };
    report.record(
        S,
        "a register challenge answered with a rebind proof",
        check.await,
    );
}

// ---------------------------------------------------------------------------
// §5a.3 r5
// ---------------------------------------------------------------------------

pub(super) async fn r5_state_table(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 r5";
    let check = async {
        let first = Recipient::fresh(&probe.carrier, 1);
        let mut seen = vec![register(probe, &first).await?];
        seen.push(register(probe, &first).await?);
        let stranger = first.other_principal(1);
        seen.push(register(probe, &stranger).await?);
        let successor = first.other_principal(2);
        seen.push(register(probe, &successor).await?);
        seen.push(register(probe, &first).await?);
        expect(
            "unbound → g1 P, again, g1 P′, g2 P″, g1 P",
            seen,
            vec![
                Verdict::Registered,
                Verdict::RegisteredIdempotent,
                Verdict::StaleGeneration { held: 1 },
                Verdict::Rebound,
                Verdict::StaleGeneration { held: 2 },
            ],
        )
    };
    report.record(
        S,
        "registered, registered(idempotent), stale-generation carrying g, rebound",
        check.await,
    );
}
