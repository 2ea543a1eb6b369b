//! `rltp-carrier send`: seal one document to an `rkid` and submit it until
//! it has a §6.1 state (§5, §5a.5, §6.1, `PROTOCOL.md` §9, §10).
//!
//! 1. The file is read with the strict reader, canonicalized (JCS), and
//!    its document digest computed (§2: over `JCS(document)`, never over
//!    ciphertext). A document whose JCS exceeds 65 536 bytes cannot be
//!    sealed: `failed(oversize)` without any submission (§5, §6.1).
//! 2. The JCS bytes are sealed to the `rkid` (§5, fresh ephemeral key and
//!    nonce); the deposit id is the sha2-256 of the envelope bytes.
//! 3. **§6.1 on the clock, from the instant the command starts:** until
//!    the carrier's declaration is known the sender reports at the
//!    shortest `status-horizon` any carrier may declare (PT5S, the §11
//!    floor) and would give up after the shortest `give-up-horizon` (P1D);
//!    the first attempt that connects fetches and verifies the declaration
//!    and its horizons are in force from then on. `--give-up-after`
//!    shortens the give-up bound in either case. Connecting, the
//!    handshake, the declaration fetch and every attempt run under the
//!    report ticker and the give-up timer ([`rltp_client::retry`]): a
//!    report comes at least every half horizon whatever the transport
//!    does, and `failed(expired-by-adapter-policy)` comes on its instant.
//! 4. Every event is printed as it happens (`--json`: one object per
//!    line with `elapsedMs`): `sealed`, `policy` (fallback, then
//!    declared), `attempt`, `verdict`, `status` reports, `backoff`, then
//!    `final`.
//!
//! Exit status 0 for `accepted`; 1 for `failed(…)` (also a give-up while
//! the carrier refused retriably); 3 for a give-up while the carrier was
//! unreachable, or a failed TLS handshake (a wrong pin).

