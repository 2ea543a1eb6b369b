//! The checks, one function per contract section, in report order.

use super::probe::{
    Answer, Probe, Recipient, expect, issue, jcs_text, present, random32, register,
    registration_object, session_object, session_proof, sign_object,
};
use super::{Report, RunError, Target};
use rltp_client::{Client, ClientError, WatchEvent};
use rltp_proofs::DepositId;
use rltp_proofs::constants::CarrierConstants;
use rltp_proofs::encoding::b64url_encode;
use rltp_proofs::envelope::MAX_ENVELOPE_BYTES;
use rltp_proofs::json::{Number, Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::proof::{Purpose, field};
use rltp_proofs::seal::SealedEnvelope;
use rltp_vectors::SpecVectors;
use rltp_wire::response::{ErrorCode, MAX_DETAIL_BYTES};
use rltp_wire::verdict::{DepositStatus, SubmitVerdict, Verdict};
use rltp_wire::{self as wire, Request};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Runs every section against `target`.
pub(super) async fn run(target: &Target) -> Result<Report, RunError> {
    rltp_client::tls::install_crypto_provider();
    let client = Client::connect(&target.options)
        .await
        .map_err(RunError::Unreachable)?;
    let probe = Probe {
        client,
        carrier: target.carrier.clone(),
        timeout: target.options.timeout,
    };
    let mut report = Report::default();
    let constants = declaration(&probe, target, &mut report).await;
    not_observable(&mut report);
    challenges(&probe, target, constants.as_ref(), &mut report).await;
    r1_syntax(&probe, &mut report).await;
    r3_possession(&probe, &mut report).await;
    r5_state_table(&probe, &mut report).await;
    sessions(&probe, &mut report).await;
    submissions(&probe, &mut report).await;
    collection(&probe, &mut report).await;
    frames(&probe, &mut report).await;
    submit_stream(&probe, &mut report).await;
    // Last: the connection survived every malformed request.
    report.record(
        "PROTOCOL §6",
        "the connection survives every refused frame",
        probe
            .client
            .declaration()
            .await
            .map(|_| "a declaration is still served on the same connection".into())
            .map_err(|e| e.to_string()),
    );
    probe.client.close().await;
    Ok(report)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A key-blind carrier cannot tell a random ciphertext from a real seal:
/// a shape-valid envelope for `rkid` with `ciphertext` random bytes.
fn envelope(rkid: &Rkid, ciphertext: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ciphertext + 32);
    while bytes.len() < ciphertext {
        bytes.extend_from_slice(&random32());
    }
    bytes.truncate(ciphertext);
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&random32()[..12]);
    SealedEnvelope {
        rkid: *rkid,
        epk: random32(),
        nonce,
        ciphertext: bytes,
    }
    .to_bytes()
}

