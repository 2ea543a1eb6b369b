//! # rltp-party-store: the durable party store
//!
//! The [`PartyStore`] of `rltp-party`, kept in one embedded redb file in
//! the party's data dir, plus what the shell around the sans-IO pipeline
//! needs to keep its promises over crashes:
//!
//! | table | key | what | spec |
//! |---|---|---|---|
//! | `completed` | document digest | the completed-effect cache entry with its **kept acknowledgement** (only completed stage-9 digests) | Delivery §6.2 stages 4, 9; §4.2 |
//! | `effects` | document digest | the effect: the durable buffer of a delivered credential, the application's record, or the status update | §4.3, §4.1, §6.1 |
//! | `outbox` | ack digest | kept acknowledgements still to be deposited at the sender's carrier | §4.2 "the crash window", `PROTOCOL.md` §14 |
//! | `sent` | document digest | the sent-register: thread, anchors, class, §6.1 status, deposit id, queue address | §4.2, §6.1 |
//!
//! **The durability unit** (`PROTOCOL.md` §14): one redb write transaction
//! with `Durability::Immediate` per stage-9 commit. The effect, the cache
//! entry, the kept acknowledgement and its outbox item are written
//! together or not at all ([`PartyStore::commit`]); for an acknowledgement
//! received, the same transaction moves the sent-register entry's status.
//! A crash after the commit leaves the acknowledgement in the outbox: the
//! next run deposits it. A redelivered `duplicate-known` document puts the
//! **stored** acknowledgement back in the outbox ([`RedbStore::requeue`]),
//! byte for byte — never a fresh one.
//!
//! Retention (§7 `key-retention`): [`PartyStore::expire`] drops a cache
//! entry, its kept acknowledgement and its effect together, and
//! sent-register entries, only once they are older than the bound.

mod records;

use std::fmt::Display;
use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use rltp_party::sender::{SenderFailure, SenderStatus, SentEntry, Transition};
use rltp_party::store::{
    Commit, Committed, CompletedEntry, Effect, PartyStore, Retention, StoreError, StoredAck,
};
use rltp_proofs::Ms;
use rltp_proofs::multikey::Rkid;

use records::{AckRecord, CompletedRecord, EffectRecord, SentRecord};

type Def = TableDefinition<'static, &'static str, &'static [u8]>;

const COMPLETED: Def = TableDefinition::new("completed");
const EFFECTS: Def = TableDefinition::new("effects");
const OUTBOX: Def = TableDefinition::new("outbox");
const SENT: Def = TableDefinition::new("sent");

/// Why the store could not answer. Every one is transient for the
/// pipeline (§5a.8): the document is not concluded and is redelivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreFault {
    /// The database failed (I/O, lock held by another process, damage).
    #[error("party store: {0}")]
    Db(String),
    /// A stored record does not read back.
    #[error("party store: {0} does not read back")]
    Record(&'static str),
}

impl From<StoreFault> for StoreError {
    fn from(fault: StoreFault) -> StoreError {
        StoreError(fault.to_string())
    }
}

fn fault<E: Display>(e: E) -> StoreFault {
    StoreFault::Db(e.to_string())
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, StoreFault> {
    serde_json::to_vec(value).map_err(fault)
}

fn decode<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
) -> Result<T, StoreFault> {
    serde_json::from_slice(bytes).map_err(|_| StoreFault::Record(what))
}

/// A sent-register entry with where it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentDeposit {
    /// The entry (§4.2), its §6.1 status included.
    pub entry: SentEntry,
    /// The deposit id the carrier admitted it under, when known.
    pub deposit: Option<String>,
    /// The queue address it was sealed to, when known.
    pub rkid: Option<String>,
    /// How it became `delivered` (`accepted->delivered`,
    /// `failed->delivered`), once it did.
    pub transition: Option<String>,
}

/// The party store in one redb file.
#[derive(Debug)]
pub struct RedbStore {
    db: Database,
}

impl RedbStore {
    /// Opens (or creates) the store at `path`, creating its tables.
    ///
    /// # Errors
    /// [`StoreFault::Db`]: the file cannot be opened (held by another
    /// process, damaged, not writable).
    pub fn open(path: &Path) -> Result<RedbStore, StoreFault> {
        let db = Database::create(path).map_err(fault)?;
        let txn = db.begin_write().map_err(fault)?;
        for def in [COMPLETED, EFFECTS, OUTBOX, SENT] {
            txn.open_table(def).map_err(fault)?;
        }
        txn.commit().map_err(fault)?;
        Ok(RedbStore { db })
    }

    fn write(&self) -> Result<redb::WriteTransaction, StoreFault> {
        let mut txn = self.db.begin_write().map_err(fault)?;
        txn.set_durability(Durability::Immediate).map_err(fault)?;
        Ok(txn)
    }

