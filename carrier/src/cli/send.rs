//! `rltp-carrier send`: seal one document to an `rkid` and submit it until
//! it has a §6.1 state (§5, §5a.5, §6.1, `PROTOCOL.md` §9).
//!
//! 1. The file is read with the strict reader, canonicalized (JCS), and
//!    its document digest computed (§2: over `JCS(document)`, never over
//!    ciphertext). A document whose JCS exceeds 65 536 bytes cannot be
//!    sealed: `failed(oversize)` without any submission (§5, §6.1).
//! 2. The JCS bytes are sealed to the `rkid` (§5, fresh ephemeral key and
//!    nonce); the deposit id is the sha2-256 of the envelope bytes.
//! 3. The carrier's declaration is fetched and verified; its
//!    `status-horizon` and `give-up-horizon` drive the retrying sender
//!    ([`crate::client::Sender`]). If the carrier cannot be reached to
//!    read them, the sender reports at the shortest `status-horizon` any
//!    carrier may declare (PT5S, the §11 floor) and gives up after the
//!    shortest `give-up-horizon` (P1D); `--give-up-after` shortens either
//!    case.
//! 4. Every event is printed as it happens: `awaiting-transport(…)`
//!    reports within the status horizon, then `accepted` or `failed(…)`.
//!
//! Exit status 0 for `accepted`, 1 for `failed(…)`.

use super::{CarrierArgs, Failure, exit};
use crate::client::{Client, SendEvent, Sender, SenderStatus};
use crate::client::{FailReason, RetryPolicy};
use rltp_proofs::json::{self, Number, Object, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{MAX_PLAINTEXT_BYTES, SealError};
use rltp_storage::DepositId;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `status-horizon` used when the carrier's declaration cannot be read:
/// PT5S, the §11 floor, so the reports meet any carrier's declared horizon.
pub const FALLBACK_STATUS_HORIZON: Duration = Duration::from_secs(5);
/// `give-up-horizon` used when the carrier's declaration cannot be read:
/// P1D, the §11 floor.
pub const FALLBACK_GIVE_UP_HORIZON: Duration = Duration::from_secs(86_400);

/// `send`: seal and submit one document.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: CarrierArgs,
    /// The recipient's queue address (X25519 Multikey `z6LS…`).
    #[arg(long)]
    to: String,
    /// Give up sooner than the carrier's give-up-horizon (Access §7.3
    /// duration, e.g. `PT30S`): the sender's own declared bound (§6.1).
    #[arg(long)]
    give_up_after: Option<String>,
    /// One JSON object per line (for scripts) instead of progress lines.
    #[arg(long)]
    json: bool,
    /// The document (a JSON object, read strictly).
    file: PathBuf,
}

/// A document sealed for one `rkid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The document digest (§2): `u` multibase sha2-256 of `JCS(document)`.
    pub document_digest: String,
    /// The deposit id: sha2-256 of the envelope bytes.
    pub deposit: DepositId,
    /// The §5 envelope bytes (JCS).
    pub envelope: Vec<u8>,
}

/// Why a document could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealDocumentError {
    /// Not strict JSON, or JCS failed.
    #[error("the document is not strict json: {0}")]
    NotJson(String),
    /// JCS of the document exceeds 65 536 bytes (§5): `failed(oversize)`.
    #[error("the document's jcs is {0} bytes, above the §5 maximum of 65536")]
    Oversize(usize),
    /// The seal itself failed (a low-order `rkid`).
    #[error("cannot seal to this rkid: {0}")]
    Seal(String),
}

/// Seals `document` to `rkid` (§5): JCS, digest, seal with fresh randomness.
///
/// # Errors
/// [`SealDocumentError`].
pub fn seal_value(document: &Value, rkid: &Rkid) -> Result<Sealed, SealDocumentError> {
    let jcs = rltp_proofs::jcs::canonicalize(document)
        .map_err(|e| SealDocumentError::NotJson(e.to_string()))?;
    if jcs.len() > MAX_PLAINTEXT_BYTES {
        return Err(SealDocumentError::Oversize(jcs.len()));
    }
    let document_digest = rltp_proofs::encoding::document_digest(document)
        .map_err(|e| SealDocumentError::NotJson(e.to_string()))?;
    let envelope = rltp_proofs::seal::seal(&jcs, rkid, &mut rand::rng())
        .map_err(|e| match e {
            SealError::PlaintextTooLarge { len } => SealDocumentError::Oversize(len),
            e => SealDocumentError::Seal(e.to_string()),
        })?
        .to_bytes();
    Ok(Sealed {
        document_digest,
        deposit: DepositId::of(&envelope),
        envelope,
    })
}

