//! The log store's read snapshots: the in-memory index at their version
//! (later changes taken back, `index/history.rs`) and a redb read
//! transaction of the same commit.

use super::*;

/// A read snapshot of a [`LogStore`]: the in-memory index at its version
/// (later changes taken back, `index.rs`) and a redb read transaction of
/// the same commit.
pub struct LogRead<'a> {
    pub(super) store: &'a Inner,
    pub(super) version: u64,
    pub(super) redb: ReadTransaction,
}

impl Drop for LogRead<'_> {
    fn drop(&mut self) {
        let mut readers = lock(&self.store.readers);
        if let Some(count) = readers.get_mut(&self.version) {
            *count -= 1;
            if *count == 0 {
                readers.remove(&self.version);
            }
        }
    }
}

impl LogRead<'_> {
    pub(super) fn with_view<R>(&self, f: impl FnOnce(&index::View<'_>) -> R) -> R {
        let ix = self.store.index_read();
        let view = ix.view(self.version);
        f(&view)
    }
}

pub(super) fn deposits_of(images: Vec<DepImage>) -> Vec<Deposit> {
    images.into_iter().map(|i| i.deposit).collect()
}

impl ReadTxn for LogRead<'_> {
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        query::binding(&self.redb, rkid)
    }
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        query::tombstone(&self.redb, rkid)
    }
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
        query::oldest_tombstone(&self.redb)
    }
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>> {
        Ok(deposits_of(
            self.with_view(|v| v.deposits(rkid, after, limit)),
        ))
    }
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
        Ok(self
            .with_view(|v| v.deposit_by_id(rkid, id))
            .map(|i| i.deposit))
    }
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        match self.with_view(|v| v.deposit(rkid, deposit.seq)) {
            Some(image) => self.store.bytes(&image, None),
            _ => Err(corrupt(format!("no bytes for deposit {}", deposit.seq))),
        }
    }
    fn deposit_bytes_deferred(&self, rkid: &Rkid, deposit: &Deposit) -> DeferredBytes {
        match self.with_view(|v| v.deposit(rkid, deposit.seq)) {
            Some(image) => self.store.deferred(&image, None),
            _ => DeferredBytes::ready(Err(corrupt(format!(
                "no bytes for deposit {}",
                deposit.seq
            )))),
        }
    }
    fn holds_binding(&self, rkid: &Rkid) -> StoreResult<bool> {
        Ok(query::binding(&self.redb, rkid)?.is_some())
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        Ok(self.with_view(|v| v.queue(rkid).bytes))
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        Ok(self.with_view(|v| v.occupancy()))
    }
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
        Ok(self.with_view(|v| v.departure(rkid, id)))
    }
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        Ok(self.with_view(|v| v.due(upto, limit)))
    }
    fn next_due(&self) -> StoreResult<Option<Ms>> {
        Ok(self
            .with_view(|v| v.due(Ms::MAX, 1))
            .first()
            .map(|(at, _)| *at))
    }
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
        query::declaration(&self.redb)
    }
    fn quarantined(&self) -> StoreResult<u64> {
        Ok(self.with_view(|v| v.quarantined()))
    }
    fn binding_phases(&self) -> StoreResult<crate::BindingPhases> {
        rs::binding_phases(&self.redb)
    }
}
