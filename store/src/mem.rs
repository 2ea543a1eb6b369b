//! An in-memory [`Store`]: the reference model.
//!
//! Not durable: it exists so the engine's rules can be tested in
//! microseconds and so property tests can compare the redb store against a
//! model that is obviously right. A write transaction works on a copy of
//! the whole state and replaces it at commit.

use crate::{
    Binding, ChallengeTable, DeclarationRecord, DepartureRecord, Deposit, DepositId, Due, Ms,
    Occupancy, ReadTxn, Store, StoreResult, Tombstone, WriteTxn,
};
use rltp_proofs::multikey::Rkid;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// A held deposit and its bytes (shared, so a snapshot clone is cheap).
type Held = (Deposit, Arc<Vec<u8>>);

/// The whole state, as ordered maps.
#[derive(Debug, Clone, Default)]
pub struct MemState {
    bindings: BTreeMap<Rkid, Binding>,
    tombstones: BTreeMap<Rkid, Tombstone>,
    eviction_order: BTreeSet<(Ms, Rkid)>,
    deposits: BTreeMap<(Rkid, u64), Held>,
    identity: BTreeMap<(Rkid, DepositId), u64>,
    next_seq: BTreeMap<Rkid, u64>,
    queue_bytes: BTreeMap<Rkid, u64>,
    departures: BTreeMap<(Rkid, DepositId), DepartureRecord>,
    due: BTreeSet<(Ms, Due)>,
    occupancy: Occupancy,
    declaration: Option<DeclarationRecord>,
    /// Quarantine records: (rkid, seq) → (deposit, instant, reason).
    quarantined: BTreeMap<(Rkid, u64), (Deposit, Ms, String)>,
}

/// The in-memory store.
#[derive(Debug, Default)]
pub struct MemStore {
    state: Mutex<Arc<MemState>>,
    writer: Mutex<()>,
    challenges: ChallengeTable,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn snapshot(&self) -> Arc<MemState> {
        Arc::clone(&lock(&self.state))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A read snapshot of a [`MemStore`].
#[derive(Debug)]
pub struct MemRead(Arc<MemState>);

/// A write transaction of a [`MemStore`].
#[derive(Debug)]
pub struct MemWrite<'a> {
    state: MemState,
    _writer: MutexGuard<'a, ()>,
}

impl ReadTxn for MemState {
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        Ok(self.bindings.get(rkid).copied())
    }
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        Ok(self.tombstones.get(rkid).copied())
    }
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
        Ok(self
            .eviction_order
            .first()
            .and_then(|(_, rkid)| self.tombstones.get(rkid).map(|t| (*rkid, *t))))
    }
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>> {
        let start = after.map_or(0, |a| a.saturating_add(1));
        Ok(self
            .deposits
            .range((*rkid, start)..=(*rkid, u64::MAX))
            .take(limit)
            .map(|(_, (d, _))| *d)
            .collect())
    }
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
        Ok(self
            .identity
            .get(&(*rkid, *id))
            .and_then(|seq| self.deposits.get(&(*rkid, *seq)))
            .map(|(d, _)| *d))
    }
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        self.deposits
            .get(&(*rkid, deposit.seq))
            .map(|(_, bytes)| bytes.as_ref().clone())
            .ok_or_else(|| {
                crate::StoreError::Corrupt(format!("no bytes for deposit {}", deposit.seq))
            })
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        Ok(self.queue_bytes.get(rkid).copied().unwrap_or(0))
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        Ok(self.occupancy)
    }
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
        Ok(self.departures.get(&(*rkid, *id)).copied())
    }
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        Ok(self
            .due
            .iter()
            .take_while(|(at, _)| *at <= upto)
            .take(limit)
            .copied()
            .collect())
    }
    fn next_due(&self) -> StoreResult<Option<Ms>> {
        Ok(self.due.first().map(|(at, _)| *at))
    }
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
        Ok(self.declaration.clone())
    }
    fn quarantined(&self) -> StoreResult<u64> {
        Ok(self.quarantined.len() as u64)
    }
}

