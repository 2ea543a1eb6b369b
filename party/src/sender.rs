//! The sender side, sans-IO: the sent-register entry (§4.2 "a document this
//! sender actually sent on that thread"), the §4.2 consistency checks on a
//! received acknowledgement, and the §6.1 status trias.
//!
//! The trias is closed: `accepted`, `delivered`, `failed(reason)` — no
//! acceptance state, and the pre-transport report (`awaiting-transport(…)`)
//! is not a state. `delivered` means arrival and durable recording on the
//! recipient's device, never acceptance or a human act (§4.2, Encounter
//! 7.4). A valid late acknowledgement after `failed` moves to `delivered`,
//! and that transition is surfaced ([`Transition::LateDelivered`]).

use std::fmt;

use rltp_proofs::Ms;
use rltp_proofs::multikey::DidKey;
use serde::{Deserialize, Serialize};

use crate::ack::{AckProofError, TupleKeys, verify_proof};
use crate::document::Profiled;
use crate::registry::AckClass;

/// §6.1: the closed set of sender failure reasons.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SenderFailure {
    /// `unroutable`.
    Unroutable,
    /// `oversize`.
    Oversize,
    /// `expired-by-adapter-policy`: the adapter's declared give-up bound.
    ExpiredByAdapterPolicy,
    /// `rejected-by-receiver(<receiver reason>)`, where an adapter conveys one.
    RejectedByReceiver(String),
}

impl fmt::Display for SenderFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SenderFailure::Unroutable => f.write_str("unroutable"),
            SenderFailure::Oversize => f.write_str("oversize"),
            SenderFailure::ExpiredByAdapterPolicy => f.write_str("expired-by-adapter-policy"),
            SenderFailure::RejectedByReceiver(reason) => {
                write!(f, "rejected-by-receiver({reason})")
            }
        }
    }
}

/// §6.1: the sender's status of one taken submission.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SenderStatus {
    /// `accepted`: the service durably buffered it; delivery is owed.
    Accepted,
    /// `delivered`: a valid acknowledgement referencing its digest arrived.
    Delivered,
    /// `failed(reason)`: the service gave up.
    Failed(SenderFailure),
}

impl fmt::Display for SenderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SenderStatus::Accepted => f.write_str("accepted"),
            SenderStatus::Delivered => f.write_str("delivered"),
            SenderStatus::Failed(reason) => write!(f, "failed({reason})"),
        }
    }
}

/// What a valid acknowledgement did to a status (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// `accepted` → `delivered`.
    Delivered,
    /// `failed(…)` → `delivered`: a late valid acknowledgement. §6.1:
    /// implementations MUST surface this transition.
    LateDelivered,
    /// Already `delivered` (a second, distinct acknowledgement document for
    /// the same digest): nothing changes.
    AlreadyDelivered,
}

impl Transition {
    /// A short spelling for reports and vectors.
    pub const fn as_str(self) -> &'static str {
        match self {
            Transition::Delivered => "accepted->delivered",
            Transition::LateDelivered => "failed->delivered",
            Transition::AlreadyDelivered => "delivered->delivered",
        }
    }
}

impl SenderStatus {
    /// §6.1: the status after a valid acknowledgement, and the transition.
    pub fn on_valid_ack(&self) -> (SenderStatus, Transition) {
        let transition = match self {
            SenderStatus::Accepted => Transition::Delivered,
            SenderStatus::Failed(_) => Transition::LateDelivered,
            SenderStatus::Delivered => Transition::AlreadyDelivered,
        };
        (SenderStatus::Delivered, transition)
    }

    /// §6.1 / §5a.8: the service gave up with `reason`; only `accepted`
    /// moves (a `delivered` or already `failed` status stays).
    pub fn on_give_up(&self, reason: SenderFailure) -> SenderStatus {
        match self {
            SenderStatus::Accepted => SenderStatus::Failed(reason),
            other => other.clone(),
        }
    }
}