/// Reads `bytes` with the strict reader, then [`seal_value`].
///
/// # Errors
/// [`SealDocumentError`].
pub fn seal_document(bytes: &[u8], rkid: &Rkid) -> Result<Sealed, SealDocumentError> {
    let document = json::parse(bytes).map_err(|e| SealDocumentError::NotJson(e.to_string()))?;
    seal_value(&document, rkid)
}

/// The retry policy for `client`'s carrier: its declared horizons, or the
/// §11 floors when the declaration cannot be fetched; `cap` shortens the
/// give-up horizon. Returns the policy and where it came from.
///
/// # Errors
/// [`Failure::refused`] when the carrier serves a declaration that does
/// not verify (nothing is sent to such a carrier).
pub async fn policy(
    client: Option<&Client>,
    cap: Option<Duration>,
) -> Result<(RetryPolicy, &'static str), Failure> {
    let fallback = RetryPolicy {
        give_up_horizon: FALLBACK_GIVE_UP_HORIZON,
        status_horizon: FALLBACK_STATUS_HORIZON,
    };
    let (mut policy, source) = match client {
        None => (fallback, "fallback"),
        Some(client) => match client.declaration().await {
            Ok(fetched) => (
                RetryPolicy::from_constants(fetched.declaration.constants()),
                "declared",
            ),
            Err(e) if e.is_transport() || e.is_retriable() => (fallback, "fallback"),
            Err(e) => return Err(Failure::refused(e.to_string())),
        },
    };
    if let Some(cap) = cap {
        policy.give_up_horizon = policy.give_up_horizon.min(cap);
    }
    Ok((policy, source))
}

/// Whether the first connection failed in the TLS handshake (a pin or
/// certificate mismatch): a configuration fault that retrying cannot cure,
/// reported at once rather than as `awaiting-transport(…)` for a day.
/// The client library reports it as transport text, so this reads quinn's
/// wording; should that change, the sender merely retries as for an
/// unreachable carrier.
fn handshake_refused(e: &crate::client::ClientError) -> bool {
    matches!(e, crate::client::ClientError::Transport(text)
        if text.contains("cryptographic handshake failed"))
}

/// Prints events as progress lines or JSON lines.
struct Output {
    json: bool,
}

impl Output {
    fn emit(&self, event: &str, fields: &[(&str, Value)], human: String) {
        if self.json {
            let mut object = Object::new();
            object.insert("event", event);
            for (name, value) in fields {
                object.insert(*name, value.clone());
            }
            match rltp_proofs::jcs::canonicalize_string(&Value::Object(object)) {
                Ok(line) => println!("{line}"),
                Err(e) => eprintln!("rltp-carrier send: cannot print an event: {e}"),
            }
        } else {
            println!("{human}");
        }
    }

    fn event(&self, event: &SendEvent) {
        match event {
            SendEvent::Attempt { number } => self.emit(
                "attempt",
                &[("number", Number::from_u64(u64::from(*number)).into())],
                format!("attempt {number}"),
            ),
            SendEvent::Verdict(v) => self.emit(
                "verdict",
                &[
                    ("verdict", v.as_str().into()),
                    ("retriable", Value::Bool(v.retriable())),
                ],
                format!("verdict {v}"),
            ),
            SendEvent::Report(status) => self.emit(
                "status",
                &[("status", status.to_string().into())],
                format!("status {status}"),
            ),
            SendEvent::Backoff(d) => {
                let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                self.emit(
                    "backoff",
                    &[("ms", Number::from_u64(ms).into())],
                    format!("backoff {ms} ms"),
                );
            }
        }
    }
}

