//! The demo's last step: two parties on the demo's carrier, and a sender
//! that reaches `delivered` (Delivery §4.2, §6.1, §6.2; `PROTOCOL.md` §14)
//! — with the `party`, `send --party` and `collect` commands' own code.
//!
//! Alice and Bob each get a party file (fresh pair contexts, cards whose
//! delivery hint names the demo carrier) holding the other's card, and
//! register their queues. Alice seals a credential delivery to Bob's
//! `rkid`; it is admitted and recorded in her sent-register. Bob's collect
//! runs §6.2, commits effect + cache entry + acknowledgement, concludes and
//! deposits the acknowledgement into Alice's queue; Alice's collect checks
//! it (§4.2) and her sent-register reads `delivered`.

use std::path::Path;
use std::time::Duration;

use rltp_client::clock::WallClock;
use rltp_client::{Client, ConnectOptions, Link, RetryPolicy, Sender, SenderStatus};
use rltp_party::hint::DeliveryHint;
use rltp_party::relationship::Relationship;
use rltp_party::sender::SenderStatus as PartyStatus;
use rltp_proofs::json::Value;
use rltp_server::config::Config;
use rltp_server::service::Server;

use super::collect::Collector;
use super::keys::KeyFile;
use super::output::Output;
use super::party::{self, PartyFile};
use super::receive::PartyReceiver;

/// A fresh party at `path` whose card names `hint`.
fn new_party(config: &Config, hint: &DeliveryHint, now: u64) -> Result<PartyFile, String> {
    let mut root = [0u8; 32];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut root);
    let created = rltp_proofs::declaration::rfc3339_utc(now);
    let relationship = Relationship::create(
        &root,
        &mut rand::rng(),
        std::slice::from_ref(hint),
        &created,
    )
    .map_err(|e| e.to_string())?;
    Ok(PartyFile {
        carrier: config.carrier.clone(),
        relationship,
    })
}

/// Registers the party file at `path` over `client`.
async fn register(client: &Client, path: &Path) -> Result<KeyFile, String> {
    let keys = KeyFile::load(path).map_err(|f| f.message)?;
    let outcome = super::register::register(client, &keys, None)
        .await
        .map_err(|f| f.message)?;
    if outcome.verdict() != rltp_wire::verdict::Verdict::Registered {
        return Err(format!("register: verdict {}", outcome.verdict()));
    }
    Ok(keys)
}

/// One party's `collect --conclude`, over `options`, printing nothing.
async fn collect(options: &ConnectOptions, path: &Path, dir: &Path) -> Result<u64, String> {
    let keys = KeyFile::load(path).map_err(|f| f.message)?;
    let receiver = PartyReceiver::open(path).map_err(|f| f.message)?;
    let link = Link::new(options.clone());
    let quiet = Output::quiet("demo");
    let mut collector = Collector::new(&keys, link, dir, true, quiet, Duration::from_secs(10))
        .with_party(&receiver);
    let result = collector.collect_all().await;
    let summary = collector.close().await;
    result.map_err(|f| f.message)?;
    if !summary.clean() || summary.failed != 0 {
        return Err(format!("collect: {summary:?}"));
    }
    Ok(summary.written)
}

/// The round trip; the step's lines.
///
/// # Errors
/// What deviated, for the step's `reason`.
pub async fn round_trip(
    server: &Server,
    config: &Config,
    options: &ConnectOptions,
    client: &Client,
    dir: &Path,
) -> Result<Vec<String>, String> {
    let hint: DeliveryHint = format!(
        "rltp+quic://{}#{}",
        server.local_addr(),
        server.fingerprint()
    )
    .parse()
    .map_err(|e| format!("the demo carrier's hint: {e}"))?;
    let now = WallClock::from_env().now_ms();
    let mut alice = new_party(config, &hint, now)?;
    let mut bob = new_party(config, &hint, now)?;
    let card = |p: &PartyFile| p.relationship.own_card().cloned().ok_or("no own card");
    let (alice_card, bob_card) = (card(&alice)?, card(&bob)?);
    alice.relationship.set_counterpart(bob_card);
    bob.relationship.set_counterpart(alice_card);
    let (alice_path, bob_path) = (dir.join("alice.party.json"), dir.join("bob.party.json"));
    for (p, path) in [(&alice, &alice_path), (&bob, &bob_path)] {
        p.save(path, false).map_err(|f| f.message)?;
        register(client, path).await?;
    }

    let document =
        Value::Object(party::credential_delivery(&alice.relationship, now).map_err(|f| f.message)?);
    let to = bob.relationship.rkid();
    let sealed = super::send::seal_value(&document, &to).map_err(|e| e.to_string())?;
    let jcs = rltp_proofs::jcs::canonicalize(&document).map_err(|e| e.to_string())?;
    let recorder =
        party::SentRecorder::record(&alice_path, &jcs, &sealed.deposit.to_multibase(), &to)
            .map_err(|f| f.message)?;
    if recorder.entry().is_none() {
        return Err("the credential delivery was not recorded in the sent-register".into());
    }
    let mut sender = Sender::with_client(options.clone(), client.clone());
    let status = sender
        .send(&to, &sealed.envelope, RetryPolicy::FALLBACK, |_| {})
        .await
        .map_err(|e| e.to_string())?;
    if !matches!(status, SenderStatus::Accepted { .. }) {
        return Err(format!("send: status {status}"));
    }
    drop(recorder);

    let acknowledged = collect(options, &bob_path, dir).await?;
    let acks = collect(options, &alice_path, dir).await?;
    let sent = party::open_store(&alice_path)
        .map_err(|f| f.message)?
        .sent_deposits()
        .map_err(|e| e.to_string())?;
    match sent.as_slice() {
        [one] if one.entry.status == PartyStatus::Delivered && (acknowledged, acks) == (1, 1) => {
            Ok(vec![
                "alice -> bob encounter-credential-delivery: accepted".to_owned(),
                "bob: stage 9 unique, committed, concluded, ack deposited".to_owned(),
                format!(
                    "alice: sender-status delivered ({})",
                    one.transition.as_deref().unwrap_or("-")
                ),
            ])
        }
        other => Err(format!(
            "bob committed {acknowledged}, alice took {acks}, register {other:?}"
        )),
    }
}