    fn read_one(&self, def: Def, key: &str) -> Result<Option<Vec<u8>>, StoreFault> {
        let txn = self.db.begin_read().map_err(fault)?;
        let table = txn.open_table(def).map_err(fault)?;
        Ok(table.get(key).map_err(fault)?.map(|v| v.value().to_vec()))
    }

    fn read_all(&self, def: Def) -> Result<Vec<(String, Vec<u8>)>, StoreFault> {
        let txn = self.db.begin_read().map_err(fault)?;
        let table = txn.open_table(def).map_err(fault)?;
        let mut all = Vec::new();
        for row in table.iter().map_err(fault)? {
            let (k, v) = row.map_err(fault)?;
            all.push((k.value().to_owned(), v.value().to_vec()));
        }
        Ok(all)
    }

    /// The kept acknowledgements still to be deposited, in digest order.
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn outbox(&self) -> Result<Vec<StoredAck>, StoreFault> {
        self.read_all(OUTBOX)?
            .iter()
            .map(|(_, v)| decode::<AckRecord>(v, "an outbox item")?.to_ack())
            .collect()
    }

    /// §4.2, §6.2 stage 4: a `duplicate-known` document re-sends its
    /// **stored** acknowledgement — this puts exactly those bytes back in
    /// the outbox (once, keyed by the ack's digest). An ack with nowhere
    /// to go (`seal_to` unknown) is not queued.
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn requeue(&self, ack: &StoredAck) -> Result<(), StoreFault> {
        if ack.seal_to.is_none() {
            return Ok(());
        }
        let txn = self.write()?;
        {
            let mut table = txn.open_table(OUTBOX).map_err(fault)?;
            table
                .insert(
                    ack.digest.as_str(),
                    encode(&AckRecord::of(ack)?)?.as_slice(),
                )
                .map_err(fault)?;
        }
        txn.commit().map_err(fault)
    }

    /// The acknowledgement `ack_digest` was admitted at the sender's
    /// carrier: it leaves the outbox (the kept copy stays in `completed`).
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn outbox_done(&self, ack_digest: &str) -> Result<(), StoreFault> {
        let txn = self.write()?;
        txn.open_table(OUTBOX)
            .map_err(fault)?
            .remove(ack_digest)
            .map_err(fault)?;
        txn.commit().map_err(fault)
    }

    /// Records a document the carrier admitted as deposit `deposit` to
    /// the queue `rkid` (status `accepted`, §6.1). An entry already held
    /// for the digest keeps its status; the deposit id is updated.
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn record_deposit(
        &self,
        entry: &SentEntry,
        deposit: &str,
        rkid: &Rkid,
    ) -> Result<(), StoreFault> {
        let txn = self.write()?;
        {
            let mut table = txn.open_table(SENT).map_err(fault)?;
            let held = table
                .get(entry.digest.as_str())
                .map_err(fault)?
                .map(|v| decode::<SentRecord>(v.value(), "a sent entry"))
                .transpose()?;
            let mut record = held.unwrap_or_else(|| SentRecord::of(entry));
            record.deposit = Some(deposit.to_owned());
            record.rkid = Some(rkid.to_multikey());
            table
                .insert(entry.digest.as_str(), encode(&record)?.as_slice())
                .map_err(fault)?;
        }
        txn.commit().map_err(fault)
    }

    /// Every sent-register entry, in digest order.
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn sent_deposits(&self) -> Result<Vec<SentDeposit>, StoreFault> {
        self.read_all(SENT)?
            .iter()
            .map(|(digest, v)| {
                let record: SentRecord = decode(v, "a sent entry")?;
                Ok(SentDeposit {
                    entry: record.to_entry(digest)?,
                    deposit: record.deposit,
                    rkid: record.rkid,
                    transition: record.transition,
                })
            })
            .collect()
    }

    /// The effect committed for `digest`, as its stored JSON, if any.
    ///
    /// # Errors
    /// [`StoreFault`].
    pub fn effect_json(&self, digest: &str) -> Result<Option<serde_json::Value>, StoreFault> {
        self.read_one(EFFECTS, digest)?
            .map(|v| decode(&v, "an effect"))
            .transpose()
    }

    fn update_sent(
        table: &mut redb::Table<'_, &'static str, &'static [u8]>,
        digest: &str,
        change: impl FnOnce(&mut SentRecord),
    ) -> Result<Option<SentRecord>, StoreFault> {
        let Some(mut record) = table
            .get(digest)
            .map_err(fault)?
            .map(|v| decode::<SentRecord>(v.value(), "a sent entry"))
            .transpose()?
        else {
            return Ok(None);
        };
        change(&mut record);
        table
            .insert(digest, encode(&record)?.as_slice())
            .map_err(fault)?;
        Ok(Some(record))
    }

