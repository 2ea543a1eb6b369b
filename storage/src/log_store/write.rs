//! The log store's write transactions: every mutation logged to the open
//! record, then applied to the in-memory index (queue data) or to redb
//! (bindings, tombstones, the declaration).

use super::*;

/// A write transaction of a [`LogStore`]: holds the writer gate; dropping
/// it without [`Store::commit`] takes everything it did back.
pub struct LogWrite<'a> {
    pub(super) store: &'a Inner,
    pub(super) state: MutexGuard<'a, WriterState>,
    pub(super) redb: Option<WriteTransaction>,
    /// The record: its offset and the CRC of its body so far.
    pub(super) record: Option<(u64, crc32fast::Hasher)>,
    pub(super) ops: u64,
    pub(super) redb_ops: u64,
    pub(super) committed: bool,
    pub(super) force_durable: bool,
}

impl Drop for LogWrite<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        self.store.index_write().rollback();
        let start = self.record.take().map(|(start, _)| start);
        let min_void = RECORD_HEADER as u64;
        if let Some(reached) = self.state.active.abandon_record(start, min_void) {
            self.state.void_pending = Some(reached);
        }
        if self.state.void_pending.is_some() {
            let _ = self.store.void_if_pending(&mut self.state);
        }
    }
}

impl LogWrite<'_> {
    /// The redb write transaction, begun on first use.
    pub(super) fn redb(&mut self) -> StoreResult<&WriteTransaction> {
        if self.redb.is_none() {
            let db = self.store.db()?;
            self.redb = Some(rs::begin(&db, true)?);
        }
        self.redb.as_ref().ok_or(StoreError::Closed)
    }

    /// Appends one operation to this transaction's record; returns the
    /// segment offset just past it.
    pub(super) fn log(&mut self, parts: &[&[u8]]) -> StoreResult<u64> {
        let active = &mut self.state.active;
        let (_, crc) = match &mut self.record {
            Some(record) => record,
            record @ None => {
                let start = active.append(&[0u8; RECORD_HEADER])?;
                record.insert((start, crc32fast::Hasher::new()))
            }
        };
        for part in parts {
            crc.update(part);
            active.append(part)?;
        }
        self.ops += 1;
        Ok(active.end())
    }

    pub(super) fn ix(&self) -> RwLockWriteGuard<'_, Index> {
        self.store.index_write()
    }

    pub(super) fn image(&self, rkid: &Rkid, seq: u64) -> Option<DepImage> {
        let ix = self.store.index_read();
        let qid = ix.queue(rkid)?;
        ix.find_seq(qid, seq).map(|s| ix.deps.get(s).image())
    }
}

impl ReadTxn for LogWrite<'_> {
    fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        match &self.redb {
            Some(txn) => query::binding(txn, rkid),
            None => query::binding(&self.store.db()?.begin_read().map_err(db_error)?, rkid),
        }
    }
    fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        match &self.redb {
            Some(txn) => query::tombstone(txn, rkid),
            None => query::tombstone(&self.store.db()?.begin_read().map_err(db_error)?, rkid),
        }
    }
    fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
        match &self.redb {
            Some(txn) => query::oldest_tombstone(txn),
            None => query::oldest_tombstone(&self.store.db()?.begin_read().map_err(db_error)?),
        }
    }
    fn deposits(&self, rkid: &Rkid, after: Option<u64>, limit: usize) -> StoreResult<Vec<Deposit>> {
        let ix = self.store.index_read();
        let Some(qid) = ix.queue(rkid) else {
            return Ok(Vec::new());
        };
        Ok(ix
            .list(qid, after, limit)
            .into_iter()
            .map(|s| ix.deps.get(s).deposit())
            .collect())
    }
    fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
        let ix = self.store.index_read();
        Ok(ix
            .queue(rkid)
            .and_then(|q| ix.find_id(q, &id.0))
            .map(|s| ix.deps.get(s).deposit()))
    }
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        match self.image(rkid, deposit.seq) {
            Some(image) => self.store.bytes(&image, Some(&self.state.active)),
            _ => Err(corrupt(format!("no bytes for deposit {}", deposit.seq))),
        }
    }
    fn deposit_bytes_deferred(&self, rkid: &Rkid, deposit: &Deposit) -> DeferredBytes {
        match self.image(rkid, deposit.seq) {
            Some(image) => self.store.deferred(&image, Some(&self.state.active)),
            _ => DeferredBytes::ready(Err(corrupt(format!(
                "no bytes for deposit {}",
                deposit.seq
            )))),
        }
    }
    fn holds_binding(&self, rkid: &Rkid) -> StoreResult<bool> {
        Ok(self.store.index_read().bound(rkid))
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        let ix = self.store.index_read();
        Ok(ix.queue(rkid).map_or(0, |q| ix.queue_rec(q).bytes()))
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        Ok(self.store.index_read().occupancy)
    }
    fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
        Ok(self.store.index_read().departure(rkid, id))
    }
    fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
        let mut due = self.store.index_read().due_upto(upto, limit);
        due.truncate(limit);
        Ok(due)
    }
    fn next_due(&self) -> StoreResult<Option<Ms>> {
        Ok(self.store.index_read().next_due())
    }
    fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
        match &self.redb {
            Some(txn) => query::declaration(txn),
            None => query::declaration(&self.store.db()?.begin_read().map_err(db_error)?),
        }
    }
    fn quarantined(&self) -> StoreResult<u64> {
        Ok(self.store.index_read().quarantine.len() as u64)
    }
}