impl WriteTxn for MemState {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        if self.bindings.insert(*rkid, *binding).is_none() {
            self.occupancy.binding_added();
        }
        Ok(())
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        let removed = self.bindings.remove(rkid);
        if removed.is_some() {
            self.occupancy.binding_removed();
        }
        Ok(removed)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        if let Some(old) = self.tombstones.insert(*rkid, *tombstone) {
            self.eviction_order.remove(&(old.released_at, *rkid));
        } else {
            self.occupancy.tombstone_added();
        }
        self.eviction_order.insert((tombstone.released_at, *rkid));
        Ok(())
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        let removed = self.tombstones.remove(rkid);
        if let Some(t) = removed {
            self.eviction_order.remove(&(t.released_at, *rkid));
            self.occupancy.tombstone_removed();
        }
        Ok(removed)
    }
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        let seq = self.next_seq.entry(*rkid).or_insert(0);
        *seq = crate::next_seq(*seq, 0);
        let len = crate::deposit_len(bytes)?;
        let deposit = Deposit {
            seq: *seq,
            id: *id,
            len,
            admitted_at,
            give_up_at,
        };
        self.deposits
            .insert((*rkid, deposit.seq), (deposit, Arc::new(bytes.to_vec())));
        self.identity.insert((*rkid, deposit.id), deposit.seq);
        *self.queue_bytes.entry(*rkid).or_insert(0) += u64::from(len);
        self.occupancy.deposit_added(len);
        Ok(deposit)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        let Some((deposit, _)) = self.deposits.remove(&(*rkid, seq)) else {
            return Ok(None);
        };
        self.identity.remove(&(*rkid, deposit.id));
        if let Some(bytes) = self.queue_bytes.get_mut(rkid) {
            *bytes = bytes.saturating_sub(u64::from(deposit.len));
            if *bytes == 0 {
                self.queue_bytes.remove(rkid);
            }
        }
        self.occupancy.deposit_removed(deposit.len);
        Ok(Some(deposit))
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        self.departures.insert((*rkid, *id), *record);
        Ok(())
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        self.departures.remove(&(*rkid, *id));
        Ok(())
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.due.insert((at, *due));
        Ok(())
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.due.remove(&(at, *due));
        Ok(())
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        self.occupancy.add_elastic(delta);
        Ok(())
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        self.declaration = Some(record.clone());
        Ok(())
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        self.quarantined
            .insert((*rkid, deposit.seq), (*deposit, at, reason.to_owned()));
        Ok(())
    }
}

macro_rules! delegate_read {
    ($ty:ty, $field:tt) => {
        impl ReadTxn for $ty {
            fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
                self.$field.binding(rkid)
            }
            fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
                self.$field.tombstone(rkid)
            }
            fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
                self.$field.oldest_tombstone()
            }
            fn deposits(
                &self,
                rkid: &Rkid,
                after: Option<u64>,
                limit: usize,
            ) -> StoreResult<Vec<Deposit>> {
                self.$field.deposits(rkid, after, limit)
            }
            fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
                self.$field.deposit_by_id(rkid, id)
            }
            fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
                self.$field.deposit_bytes(rkid, deposit)
            }
            fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
                self.$field.queue_bytes(rkid)
            }
            fn occupancy(&self) -> StoreResult<Occupancy> {
                self.$field.occupancy()
            }
            fn departure(
                &self,
                rkid: &Rkid,
                id: &DepositId,
            ) -> StoreResult<Option<DepartureRecord>> {
                self.$field.departure(rkid, id)
            }
            fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
                self.$field.due(upto, limit)
            }
            fn next_due(&self) -> StoreResult<Option<Ms>> {
                self.$field.next_due()
            }
            fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
                self.$field.declaration()
            }
            fn quarantined(&self) -> StoreResult<u64> {
                self.$field.quarantined()
            }
        }
    };
}
delegate_read!(MemRead, 0);
delegate_read!(MemWrite<'_>, state);

impl WriteTxn for MemWrite<'_> {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        self.state.put_binding(rkid, binding)
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        self.state.remove_binding(rkid)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        self.state.put_tombstone(rkid, tombstone)
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.state.remove_tombstone(rkid)
    }
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        self.state
            .append_identified(rkid, bytes, id, admitted_at, give_up_at)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        self.state.remove_deposit(rkid, seq)
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        self.state.put_departure(rkid, id, record)
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        self.state.remove_departure(rkid, id)
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.state.schedule(at, due)
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        self.state.unschedule(at, due)
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        self.state.add_elastic_bytes(delta)
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        self.state.put_declaration(record)
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        self.state.quarantine(rkid, deposit, at, reason)
    }
}

impl Store for MemStore {
    type Read<'a> = MemRead;
    type Write<'a> = MemWrite<'a>;

    fn read(&self) -> StoreResult<MemRead> {
        Ok(MemRead(self.snapshot()))
    }
    fn begin_write(&self) -> StoreResult<MemWrite<'_>> {
        let guard = lock(&self.writer);
        Ok(MemWrite {
            state: self.snapshot().as_ref().clone(),
            _writer: guard,
        })
    }
    fn commit(&self, txn: MemWrite<'_>) -> StoreResult<()> {
        *lock(&self.state) = Arc::new(txn.state);
        Ok(())
    }
    fn challenges(&self) -> &ChallengeTable {
        &self.challenges
    }
}
