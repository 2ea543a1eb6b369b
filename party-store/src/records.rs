//! The stored forms of the party store's records: JSON (camelCase), one
//! value per key. Byte-exact parts (an acknowledgement's JCS) are kept as
//! the UTF-8 text they are, so a re-send is the stored bytes unchanged
//! (Delivery §4.2, §6.2 stage 4).

use rltp_party::registry::AckClass;
use rltp_party::sender::{SenderStatus, SentEntry};
use rltp_party::store::{CompletedEntry, Effect, StoredAck};
use rltp_proofs::multikey::{DidKey, Rkid};
use serde::{Deserialize, Serialize};

use crate::StoreFault;

/// §4.2: a kept acknowledgement (also an outbox item).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AckRecord {
    /// The ack document's JCS, as text.
    pub document: String,
    /// Its digest.
    pub digest: String,
    /// The `rkid` it is sealed to (Multikey).
    pub seal_to: Option<String>,
}

impl AckRecord {
    pub(crate) fn of(ack: &StoredAck) -> Result<AckRecord, StoreFault> {
        Ok(AckRecord {
            document: String::from_utf8(ack.document.clone())
                .map_err(|_| StoreFault::Record("an acknowledgement that is not utf-8"))?,
            digest: ack.digest.clone(),
            seal_to: ack.seal_to.as_ref().map(Rkid::to_multikey),
        })
    }

    pub(crate) fn to_ack(&self) -> Result<StoredAck, StoreFault> {
        let seal_to = match &self.seal_to {
            Some(text) => {
                Some(Rkid::parse(text).map_err(|_| StoreFault::Record("an ack's sealTo"))?)
            }
            None => None,
        };
        Ok(StoredAck {
            document: self.document.clone().into_bytes(),
            digest: self.digest.clone(),
            seal_to,
        })
    }
}

/// §6.2 stage 4: a completed-effect cache entry, keyed by digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CompletedRecord {
    pub type_uri: String,
    pub committed_at: u64,
    pub ack: Option<AckRecord>,
}

impl CompletedRecord {
    pub(crate) fn of(entry: &CompletedEntry) -> Result<CompletedRecord, StoreFault> {
        Ok(CompletedRecord {
            type_uri: entry.type_uri.clone(),
            committed_at: entry.committed_at,
            ack: entry.ack.as_ref().map(AckRecord::of).transpose()?,
        })
    }

    pub(crate) fn to_entry(&self, digest: &str) -> Result<CompletedEntry, StoreFault> {
        Ok(CompletedEntry {
            digest: digest.to_owned(),
            type_uri: self.type_uri.clone(),
            committed_at: self.committed_at,
            ack: self.ack.as_ref().map(AckRecord::to_ack).transpose()?,
        })
    }
}

/// A committed effect (the durable buffer of §4.3, the application's
/// record of §4.1, or the §6.1 status update), keyed by document digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "effect", deny_unknown_fields)]
pub(crate) enum EffectRecord {
    Buffered { credential: String },
    Application { record: Vec<u8> },
    SenderStatus { acked: String },
}

impl EffectRecord {
    pub(crate) fn of(effect: &Effect) -> EffectRecord {
        match effect {
            Effect::Buffered { credential } => EffectRecord::Buffered {
                credential: String::from_utf8_lossy(credential).into_owned(),
            },
            Effect::Application { record } => EffectRecord::Application {
                record: record.clone(),
            },
            Effect::SenderStatus { acked } => EffectRecord::SenderStatus {
                acked: acked.clone(),
            },
        }
    }
}

/// One sent-register entry (§4.2, §6.1), keyed by document digest, with
/// where it went: the deposit id and the queue address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SentRecord {
    pub thread_id: String,
    pub issuer: String,
    pub recipient: String,
    pub type_uri: String,
    pub class: String,
    pub status: SenderStatus,
    pub sent_at: u64,
    pub deposit: Option<String>,
    pub rkid: Option<String>,
    /// How it became `delivered`: `accepted->delivered` or
    /// `failed->delivered` (§6.1: a late acknowledgement is surfaced).
    pub transition: Option<String>,
}

fn class_of(text: &str) -> Result<AckClass, StoreFault> {
    [AckClass::Signature, AckClass::DesignatedVerifier]
        .into_iter()
        .find(|c| c.as_str() == text)
        .ok_or(StoreFault::Record("a sent entry's class"))
}

impl SentRecord {
    pub(crate) fn of(entry: &SentEntry) -> SentRecord {
        SentRecord {
            thread_id: entry.thread_id.clone(),
            issuer: entry.issuer.to_did_key(),
            recipient: entry.recipient.to_did_key(),
            type_uri: entry.type_uri.clone(),
            class: entry.class.as_str().to_owned(),
            status: entry.status.clone(),
            sent_at: entry.sent_at,
            deposit: None,
            rkid: None,
            transition: None,
        }
    }

    pub(crate) fn to_entry(&self, digest: &str) -> Result<SentEntry, StoreFault> {
        let key = |text: &str| DidKey::parse(text).map_err(|_| StoreFault::Record("a sent anchor"));
        Ok(SentEntry {
            digest: digest.to_owned(),
            thread_id: self.thread_id.clone(),
            issuer: key(&self.issuer)?,
            recipient: key(&self.recipient)?,
            type_uri: self.type_uri.clone(),
            class: class_of(&self.class)?,
            status: self.status.clone(),
            sent_at: self.sent_at,
        })
    }
}