/// Every mutation is logged (absolute values), then applied: to the index,
/// or to redb for bindings, tombstones and the declaration.
impl WriteTxn for LogWrite<'_> {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        let value = rs::encode_binding(binding);
        self.log(&[&[tag::PUT_BINDING], rkid.as_bytes(), &value])?;
        self.redb_ops += 1;
        let fresh = rs::put(self.redb()?, BINDINGS, rkid.as_bytes(), &value)?.is_none();
        let mut ix = self.ix();
        if fresh {
            ix.occupancy_mut().binding_added();
        }
        ix.set_bound(rkid, true)
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        let Some(old) = rs::del(self.redb()?, BINDINGS, rkid.as_bytes())? else {
            return Ok(None);
        };
        self.log(&[&[tag::REMOVE_BINDING], rkid.as_bytes()])?;
        self.redb_ops += 1;
        let mut ix = self.ix();
        ix.occupancy_mut().binding_removed();
        ix.set_bound(rkid, false)?;
        rs::decode_binding(&old).map(Some)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        let value = rs::encode_tombstone(tombstone);
        self.log(&[&[tag::PUT_TOMBSTONE], rkid.as_bytes(), &value])?;
        self.redb_ops += 1;
        let fresh = rs::put_tombstone(self.redb()?, rkid, tombstone)?;
        if fresh {
            self.ix().occupancy_mut().tombstone_added();
        }
        Ok(())
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        let Some(old) = rs::remove_tombstone(self.redb()?, rkid)? else {
            return Ok(None);
        };
        self.log(&[&[tag::REMOVE_TOMBSTONE], rkid.as_bytes()])?;
        self.redb_ops += 1;
        let mut ix = self.ix();
        ix.occupancy_mut().tombstone_removed();
        Ok(Some(old))
    }
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        let len = crate::deposit_len(bytes)?;
        let last = {
            let ix = self.store.index_read();
            ix.queue(rkid).map_or(0, |q| ix.queue_rec(q).next_seq)
        };
        let deposit = Deposit {
            seq: self.store.seq_floor.next_after(last),
            id: *id,
            len,
            admitted_at,
            give_up_at,
        };
        let end = self.log(&[
            &[tag::APPEND],
            rkid.as_bytes(),
            &deposit.seq.to_be_bytes(),
            &id.0,
            &admitted_at.to_be_bytes(),
            &give_up_at.to_be_bytes(),
            &len.to_be_bytes(),
            bytes,
        ])?;
        let (seg, off) = location(self.state.active.id, end - u64::from(len))?;
        self.ix().add_deposit(rkid, &deposit, seg, off)?;
        Ok(deposit)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        let slot = {
            let ix = self.store.index_read();
            ix.queue(rkid).and_then(|q| ix.find_seq(q, seq))
        };
        let Some(slot) = slot else { return Ok(None) };
        self.log(&[&[tag::REMOVE], rkid.as_bytes(), &seq.to_be_bytes()])?;
        self.ix().remove_deposit(slot).map(Some)
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        let value = rs::encode_departure(record);
        self.log(&[&[tag::PUT_DEPARTURE], rkid.as_bytes(), &id.0, &value])?;
        self.ix().put_departure(rkid, id, record)
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        if self.store.index_read().departure(rkid, id).is_none() {
            return Ok(());
        }
        self.log(&[&[tag::REMOVE_DEPARTURE], rkid.as_bytes(), &id.0])?;
        self.ix().remove_departure(rkid, id)
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = rs::due_key(at, due);
        self.log(&[&[tag::SCHEDULE, key.len() as u8], &key])?;
        self.ix().schedule(at, due)
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = rs::due_key(at, due);
        self.log(&[&[tag::UNSCHEDULE, key.len() as u8], &key])?;
        self.ix().unschedule(at, due);
        Ok(())
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        let value = self
            .store
            .index_read()
            .occupancy
            .elastic_bytes
            .saturating_add_signed(delta);
        self.log(&[&[tag::ELASTIC], &value.to_be_bytes()])?;
        self.ix().occupancy_mut().elastic_bytes = value;
        Ok(())
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        let value = rs::cat(&[&record.revision.to_be_bytes(), &record.document]);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("declaration of {} bytes", value.len())))?;
        self.log(&[&[tag::PUT_DECLARATION], &len.to_be_bytes(), &value])?;
        self.redb_ops += 1;
        rs::put(self.redb()?, META, META_DECLARATION, &value).map(drop)
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        let (segment, offset) = self
            .image(rkid, deposit.seq)
            .map_or((u64::MAX, 0), |i| (u64::from(i.seg), u64::from(i.off)));
        let value = rs::quarantine_value(deposit, at, segment, offset, reason);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("quarantine record of {} bytes", value.len())))?;
        self.log(&[
            &[tag::QUARANTINE],
            rkid.as_bytes(),
            &deposit.seq.to_be_bytes(),
            &len.to_be_bytes(),
            &value,
        ])?;
        self.ix().put_quarantine((*rkid, deposit.seq), value);
        Ok(())
    }
}

/// A deposit's location in the index: segment and offset as `u32`.
pub(super) fn location(segment: u64, offset: u64) -> StoreResult<(u32, u32)> {
    Ok((
        u32::try_from(segment).map_err(|_| corrupt("segment id over 2^32"))?,
        u32::try_from(offset).map_err(|_| corrupt("segment over 4 GiB"))?,
    ))
}
