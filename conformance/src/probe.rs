//! The runner's hands: raw frames over one connection, fresh recipients,
//! and proofs built (or broken) on purpose.

use ed25519_dalek::{Signer as _, SigningKey};
use rand::Rng as _;
use rltp_client::{Client, RecipientKeys};
use rltp_proofs::encoding::multibase_z;
use rltp_proofs::identity::CarrierId;
use rltp_proofs::json::{Object, Value};
use rltp_proofs::multikey::{DidKey, Rkid};
use rltp_proofs::proof::{Purpose, UnsignedProof, field};
use rltp_wire::address_challenge::open_address_challenge;
use rltp_wire::response::{ChallengeAnswer, ErrorAnswer, split_error};
use rltp_wire::verdict::Verdict;
use rltp_wire::{self as wire, Request};
use std::time::Duration;

/// What came back on one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// Answer frames (header, body) up to the end of the stream.
    Frames(Vec<(Object, Vec<u8>)>),
    /// A closed error (the stream ends after it).
    Error(ErrorAnswer),
}

impl Answer {
    /// The closed error code, if this is one.
    pub(super) fn error_code(&self) -> Option<&'static str> {
        match self {
            Answer::Error(e) => Some(e.code.as_str()),
            Answer::Frames(_) => None,
        }
    }

    /// The string member `name` of the first frame's header.
    pub(super) fn member(&self, name: &str) -> Option<&str> {
        match self {
            Answer::Frames(frames) => frames
                .first()
                .and_then(|(h, _)| h.get(name))
                .and_then(Value::as_str),
            Answer::Error(_) => None,
        }
    }

    /// For people: the error code and detail, or the first header's JCS.
    pub(super) fn describe(&self) -> String {
        match self {
            Answer::Error(e) => format!("{} ({})", e.code, e.detail),
            Answer::Frames(frames) => match frames.first() {
                Some((h, _)) => jcs_text(h),
                None => "no answer frame".into(),
            },
        }
    }
}