/// One sent-register entry: what §4.2's consistency checks need of a
/// document this party sent, kept at least `key-retention`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentEntry {
    /// The document digest (§2) — the acknowledgement's `ref`.
    pub digest: String,
    /// Its `threadId`.
    pub thread_id: String,
    /// Its `issuer`: this party's pair anchor it was sent under.
    pub issuer: DidKey,
    /// Its `recipient`: the counterpart's pair anchor.
    pub recipient: DidKey,
    /// Its `type`.
    pub type_uri: String,
    /// The class of its payload (§4.4), which selects the ack's proof form.
    pub class: AckClass,
    /// The §6.1 status.
    pub status: SenderStatus,
    /// When it entered the trias (`accepted`), for retention.
    pub sent_at: Ms,
}

impl SentEntry {
    /// The entry for a document this party sent and the carrier admitted
    /// (status `accepted`), or `None` for a type that earns no
    /// acknowledgement (a `delivery-ack` is terminal) or that this contract
    /// does not classify.
    pub fn accepted(document: &Profiled, digest: &str, sent_at: Ms) -> Option<SentEntry> {
        Some(SentEntry {
            digest: digest.to_owned(),
            thread_id: document.thread_id.clone(),
            issuer: document.issuer,
            recipient: document.recipient,
            type_uri: document.type_uri.clone(),
            class: AckClass::of_type(&document.type_uri)?,
            status: SenderStatus::Accepted,
            sent_at,
        })
    }
}

/// Why a received acknowledgement fails §4.2's consistency checks. Every
/// one is `failed(validation-failed)`: the ack is discarded and the
/// sender's status is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckRejection {
    /// `ref` is no document this party sent (or one whose entry has
    /// expired).
    #[error("ref names no document this party sent")]
    RefNeverSent,
    /// `threadId` differs from the acknowledged document's.
    #[error("threadId differs from the acknowledged document's")]
    WrongThread,
    /// `issuer` is not the acknowledged document's `recipient`.
    #[error("issuer is not the acknowledged document's recipient")]
    WrongIssuer,
    /// `recipient` is not the acknowledged document's `issuer`.
    #[error("recipient is not the acknowledged document's issuer")]
    WrongRecipient,
    /// The proof is missing, foreign, the wrong class form, or does not
    /// verify.
    #[error("proof: {0}")]
    Proof(#[from] AckProofError),
}

/// §4.2 consistency on receipt (MUST): `ref` matches a document this
/// sender sent (`sent`, looked up by `ref`) **on that thread**; `issuer` =
/// its `recipient`; `recipient` = its `issuer`; and the proof verifies in
/// the form its class selects — under `issuer` (signature) or under the
/// arrival tuple's ack key (MAC).
///
/// # Errors
/// The first failing check as an [`AckRejection`].
pub fn check_ack(
    ack: &Profiled,
    sent: Option<&SentEntry>,
    keys: TupleKeys<'_>,
) -> Result<(), AckRejection> {
    let sent = sent.ok_or(AckRejection::RefNeverSent)?;
    if ack.thread_id != sent.thread_id {
        return Err(AckRejection::WrongThread);
    }
    if ack.issuer != sent.recipient {
        return Err(AckRejection::WrongIssuer);
    }
    if ack.recipient != sent.issuer {
        return Err(AckRejection::WrongRecipient);
    }
    verify_proof(ack, sent.class, keys)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trias_moves_only_as_section_6_1_says() {
        let failed = SenderStatus::Failed(SenderFailure::ExpiredByAdapterPolicy);
        assert_eq!(failed.to_string(), "failed(expired-by-adapter-policy)");
        assert_eq!(
            SenderStatus::Accepted.on_valid_ack(),
            (SenderStatus::Delivered, Transition::Delivered)
        );
        assert_eq!(
            failed.on_valid_ack(),
            (SenderStatus::Delivered, Transition::LateDelivered)
        );
        assert_eq!(
            SenderStatus::Delivered.on_valid_ack(),
            (SenderStatus::Delivered, Transition::AlreadyDelivered)
        );
        assert_eq!(
            SenderStatus::Accepted.on_give_up(SenderFailure::ExpiredByAdapterPolicy),
            failed
        );
        assert_eq!(
            SenderStatus::Delivered.on_give_up(SenderFailure::ExpiredByAdapterPolicy),
            SenderStatus::Delivered
        );
        assert_eq!(
            SenderStatus::Failed(SenderFailure::RejectedByReceiver("x".into())).to_string(),
            "failed(rejected-by-receiver(x))"
        );
    }
}