use super::output::{Output, ms, n};
use super::{Failure, exit};
use rltp_client::{
    AwaitingReason, FailReason, RetryPolicy, Schedule, SendEvent, Sender, SenderStatus,
};
use rltp_party::sender::SenderFailure;
use rltp_proofs::DepositId;
use rltp_proofs::json::{self, Value};
use rltp_proofs::multikey::Rkid;
use rltp_proofs::seal::{MAX_PLAINTEXT_BYTES, SealError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::Instant;

/// `send`: seal and submit one document.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    carrier: super::CarrierArgs,
    /// The recipient's queue address (X25519 Multikey `z6LS…`); with
    /// `--party`, the counterpart card's `keyAgreement` by default.
    #[arg(long, required_unless_present = "party")]
    to: Option<String>,
    /// A party file (`party new`): the admitted document is recorded in its
    /// sent-register (status `accepted`) for its acknowledgement to move
    /// to `delivered` (§4.2, §6.1; `status --party`).
    #[arg(long)]
    party: Option<PathBuf>,
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

/// Prints the horizons in force: `policy`'s, the give-up shortened by `cap`.
fn policy_event(out: &Output, source: &str, policy: RetryPolicy, cap: Option<Duration>) {
    let schedule = Schedule::new(out.started(), policy, cap);
    let status_ms = ms(schedule.policy.status_horizon);
    let give_up_ms = ms(schedule.give_up_after());
    out.emit(
        "policy",
        &[
            ("source", source.into()),
            ("statusHorizonMs", n(status_ms)),
            ("giveUpHorizonMs", n(give_up_ms)),
        ],
        || format!("policy {source} status-horizon {status_ms} ms give-up-horizon {give_up_ms} ms"),
    );
}

fn send_event(out: &Output, event: &SendEvent, cap: Option<Duration>) {
    match event {
        SendEvent::Attempt { number } => {
            out.emit("attempt", &[("number", n(u64::from(*number)))], || {
                format!("attempt {number}")
            });
        }
        SendEvent::Policy(policy) => policy_event(out, "declared", *policy, cap),
        SendEvent::Verdict(v) => out.emit(
            "verdict",
            &[
                ("verdict", v.as_str().into()),
                ("retriable", Value::Bool(v.retriable())),
            ],
            || format!("verdict {v}"),
        ),
        SendEvent::Failed(detail) => out.emit(
            "transport-failure",
            &[("detail", detail.clone().into())],
            || format!("transport-failure {detail}"),
        ),
        SendEvent::Report(status) => {
            out.emit("status", &[("status", status.to_string().into())], || {
                format!("status {status}")
            });
        }
        SendEvent::Moved(server) => out.emit("moved", &[("server", server.clone().into())], || {
            format!("moved {server}")
        }),
        SendEvent::Backoff(d) => out.emit("backoff", &[("ms", n(ms(*d)))], || {
            format!("backoff {} ms", ms(*d))
        }),
        SendEvent::Connected { server, binding } => out.connected(server, *binding),
    }
}

async fn execute(args: &Args, started: Instant) -> Result<u8, Failure> {
    let out = Output::new("send", args.json, started);
    let rkid = destination(args)?;
    let bytes = super::read_file(&args.file)?;
    let sealed = match seal_document(&bytes, &rkid) {
        Ok(sealed) => sealed,
        Err(SealDocumentError::Oversize(len)) => {
            let status = SenderStatus::Failed(FailReason::Oversize);
            out.emit(
                "final",
                &[
                    ("status", status.to_string().into()),
                    ("jcsBytes", n(len as u64)),
                ],
                || {
                    format!(
                        "status {status} (document jcs is {len} bytes, above 65536; nothing was sent)"
                    )
                },
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
            ("envelopeBytes", n(sealed.envelope.len() as u64)),
        ],
        || {
            format!(
                "document-digest {digest}\ndeposit {deposit}\nenvelope-bytes {}",
                sealed.envelope.len()
            )
        },
    );

    // Recorded before anything leaves (`party::SentRecorder`).
    let recorder = match &args.party {
        Some(party) => Some(super::party::SentRecorder::record(
            party, &bytes, &deposit, &rkid,
        )?),
        None => None,
    };
    rltp_client::tls::install_crypto_provider();
    let link = args.carrier.link()?;
    let cap = args.carrier.give_up_after;
    let mut schedule = Schedule::new(started, RetryPolicy::FALLBACK, cap).learning();
    policy_event(&out, "fallback", RetryPolicy::FALLBACK, cap);
    let mut sender = Sender::over(link);
    let mut awaiting: Option<AwaitingReason> = None;
    let status = sender
        .send_on(&rkid, &sealed.envelope, &mut schedule, |event| {
            if let SendEvent::Report(SenderStatus::AwaitingTransport(reason)) = event {
                awaiting = Some(reason);
            }
            send_event(&out, &event, cap);
        })
        .await;
    // Close the connection: a process that exits without closing leaves
    // the carrier waiting on its streams.
    let server = sender.link().options().server.clone();
    sender.close().await;
    let status = status.map_err(|e| match e {
        rltp_client::ClientError::Handshake(h) => super::handshake_failure(Some(&server), &h),
        rltp_client::ClientError::Declaration(_) => Failure::refused(format!(
            "the carrier at {} serves a declaration that does not verify; nothing was sent: {e}",
            server
        )),
        e => Failure::from(e),
    })?;
    out.emit(
        "final",
        &[
            ("status", status.to_string().into()),
            ("deposit", deposit.clone().into()),
            ("digest", digest.clone().into()),
        ],
        || format!("final {status} deposit {deposit} digest {digest}"),
    );
    if let Some(recorder) = &recorder {
        sent_register(&out, recorder, &status, &digest)?;
    }
    Ok(match status {
        SenderStatus::Accepted { .. } => exit::OK,
        SenderStatus::Failed(FailReason::ExpiredByAdapterPolicy)
            if awaiting.is_some_and(AwaitingReason::is_unreachable) =>
        {
            exit::TRANSPORT
        }
        _ => exit::REFUSED,
    })
}

/// `--party`: the sent-register after the send (`accepted`, the
/// `failed(…)` it ended in, or `not-recorded` for a document that earns
/// no acknowledgement), printed as `sent-register`.
fn sent_register(
    out: &Output,
    recorder: &super::party::SentRecorder,
    status: &SenderStatus,
    digest: &str,
) -> Result<(), Failure> {
    let state = match (recorder.entry(), status) {
        (None, _) => "not-recorded".to_owned(),
        (Some(_), SenderStatus::Failed(reason)) => {
            let reason = match reason {
                FailReason::Unroutable => SenderFailure::Unroutable,
                FailReason::Oversize => SenderFailure::Oversize,
                FailReason::ExpiredByAdapterPolicy => SenderFailure::ExpiredByAdapterPolicy,
            };
            recorder
                .failed(reason)?
                .map_or_else(|| "not-recorded".to_owned(), |s| s.to_string())
        }
        (Some(_), _) => "accepted".to_owned(),
    };
    out.emit(
        "sent-register",
        &[
            ("digest", digest.into()),
            ("senderStatus", state.as_str().into()),
        ],
        || format!("sent-register {state} digest {digest}"),
    );
    Ok(())
}

/// The queue address: `--to`, else the `--party` counterpart's card.
fn destination(args: &Args) -> Result<Rkid, Failure> {
    if let Some(to) = &args.to {
        return Rkid::parse(to)
            .map_err(|e| Failure::usage(format!("--to {to:?} is not an x25519 multikey: {e}")));
    }
    let path = args
        .party
        .as_deref()
        .ok_or_else(|| Failure::usage("give --to RKID or --party FILE"))?;
    let party = super::party::PartyFile::load(path)?;
    party
        .relationship
        .counterpart()
        .map(|card| *card.key_agreement())
        .ok_or_else(|| {
            Failure::usage(format!(
                "{}: no counterpart card is held: run `party trust` or give --to",
                path.display()
            ))
        })
}

/// Runs `send`; its §6.1 clock starts here.
pub async fn run(args: Args) -> ExitCode {
    let started = Instant::now();
    super::finish("send", execute(&args, started).await)
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