/// The JCS of `object`, as text.
pub(super) fn jcs_text(object: &Object) -> String {
    rltp_proofs::jcs::canonicalize(&Value::Object(object.clone()))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// One connection to the carrier under test.
pub(super) struct Probe {
    pub(super) client: Client,
    pub(super) carrier: CarrierId,
    pub(super) timeout: Duration,
}

impl Probe {
    /// Writes `bytes` on a fresh stream (then finishes it, if `finish`)
    /// and reads every answer frame until the server ends its side.
    ///
    /// # Errors
    /// A transport failure or an answer that is not a frame, as text.
    pub(super) async fn raw(&self, bytes: &[u8], finish: bool) -> Result<Answer, String> {
        let (mut send, mut recv) = self.client.open_raw().await.map_err(|e| e.to_string())?;
        // A server that decided from a prefix may stop our send side.
        match send.write_all(bytes).await {
            Err(e) if !e.is_stopped() => return Err(format!("write: {e}")),
            _ => {}
        }
        if finish {
            send.finish();
        }
        let read = async {
            let mut frames = Vec::new();
            loop {
                let Some(prefix) = recv.prefix().await.map_err(|e| e.to_string())? else {
                    return Ok(Answer::Frames(frames));
                };
                let header_bytes = recv
                    .header_bytes(prefix)
                    .await
                    .map_err(|e| format!("answer frame: {e}"))?;
                match split_error(header_bytes).map_err(|e| format!("answer header: {e}"))? {
                    Err(error) => return Ok(Answer::Error(error)),
                    Ok(header) => {
                        let body = recv
                            .body(prefix, wire::MAX_BODY_BYTES)
                            .await
                            .map_err(|e| format!("answer frame: {e}"))?;
                        frames.push((header, body));
                    }
                }
            }
        };
        let answer = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?;
        // Whatever we did not send is not coming.
        send.finish();
        answer
    }

    /// One request frame, then the end of the stream.
    ///
    /// # Errors
    /// As [`Probe::raw`].
    pub(super) async fn request(&self, request: &Request, body: &[u8]) -> Result<Answer, String> {
        self.raw(&wire::encode_frame(&request.to_header(), body), true)
            .await
    }

    /// A frame built from a raw header text and a body.
    pub(super) fn frame(header: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + header.len() + body.len());
        out.extend_from_slice(&(header.len() as u32).to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(header);
        out.extend_from_slice(body);
        out
    }
}

/// A fresh recipient: a random control principal and `rkid` secret.
pub(super) struct Recipient {
    pub(super) key: SigningKey,
    pub(super) secret: [u8; 32],
    pub(super) keys: RecipientKeys,
}

impl Recipient {
    /// Fresh keys for `carrier` at `generation`.
    pub(super) fn fresh(carrier: &CarrierId, generation: u64) -> Recipient {
        let mut rng = rand::rng();
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let mut secret = [0u8; 32];
        rng.fill_bytes(&mut secret);
        Recipient::with(carrier, SigningKey::from_bytes(&seed), secret, generation)
    }

    /// Keys from parts.
    pub(super) fn with(
        carrier: &CarrierId,
        key: SigningKey,
        secret: [u8; 32],
        generation: u64,
    ) -> Recipient {
        let keys = RecipientKeys::new(carrier.clone(), key.clone(), secret, generation);
        Recipient { key, secret, keys }
    }

    /// The same `rkid` under another fresh principal, at `generation`.
    pub(super) fn other_principal(&self, generation: u64) -> Recipient {
        let mut seed = [0u8; 32];
        rand::rng().fill_bytes(&mut seed);
        Recipient::with(
            self.keys.carrier(),
            SigningKey::from_bytes(&seed),
            self.secret,
            generation,
        )
    }

    /// The queue address.
    pub(super) fn rkid(&self) -> Rkid {
        *self.keys.rkid()
    }

    /// The principal's `did:key`.
    pub(super) fn principal(&self) -> DidKey {
        self.keys.principal()
    }
}

/// The signed bytes of `object` (a proof without `sig`) under `key`: JCS
/// of the object with `sig` added, as a conforming client sends it.
pub(super) fn sign_object(key: &SigningKey, mut object: Object) -> Vec<u8> {
    let input = rltp_proofs::jcs::canonicalize(&Value::Object(object.clone())).unwrap_or_default();
    object.insert(field::SIG, multibase_z(&key.sign(&input).to_bytes()));
    rltp_proofs::jcs::canonicalize(&Value::Object(object)).unwrap_or_default()
}

/// A fresh challenge for `(rkid, purpose)` and, for register/rebind, the
/// opened address challenge; `Err` names a refusal or a fault.
pub(super) async fn issue(
    probe: &Probe,
    who: &Recipient,
    purpose: Purpose,
) -> Result<([u8; 32], Option<[u8; 32]>, u64), String> {
    let rkid = who.rkid();
    match probe.client.challenge(&rkid, purpose).await {
        Ok(ChallengeAnswer::Issued {
            principal_challenge,
            address_challenge,
            expires_at,
        }) => {
            let address = match address_challenge {
                Some(sealed) => Some(
                    open_address_challenge(&sealed, &who.secret, &probe.carrier, &rkid, purpose)
                        .map_err(|e| format!("address challenge: {e}"))?,
                ),
                None => None,
            };
            Ok((principal_challenge, address, expires_at))
        }
        Ok(ChallengeAnswer::Refused(v)) => Err(format!("challenge refused: {v}")),
        Err(e) => Err(format!("challenge: {e}")),
    }
}

/// The unsigned registration proof object of `who` at its generation over
/// a fresh challenge, and the challenge's expiry.
pub(super) async fn registration_object(
    probe: &Probe,
    who: &Recipient,
    purpose: Purpose,
) -> Result<(Object, u64), String> {
    let (principal_challenge, address, expires_at) = issue(probe, who, purpose).await?;
    let address = address.ok_or("the challenge carries no addressChallenge")?;
    let unsigned = UnsignedProof::registration(
        purpose,
        probe.carrier.clone(),
        who.rkid(),
        who.keys.generation(),
        principal_challenge,
        address,
    )
    .map_err(|e| e.to_string())?;
    Ok((unsigned.to_object(&who.principal()), expires_at))
}

/// The unsigned session (collect/conclude) proof object of `who` over a
/// fresh challenge.
pub(super) async fn session_object(
    probe: &Probe,
    who: &Recipient,
    purpose: Purpose,
) -> Result<Object, String> {
    let (principal_challenge, _, _) = issue(probe, who, purpose).await?;
    let unsigned = UnsignedProof::session(
        purpose,
        probe.carrier.clone(),
        who.rkid(),
        principal_challenge,
    )
    .map_err(|e| e.to_string())?;
    Ok(unsigned.to_object(&who.principal()))
}

/// A signed session proof of `who` over a fresh challenge.
pub(super) async fn session_proof(
    probe: &Probe,
    who: &Recipient,
    purpose: Purpose,
) -> Result<Vec<u8>, String> {
    Ok(sign_object(
        &who.key,
        session_object(probe, who, purpose).await?,
    ))
}

/// Presents register/rebind proof bytes; the verdict, strictly parsed.
pub(super) async fn present(probe: &Probe, proof: &[u8]) -> Result<Verdict, String> {
    probe
        .client
        .register_proof(proof)
        .await
        .map_err(|e| format!("register: {e}"))
}

/// Registers `who` (a fresh challenge, both proofs), retrying a retriable
/// refusal a few times; the verdict.
pub(super) async fn register(probe: &Probe, who: &Recipient) -> Result<Verdict, String> {
    let mut last = None;
    for attempt in 0..5u32 {
        let (object, _) = registration_object(probe, who, Purpose::Register).await?;
        let verdict = present(probe, &sign_object(&who.key, object)).await?;
        if !verdict.retriable() {
            return Ok(verdict);
        }
        last = Some(verdict);
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    Err(format!(
        "still {} after 5 attempts",
        last.map_or("refused", |v| v.as_str())
    ))
}

/// 32 random bytes.
pub(super) fn random32() -> [u8; 32] {
    let mut out = [0u8; 32];
    rand::rng().fill_bytes(&mut out);
    out
}

/// `got == expected`, or a message saying both.
pub(super) fn expect<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: T,
    expected: T,
) -> Result<String, String> {
    if got == expected {
        Ok(format!("{what}: {got:?}"))
    } else {
        Err(format!("{what}: expected {expected:?}, got {got:?}"))
    }
}