async fn submit(probe: &Probe, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, String> {
    probe
        .client
        .submit(rkid, bytes)
        .await
        .map(|a| a.verdict)
        .map_err(|e| format!("submit: {e}"))
}

/// Submits until a non-retriable verdict (a few attempts).
async fn deposit(probe: &Probe, rkid: &Rkid, bytes: &[u8]) -> Result<SubmitVerdict, String> {
    for attempt in 0..5u32 {
        let verdict = submit(probe, rkid, bytes).await?;
        if !verdict.retriable() {
            return Ok(verdict);
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    Err("still refused retriably after 5 attempts".into())
}

/// A fresh registered recipient (or the reason there is none).
async fn registered(probe: &Probe) -> Result<Recipient, String> {
    let who = Recipient::fresh(&probe.carrier, 1);
    match register(probe, &who).await? {
        Verdict::Registered => Ok(who),
        other => Err(format!("a fresh registration was answered {other}")),
    }
}

// ---------------------------------------------------------------------------
// §4.4 g1
// ---------------------------------------------------------------------------

async fn declaration(
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
fn declaration_shape(bytes: &[u8]) -> Result<String, String> {
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

fn not_observable(report: &mut Report) {
    report.unobservable(
        "§4.4 g3",
        "no signature check before the admission decision; a replay costs a lookup",
        "needs the carrier's verification count (ours: the register log line's `verifications`)",
    );
    report.unobservable(
        "§4.4 g4",
        "a held binding is served through an unknown-address flood",
        "needs a flood past the carrier's private meters (tests/torture/floods.rs does it)",
    );
    report.unobservable(
        "§4.4 g5",
        "a queue below its floor is admitted whatever other queues hold",
        "needs other queues filled to the carrier's private capacity",
    );
    report.unobservable(
        "§5a.9",
        "orphan horizon, wind-up deadline, give-up horizon, tombstone eviction",
        "the declared horizons are at least a day (§11 domains)",
    );
}

// ---------------------------------------------------------------------------
// §5a.3 challenges
// ---------------------------------------------------------------------------

async fn challenges(
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
async fn mutated(probe: &Probe, member: &str, value: Option<Value>) -> Result<Vec<u8>, String> {
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

async fn r1_syntax(probe: &Probe, report: &mut Report) {
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

async fn r3_possession(probe: &Probe, report: &mut Report) {
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

async fn r5_state_table(probe: &Probe, report: &mut Report) {
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

// ---------------------------------------------------------------------------
// §5a.3 sessions
// ---------------------------------------------------------------------------

async fn sessions(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.3 session";
    let check = async {
        let who = registered(probe).await?;
        let stranger = who.other_principal(1);
        let proof = session_proof(probe, &stranger, Purpose::Collect).await?;
        let page = probe
            .client
            .collect_proof(&proof, None, 10)
            .await
            .map_err(|e| e.to_string())?;
        expect(
            "collect under another principal",
            page.verdict,
            Verdict::NoSuchQueue,
        )
    };
    report.record(
        S,
        "a valid proof under another principal finds no queue",
        check.await,
    );
    let check = async {
        let who = registered(probe).await?;
        let mut watch = match probe.client.watch(&who.keys, None).await {
            Ok(Ok(w)) => w,
            Ok(Err(v)) => return Err(format!("watch refused: {v}")),
            Err(e) => return Err(e.to_string()),
        };
        match tokio::time::timeout(probe.timeout, watch.next()).await {
            Ok(Ok(Some(WatchEvent::PageEnd { .. }))) => {}
            other => return Err(format!("expected the first page's end, got {other:?}")),
        }
        let second = session_proof(probe, &who, Purpose::Collect).await?;
        watch
            .present_second_proof(&second)
            .await
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(probe.timeout, watch.next()).await {
            Ok(Err(ClientError::Server(e))) => expect("answer", e.code, ErrorCode::SecondProof),
            other => Err(format!("expected second-proof, got {other:?}")),
        }
    };
    report.record(
        S,
        "a second proof on a watch session is answered second-proof",
        check.await,
    );
}

// ---------------------------------------------------------------------------
// §5a.5 s1–s3, §4.4 g2 precedence
// ---------------------------------------------------------------------------

async fn submissions(probe: &Probe, report: &mut Report) {
    let stranger = Recipient::fresh(&probe.carrier, 1).rkid();
    report.record(
        "§5a.5 s1",
        "an rkid nobody registered",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, &envelope(&stranger, 100)).await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
    report.record(
        "§4.4 g2",
        "s1 before s2: a malformed envelope to an unknown rkid",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, b"not an envelope").await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
    let oversize = {
        let mut e = envelope(&stranger, 65_552);
        e.insert(1, b' ');
        e
    };
    report.record(
        "§4.4 g2",
        "s1 before s2: an oversize envelope to an unknown rkid",
        async {
            expect(
                "verdict",
                submit(probe, &stranger, &oversize).await?,
                SubmitVerdict::NoSuchQueue,
            )
        }
        .await,
    );
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record("§5a.5 s2", "a queue to submit to", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let other = registered(probe).await.map(|o| o.rkid());
    bounds(probe, &rkid, other.ok(), report).await;

    const S3: &str = "§5a.5 s3";
    let bytes = envelope(&rkid, 200);
    let check = async {
        let first = probe
            .client
            .submit(&rkid, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let again = probe
            .client
            .submit(&rkid, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        let id = DepositId::of(&bytes);
        expect(
            "verdicts and deposit ids",
            (
                (first.verdict, first.deposit),
                (again.verdict, again.deposit),
            ),
            (
                (SubmitVerdict::Admitted, Some(id)),
                (SubmitVerdict::Duplicate, Some(id)),
            ),
        )
    };
    report.record(
        S3,
        "byte-identical bytes are a duplicate with the same deposit id",
        check.await,
    );
    let check = async {
        let document = b"{\"n\":1}";
        let a = rltp_proofs::seal::seal(document, &rkid, &mut rand::rng())
            .map_err(|e| e.to_string())?
            .to_bytes();
        let b = rltp_proofs::seal::seal(document, &rkid, &mut rand::rng())
            .map_err(|e| e.to_string())?
            .to_bytes();
        expect(
            "two seals of one document",
            (
                deposit(probe, &rkid, &a).await?,
                deposit(probe, &rkid, &b).await?,
            ),
            (SubmitVerdict::Admitted, SubmitVerdict::Admitted),
        )
    };
    report.record(
        S3,
        "re-sealing the same document is a different envelope, admitted",
        check.await,
    );
    // Leave the queues empty.
    drain(probe, &who).await;
}

/// §5a.5 s2: every shape fault, the size bound, and the JCS rule.
async fn bounds(probe: &Probe, rkid: &Rkid, other: Option<Rkid>, report: &mut Report) {
    const S: &str = "§5a.5 s2";
    let valid = String::from_utf8(envelope(rkid, 300)).unwrap_or_default();
    let member = |name: &str| -> String {
        rltp_proofs::json::parse(valid.as_bytes())
            .ok()
            .and_then(|v| {
                v.as_object()
                    .and_then(|o| o.get(name))
                    .and_then(|v| v.as_str().map(str::to_owned))
            })
            .unwrap_or_default()
    };
    let (epk, nonce, ciphertext) = (member("epk"), member("nonce"), member("ciphertext"));
    let standard = ciphertext.replace('-', "+").replace('_', "/");
    let mut cases: Vec<(&str, String)> = vec![
        ("padded epk", valid.replace(&epk, &format!("{epk}="))),
        (
            "short nonce",
            valid.replace(&nonce, nonce.get(..15).unwrap_or_default()),
        ),
        (
            "tag-only ciphertext",
            valid.replace(&ciphertext, &b64url_encode(&[0u8; 16])),
        ),
        ("an extra member", valid.replacen('{', "{\"x\":\"1\",", 1)),
        (
            "a duplicate member",
            valid.replacen('{', &format!("{{\"epk\":\"{epk}\","), 1),
        ),
        ("not JSON", "not json".to_owned()),
        (
            "whitespace (not the JCS)",
            valid.replacen("\":\"", "\": \"", 1),
        ),
        (
            "members out of order (not the JCS)",
            format!(
                "{{\"rkid\":\"{}\",\"epk\":\"{epk}\",\"nonce\":\"{nonce}\",\"ciphertext\":\"{ciphertext}\"}}",
                rkid.to_multikey()
            ),
        ),
    ];
    if standard != ciphertext {
        cases.push((
            "the standard base64 alphabet",
            valid.replace(&ciphertext, &standard),
        ));
    }
    if let Some(other) = other {
        cases.push((
            "an envelope for another held queue",
            String::from_utf8(envelope(&other, 300)).unwrap_or_default(),
        ));
    }
    for (what, bytes) in cases {
        report.record(
            S,
            format!("{what}: refused(bounds)"),
            async {
                expect(
                    "verdict",
                    submit(probe, rkid, bytes.as_bytes()).await?,
                    SubmitVerdict::Bounds,
                )
            }
            .await,
        );
    }
    let maximal = envelope(rkid, 65_552);
    report.record(
        S,
        format!("a maximal envelope ({MAX_ENVELOPE_BYTES} bytes) is admitted"),
        async {
            expect("length", maximal.len(), MAX_ENVELOPE_BYTES)?;
            expect(
                "verdict",
                deposit(probe, rkid, &maximal).await?,
                SubmitVerdict::Admitted,
            )
        }
        .await,
    );
    let mut over = maximal;
    over.insert(1, b' ');
    report.record(
        S,
        "one byte over the bound: refused(bounds), decided from the header",
        async {
            expect(
                "verdict",
                submit(probe, rkid, &over).await?,
                SubmitVerdict::Bounds,
            )
        }
        .await,
    );
}

/// Collects and concludes everything in `who`'s queue (best effort).
async fn drain(probe: &Probe, who: &Recipient) {
    for _ in 0..20 {
        let Ok(page) = probe.client.collect(&who.keys, None, 256).await else {
            return;
        };
        if page.deposits.is_empty() {
            return;
        }
        let ids: Vec<DepositId> = page.deposits.iter().map(|d| d.id).collect();
        if probe.client.conclude(&who.keys, &ids).await.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// §5a.8
// ---------------------------------------------------------------------------

async fn collection(probe: &Probe, report: &mut Report) {
    const S: &str = "§5a.8";
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record(S, "a queue to collect from", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let envelopes: Vec<Vec<u8>> = (0..3).map(|_| envelope(&rkid, 120)).collect();
    let ids: Vec<DepositId> = envelopes.iter().map(|e| DepositId::of(e)).collect();
    for e in &envelopes {
        if let Err(e) = deposit(probe, &rkid, e).await {
            report.record(S, "three deposits", Err(e));
            return;
        }
    }
    let page = |after: Option<u64>, limit: u32| {
        let keys = &who.keys;
        async move {
            let page = probe
                .client
                .collect(keys, after, limit)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((
                page.verdict,
                page.deposits
                    .iter()
                    .map(|d| (d.seq, d.id))
                    .collect::<Vec<_>>(),
                page.more,
            ))
        }
    };
    let check = async {
        let first = page(None, 1).await?;
        let second = page(Some(1), 1).await?;
        let rest = page(Some(2), 10).await?;
        let past = page(Some(3), 10).await?;
        expect(
            "pages (limit 1, after 1 limit 1, after 2, after 3)",
            vec![first, second, rest, past],
            vec![
                (Verdict::Served, vec![(1, ids[0])], true),
                (Verdict::Served, vec![(2, ids[1])], true),
                (Verdict::Served, vec![(3, ids[2])], false),
                (Verdict::Served, vec![], false),
            ],
        )
    };
    report.record(
        S,
        "seq starts at 1 in admission order; after is exclusive; more says whether to page on",
        check.await,
    );
    for (what, header) in [
        ("limit 0", "{\"limit\":0,\"op\":\"collect\"}"),
        ("limit 1025", "{\"limit\":1025,\"op\":\"collect\"}"),
        ("after as a string", "{\"after\":\"1\",\"op\":\"collect\"}"),
    ] {
        let check = async {
            let proof = session_proof(probe, &who, Purpose::Collect).await?;
            let answer = probe
                .raw(&Probe::frame(header.as_bytes(), &proof), true)
                .await?;
            expect("answer", answer.error_code(), Some("malformed-frame"))
        };
        report.record(
            S,
            format!("collect with {what} is malformed-frame"),
            check.await,
        );
    }
    let status = |id: DepositId| async move {
        probe
            .client
            .status(&rkid, &id)
            .await
            .map_err(|e| e.to_string())
    };
    report.record(
        S,
        "status of a held deposit is accepted",
        async { expect("status", status(ids[0]).await?, DepositStatus::Accepted) }.await,
    );
    report.record(
        S,
        "status of a deposit never admitted is unknown",
        async {
            expect(
                "status",
                status(DepositId::of(b"never admitted")).await?,
                DepositStatus::Unknown,
            )
        }
        .await,
    );
    let check = async {
        let once = probe
            .client
            .conclude(&who.keys, &[ids[0], ids[0]])
            .await
            .map_err(|e| e.to_string())?;
        let again = probe
            .client
            .conclude(&who.keys, &[ids[0], DepositId::of(b"never admitted")])
            .await
            .map_err(|e| e.to_string())?;
        expect(
            "[a, a] then [a, unknown]",
            (once, again),
            ((Verdict::Served, Some(1)), (Verdict::Served, Some(0))),
        )
    };
    report.record(
        S,
        "conclude: a repeated id counts once; concluding again is served, concluded 0",
        check.await,
    );
    report.record(
        S,
        "a concluded deposit is never redelivered",
        async {
            let (_, deposits, _) = page(None, 10).await?;
            expect(
                "held seqs after concluding seq 1",
                deposits.iter().map(|d| d.0).collect::<Vec<_>>(),
                vec![2, 3],
            )
        }
        .await,
    );
    report.record(
        S,
        "status after conclusion is still accepted (a carrier never reveals a conclusion)",
        async { expect("status", status(ids[0]).await?, DepositStatus::Accepted) }.await,
    );
    for (what, count) in [("no ids", 0usize), ("257 ids", wire::MAX_CONCLUDE_IDS + 1)] {
        let check = async {
            let proof = session_proof(probe, &who, Purpose::Conclude).await?;
            let deposits = Value::Array(
                (0..count)
                    .map(|i| Value::from(DepositId::of(&i.to_be_bytes()).to_multibase()))
                    .collect(),
            );
            let mut header = Object::new();
            header.insert("op", "conclude");
            header.insert("deposits", deposits);
            let answer = probe
                .raw(&Probe::frame(jcs_text(&header).as_bytes(), &proof), true)
                .await?;
            expect("answer", answer.error_code(), Some("malformed-frame"))
        };
        report.record(
            S,
            format!("conclude with {what} is malformed-frame (1..=256)"),
            check.await,
        );
    }
    drain(probe, &who).await;
}

// ---------------------------------------------------------------------------
// PROTOCOL.md §6: frames
// ---------------------------------------------------------------------------

async fn frames(probe: &Probe, report: &mut Report) {
    const S: &str = "PROTOCOL §6";
    let rkid = Recipient::fresh(&probe.carrier, 1).rkid();
    let submit_header = |size: &str| {
        format!(
            "{{\"op\":\"submit\",\"rkid\":\"{}\",\"size\":{size}}}",
            rkid.to_multikey()
        )
    };
    let cases: Vec<(&str, Vec<u8>, bool, &str)> = vec![
        ("a header prefix over 16 384 bytes (decided from the prefix)", prefix_only(16_385, 0), false, "frame-too-large"),
        ("a body prefix over 262 144 bytes (decided from the prefix)", prefix_only(20, 262_145), false, "frame-too-large"),
        ("a header that is not JSON", Probe::frame(b"{\"op\":", b""), true, "malformed-frame"),
        ("a header that is a JSON array", Probe::frame(b"[1]", b""), true, "malformed-frame"),
        ("a duplicate member", Probe::frame(b"{\"op\":\"declaration\",\"op\":\"declaration\"}", b""), true, "malformed-frame"),
        ("an unknown operation", Probe::frame(b"{\"op\":\"nope\"}", b""), true, "unknown-operation"),
        ("an unknown member", Probe::frame(b"{\"op\":\"declaration\",\"x\":1}", b""), true, "malformed-frame"),
        ("a stream that ends inside the header", prefix_only(20, 0), true, "truncated-frame"),
        ("bytes after the request frame", [Probe::frame(b"{\"op\":\"declaration\"}", b""), b"x".to_vec()].concat(), true, "malformed-frame"),
        (
            "a header rkid that is not an X25519 Multikey",
            Probe::frame(b"{\"op\":\"status\",\"rkid\":\"z6LS11111111111111111111111111111111111111111111\",\"deposit\":\"uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ\"}", b""),
            true,
            "malformed-frame",
        ),
        (
            "an unknown challenge purpose",
            Probe::frame(format!("{{\"op\":\"challenge\",\"purpose\":\"delete\",\"rkid\":\"{}\"}}", rkid.to_multikey()).as_bytes(), b""),
            true,
            "malformed-frame",
        ),
        ("a submit whose size is not the body length", Probe::frame(submit_header("10").as_bytes(), b"12345"), true, "malformed-frame"),
        ("a size that is not a canonical integer", Probe::frame(submit_header("1.0").as_bytes(), b"x"), true, "malformed-frame"),
        (
            "a proof body over 4 096 bytes",
            Probe::frame(b"{\"op\":\"register\"}", &[b' '; 4_097]),
            false,
            "frame-too-large",
        ),
    ];
    for (what, bytes, finish, code) in cases {
        let check = async {
            let answer = probe.raw(&bytes, finish).await?;
            expect("answer", answer.error_code(), Some(code))
                .map_err(|e| format!("{e}: {}", answer.describe()))
        };
        report.record(S, what.to_string(), check.await);
    }
    let check = async {
        // A valid registration with one byte after it registers nothing.
        let who = Recipient::fresh(&probe.carrier, 1);
        let (object, _) = registration_object(probe, &who, Purpose::Register).await?;
        let mut bytes = wire::encode_frame(
            &Request::Register.to_header(),
            &sign_object(&who.key, object),
        );
        bytes.push(b'x');
        let answer = probe.raw(&bytes, true).await?;
        expect("answer", answer.error_code(), Some("malformed-frame"))?;
        let page = probe
            .client
            .collect(&who.keys, None, 1)
            .await
            .map_err(|e| e.to_string())?;
        expect("collect after it", page.verdict, Verdict::NoSuchQueue)
    };
    report.record(
        S,
        "a valid register followed by a byte is malformed-frame and registers nothing",
        check.await,
    );
    let check = async {
        let answer = probe
            .raw(
                &Probe::frame(submit_header(&"9".repeat(5_000)).as_bytes(), b""),
                true,
            )
            .await?;
        match answer {
            Answer::Error(e) if e.detail.len() <= MAX_DETAIL_BYTES => {
                Ok(format!("{}: a {}-byte detail", e.code, e.detail.len()))
            }
            Answer::Error(e) => Err(format!(
                "a {}-byte detail echoes the request",
                e.detail.len()
            )),
            other => Err(format!("expected a closed error, got {}", other.describe())),
        }
    };
    report.record(
        S,
        "a detail is at most 256 bytes, whatever the request held",
        check.await,
    );
    let check = async {
        let answer = probe.request(&Request::Declaration, b"").await?;
        expect("verdict", answer.member("verdict"), Some("ok"))
    };
    report.record(
        S,
        "a well-formed request ended by FIN is served",
        check.await,
    );
}

/// A bare frame prefix: `header_len ‖ body_len`.
fn prefix_only(header_len: u32, body_len: u32) -> Vec<u8> {
    let mut out = header_len.to_be_bytes().to_vec();
    out.extend_from_slice(&body_len.to_be_bytes());
    out
}

// ---------------------------------------------------------------------------
// PROTOCOL.md §7: submit-stream
// ---------------------------------------------------------------------------

async fn submit_stream(probe: &Probe, report: &mut Report) {
    const S: &str = "PROTOCOL §7";
    let who = match registered(probe).await {
        Ok(who) => who,
        Err(e) => {
            report.record(S, "a queue to submit to", Err(e));
            return;
        }
    };
    let rkid = who.rkid();
    let stranger = Recipient::fresh(&probe.carrier, 1).rkid();
    let check = async {
        let a = envelope(&rkid, 100);
        let mut oversize = envelope(&rkid, 65_552);
        oversize.insert(1, b' ');
        let b = envelope(&rkid, 100);
        let mut bytes = wire::encode_frame(&Request::SubmitStream.to_header(), b"");
        for (target, envelope) in [
            (&rkid, &a),
            (&rkid, &oversize),
            (&stranger, &b),
            (&rkid, &b),
        ] {
            let size = u32::try_from(envelope.len()).unwrap_or(u32::MAX);
            bytes.extend(wire::encode_frame(
                &wire::stream_item_header(target, size),
                envelope,
            ));
        }
        let answer = probe.raw(&bytes, true).await?;
        let Answer::Frames(frames) = answer else {
            return Err(format!("expected four answers, got {}", answer.describe()));
        };
        let verdicts: Vec<Option<String>> = frames
            .iter()
            .map(|(h, _)| h.get("verdict").and_then(Value::as_str).map(str::to_owned))
            .collect();
        expect(
            "answers in item order",
            verdicts,
            [
                "admitted",
                "refused(bounds)",
                "refused(no-such-queue)",
                "admitted",
            ]
            .map(|v| Some(v.to_owned()))
            .to_vec(),
        )
    };
    report.record(
        S,
        "items answered in order; an oversize item is refused(bounds) and the stream goes on",
        check.await,
    );
    drain(probe, &who).await;
}
