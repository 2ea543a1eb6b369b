//! The checks, one function per contract section, in report order.

mod delivery;
mod registration;

use super::probe::{
    Answer, Probe, Recipient, expect, issue, jcs_text, present, random32, register,
    registration_object, session_object, session_proof, sign_object,
};
use super::{Report, RunError, Target};
use delivery::*;
use registration::*;
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