async fn execute(args: &Args) -> Result<u8, Failure> {
    let out = Output { json: args.json };
    let rkid = Rkid::parse(&args.to).map_err(|e| {
        Failure::usage(format!("--to {:?} is not an x25519 multikey: {e}", args.to))
    })?;
    let cap = match &args.give_up_after {
        Some(text) => Some(Duration::from_millis(
            rltp_proofs::constants::parse_duration(text)
                .map_err(|e| Failure::usage(format!("--give-up-after: {e}")))?,
        )),
        None => None,
    };
    let bytes = super::read_file(&args.file)?;
    let sealed = match seal_document(&bytes, &rkid) {
        Ok(sealed) => sealed,
        Err(SealDocumentError::Oversize(len)) => {
            let status = SenderStatus::Failed(FailReason::Oversize);
            out.emit(
                "final",
                &[
                    ("status", status.to_string().into()),
                    ("jcsBytes", Number::from_u64(len as u64).into()),
                ],
                format!(
                    "status {status} (document jcs is {len} bytes, above 65536; nothing was sent)"
                ),
            );
            return Ok(exit::REFUSED);
        }
        Err(e) => {
            return Err(Failure::usage(format!("{}: {e}", args.file.display())));
        }
    };
    let digest = sealed.document_digest.clone();
    let deposit = sealed.deposit.to_multibase();
    out.emit(
        "sealed",
        &[
            ("digest", digest.clone().into()),
            ("deposit", deposit.clone().into()),
            ("rkid", rkid.to_multikey().into()),
            (
                "envelopeBytes",
                Number::from_u64(sealed.envelope.len() as u64).into(),
            ),
        ],
        format!(
            "document-digest {digest}\ndeposit {deposit}\nenvelope-bytes {}",
            sealed.envelope.len()
        ),
    );

    crate::tls::install_crypto_provider();
    let options = args.carrier.options()?;
    let client = match Client::connect(&options).await {
        Ok(client) => Some(client),
        Err(e) if handshake_refused(&e) => {
            return Err(Failure::transport(format!(
                "the carrier at {} failed the TLS handshake (wrong --pin?): {e}",
                args.carrier.server
            )));
        }
        Err(e) if e.is_transport() || e.is_retriable() => None,
        Err(e) => return Err(Failure::from(e)),
    };
    let (policy, source) = policy(client.as_ref(), cap).await?;
    let status_ms = u64::try_from(policy.status_horizon.as_millis()).unwrap_or(u64::MAX);
    let give_up_ms = u64::try_from(policy.give_up_horizon.as_millis()).unwrap_or(u64::MAX);
    out.emit(
        "policy",
        &[
            ("source", source.into()),
            ("statusHorizonMs", Number::from_u64(status_ms).into()),
            ("giveUpHorizonMs", Number::from_u64(give_up_ms).into()),
        ],
        format!("policy {source} status-horizon {status_ms} ms give-up-horizon {give_up_ms} ms"),
    );
    // A handle on the first connection, to close it when done: a process
    // that exits without closing leaves the carrier waiting on its streams.
    let first = client.clone();
    let mut sender = match client {
        Some(client) => Sender::with_client(options, client),
        None => Sender::new(options),
    };
    let status = sender
        .send(&rkid, &sealed.envelope, policy, |event| out.event(&event))
        .await;
    drop(sender);
    if let Some(client) = first {
        client.close().await;
    }
    let status = status.map_err(Failure::from)?;
    let accepted = matches!(status, SenderStatus::Accepted { .. });
    out.emit(
        "final",
        &[
            ("status", status.to_string().into()),
            ("deposit", deposit.clone().into()),
            ("digest", digest.clone().into()),
        ],
        format!("final {status} deposit {deposit} digest {digest}"),
    );
    Ok(if accepted { exit::OK } else { exit::REFUSED })
}

/// Runs `send`.
pub async fn run(args: Args) -> ExitCode {
    super::finish("send", execute(&args).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seal_sample_keeps_its_digest_and_opens() {
        let secret = [10u8; 32];
        let rkid = Rkid::from_bytes(
            x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(secret)).to_bytes(),
        );
        let document = br#"{"type":"https://real-life.org/trust-tasks/seal-vector-sample/0.1","threadId":"99999999-8888-4777-a666-555555555555","issuer":"did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK","id":"11111111-2222-4333-8444-555555555555","recipient":"did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG","issuedAt":"2026-08-10T12:00:00Z","payload":{"ref":"uEiANDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ","meaning":"received"}}"#;
        let sealed = seal_document(document, &rkid).unwrap();
        assert_eq!(
            sealed.document_digest,
            "uEiAP1JJxup-V-g7lQVzRKJSxPKug1RDGvdI80l4dY8tpeQ"
        );
        assert_eq!(sealed.deposit, DepositId::of(&sealed.envelope));
        let envelope = rltp_proofs::envelope::check_shape(&sealed.envelope, &rkid, 87_557).unwrap();
        let plaintext = rltp_proofs::seal::open(&envelope, &secret).unwrap();
        assert!(plaintext.starts_with(b"{\"id\":\"11111111-2222-4333-8444-555555555555\""));
    }

    #[test]
    fn oversize_and_non_json_documents_are_refused_before_sealing() {
        let rkid = Rkid::from_bytes([9; 32]);
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(65_530));
        assert_eq!(
            seal_document(big.as_bytes(), &rkid),
            Err(SealDocumentError::Oversize(65_538))
        );
        assert!(matches!(
            seal_document(b"{\"a\":1,\"a\":2}", &rkid),
            Err(SealDocumentError::NotJson(_))
        ));
    }
}