    fn commit_in(
        txn: &redb::WriteTransaction,
        commit: &Commit,
    ) -> Result<Result<Option<Transition>, CompletedEntry>, StoreFault> {
        let digest = commit.entry.digest.as_str();
        let mut completed = txn.open_table(COMPLETED).map_err(fault)?;
        if let Some(held) = completed.get(digest).map_err(fault)? {
            let record: CompletedRecord = decode(held.value(), "a cache entry")?;
            return Ok(Err(record.to_entry(digest)?));
        }
        let mut transition = None;
        if let Effect::SenderStatus { acked } = &commit.effect {
            let mut sent = txn.open_table(SENT).map_err(fault)?;
            Self::update_sent(&mut sent, acked, |record| {
                let (status, t) = record.status.on_valid_ack();
                record.status = status;
                if t != Transition::AlreadyDelivered {
                    record.transition = Some(t.as_str().to_owned());
                }
                transition = Some(t);
            })?;
        }
        let record = CompletedRecord::of(&commit.entry)?;
        completed
            .insert(digest, encode(&record)?.as_slice())
            .map_err(fault)?;
        txn.open_table(EFFECTS)
            .map_err(fault)?
            .insert(
                digest,
                encode(&EffectRecord::of(&commit.effect))?.as_slice(),
            )
            .map_err(fault)?;
        if let Some(ack) = record.ack.as_ref().filter(|a| a.seal_to.is_some()) {
            txn.open_table(OUTBOX)
                .map_err(fault)?
                .insert(ack.digest.as_str(), encode(ack)?.as_slice())
                .map_err(fault)?;
        }
        Ok(Ok(transition))
    }
}

impl PartyStore for RedbStore {
    fn completed(&self, digest: &str) -> Result<Option<CompletedEntry>, StoreError> {
        Ok(self
            .read_one(COMPLETED, digest)?
            .map(|v| decode::<CompletedRecord>(&v, "a cache entry")?.to_entry(digest))
            .transpose()?)
    }

    /// One write transaction (`Durability::Immediate`): the cache entry
    /// with its kept acknowledgement, the effect, the outbox item and, for
    /// an acknowledgement received, the sent-register status — or nothing.
    fn commit(&self, commit: Commit) -> Result<Committed, StoreError> {
        let txn = self.write()?;
        match Self::commit_in(&txn, &commit)? {
            Err(held) => {
                txn.abort().map_err(fault)?;
                Ok(Committed::AlreadyCompleted(held))
            }
            Ok(transition) => {
                txn.commit().map_err(fault)?;
                Ok(Committed::Fresh { transition })
            }
        }
    }

    fn sent(&self, digest: &str) -> Result<Option<SentEntry>, StoreError> {
        Ok(self
            .read_one(SENT, digest)?
            .map(|v| decode::<SentRecord>(&v, "a sent entry")?.to_entry(digest))
            .transpose()?)
    }

    fn record_sent(&self, entry: SentEntry) -> Result<(), StoreError> {
        let txn = self.write()?;
        {
            let mut table = txn.open_table(SENT).map_err(fault)?;
            if table.get(entry.digest.as_str()).map_err(fault)?.is_none() {
                table
                    .insert(
                        entry.digest.as_str(),
                        encode(&SentRecord::of(&entry))?.as_slice(),
                    )
                    .map_err(fault)?;
            }
        }
        Ok(txn.commit().map_err(fault)?)
    }

    fn give_up(
        &self,
        digest: &str,
        reason: SenderFailure,
    ) -> Result<Option<SenderStatus>, StoreError> {
        let txn = self.write()?;
        let status = {
            let mut table = txn.open_table(SENT).map_err(fault)?;
            Self::update_sent(&mut table, digest, |record| {
                record.status = record.status.on_give_up(reason);
            })?
            .map(|r| r.status)
        };
        txn.commit().map_err(fault)?;
        Ok(status)
    }

    fn expire(&self, now: Ms, retention: Retention) -> Result<usize, StoreError> {
        let mut gone = Vec::new();
        for (digest, v) in self.read_all(COMPLETED)? {
            let record: CompletedRecord = decode(&v, "a cache entry")?;
            if retention.expired(record.committed_at, now) {
                gone.push((COMPLETED, digest.clone(), true));
                gone.push((EFFECTS, digest, false));
            }
        }
        for (digest, v) in self.read_all(SENT)? {
            let record: SentRecord = decode(&v, "a sent entry")?;
            if retention.expired(record.sent_at, now) {
                gone.push((SENT, digest, true));
            }
        }
        let txn = self.write()?;
        let mut count = 0;
        for (def, key, counted) in &gone {
            let mut table = txn.open_table(*def).map_err(fault)?;
            let removed = table.remove(key.as_str()).map_err(fault)?.is_some();
            if removed && *counted {
                count += 1;
            }
        }
        txn.commit().map_err(fault)?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests;
