//! The legacy store's read snapshots and write transactions.

use super::*;

/// A read snapshot of a [`RedbStore`].
pub struct RedbRead<'a> {
    pub(super) store: &'a RedbStore,
    pub(super) txn: ReadTransaction,
    pub(super) generation: u64,
}

impl Drop for RedbRead<'_> {
    fn drop(&mut self) {
        let mut readers = lock(&self.store.readers);
        if let Some(count) = readers.live.get_mut(&self.generation) {
            *count -= 1;
            if *count == 0 {
                readers.live.remove(&self.generation);
            }
        }
    }
}

/// A write transaction of a [`RedbStore`]. Holds the writer lock; dropping
/// it without [`Store::commit`] discards everything it did.
pub struct RedbWrite<'a> {
    pub(super) store: &'a RedbStore,
    pub(super) txn: Option<WriteTransaction>,
    pub(super) state: MutexGuard<'a, WriterState>,
    pub(super) occupancy: Occupancy,
    pub(super) occupancy_dirty: bool,
    pub(super) queues: HashMap<Rkid, (QueueMeta, bool)>,
    pub(super) segments: HashMap<u64, SegStat>,
    pub(super) committed: bool,
    /// Whether mutations are written to the operation log (`false` while
    /// replaying it).
    pub(super) logging: bool,
    /// This transaction's log record: its offset and the hash of its body
    /// so far (`None` until the first logged operation).
    pub(super) record: Option<(u64, Sha256)>,
    /// Operations logged.
    pub(super) ops: u64,
    /// Commit durably in redb (a checkpoint) whatever the counters say.
    pub(super) force_durable: bool,
}

impl Drop for RedbWrite<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // A record that reached the file (spilled, or synced before a
        // failed commit) is voided before anything else is written.
        let start = self.record.take().map(|(start, _)| start);
        let min_void = oplog::HEADER as u64;
        if let Some(reached) = self.state.active.abandon_record(start, min_void) {
            self.state.void_pending = Some(reached);
        }
        if self.state.void_pending.is_some() {
            let _ = self.store.void_if_pending(&mut self.state);
        }
    }
}

impl RedbWrite<'_> {
    pub(super) fn txn(&self) -> StoreResult<&WriteTransaction> {
        self.txn.as_ref().ok_or(StoreError::Closed)
    }

    /// Appends one operation (`parts`, concatenated) to this transaction's
    /// log record (`src/oplog.rs`), opening the record first; returns the
    /// segment offset just past it. Does nothing while replaying.
    pub(super) fn log(&mut self, parts: &[&[u8]]) -> StoreResult<u64> {
        if !self.logging {
            return Ok(0);
        }
        let active = &mut self.state.active;
        let (_, hasher) = match &mut self.record {
            Some(record) => record,
            record @ None => {
                let start = active.append(&[0u8; oplog::HEADER])?;
                record.insert((start, Sha256::new()))
            }
        };
        for part in parts {
            hasher.update(part);
            active.append(part)?;
        }
        self.ops += 1;
        Ok(active.end())
    }

    /// Indexes a deposit whose bytes are at `offset` of the active segment
    /// (inside a log record): `append_deposit` and its replay.
    pub(super) fn index_deposit(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
        offset: u64,
    ) -> StoreResult<Deposit> {
        let len = crate::deposit_len(bytes)?;
        let store = self.store;
        let queue = self.queue_mut(rkid)?;
        queue.next_seq = store.seq_floor.next_after(queue.next_seq);
        queue.bytes += u64::from(len);
        let deposit = Deposit {
            seq: queue.next_seq,
            id: *id,
            len,
            admitted_at,
            give_up_at,
        };
        let value = match self.store.options.placement {
            Placement::Inline => encode_deposit(&deposit, INLINE, 0, bytes),
            Placement::Segments => {
                let active = self.state.active.id;
                self.seg_adjust(active, 1, u64::from(len))?;
                encode_deposit(&deposit, active, offset, &[])
            }
        };
        let txn = self.txn()?;
        put(txn, DEPOSITS, &key_seq(rkid, deposit.seq), &value)?;
        put(
            txn,
            IDENTITY,
            &key_id(rkid, &deposit.id),
            &deposit.seq.to_be_bytes(),
        )?;
        self.occupancy.deposit_added(len);
        self.occupancy_dirty = true;
        Ok(deposit)
    }

    /// Re-points held deposit `seq` of `rkid` to `offset` of the active
    /// segment, where a copy of its bytes was logged (compaction and its
    /// replay).
    pub(super) fn move_deposit(&mut self, rkid: &Rkid, seq: u64, offset: u64) -> StoreResult<()> {
        let stored = query::stored(self.txn()?, rkid, seq)?
            .ok_or_else(|| corrupt(format!("moved deposit {seq} is not held")))?;
        let active = self.state.active.id;
        let len = u64::from(stored.deposit.len);
        put(
            self.txn()?,
            DEPOSITS,
            &key_seq(rkid, seq),
            &encode_deposit(&stored.deposit, active, offset, &[]),
        )?;
        if stored.segment != INLINE {
            self.seg_adjust(stored.segment, -1, len)?;
        }
        self.seg_adjust(active, 1, len)
    }

    pub(super) fn queue_mut(&mut self, rkid: &Rkid) -> StoreResult<&mut QueueMeta> {
        if !self.queues.contains_key(rkid) {
            let meta = query::queue(self.txn()?, rkid)?;
            self.queues.insert(*rkid, (meta, false));
        }
        let (meta, dirty) = self
            .queues
            .get_mut(rkid)
            .ok_or_else(|| corrupt("queue cache"))?;
        *dirty = true;
        Ok(meta)
    }

    pub(super) fn seg_adjust(&mut self, id: u64, count: i64, bytes: u64) -> StoreResult<()> {
        if !self.segments.contains_key(&id) {
            let stat = query::seg_stat(self.txn()?, id)?
                .ok_or_else(|| corrupt(format!("deposit in unrecorded segment {id:016x}")))?;
            self.segments.insert(id, stat);
        }
        let stat = self
            .segments
            .get_mut(&id)
            .ok_or_else(|| corrupt("segment cache"))?;
        if count >= 0 {
            stat.live += count.unsigned_abs();
            stat.bytes += bytes;
        } else {
            stat.live = stat.live.saturating_sub(count.unsigned_abs());
            stat.bytes = stat.bytes.saturating_sub(bytes);
        }
        Ok(())
    }

    /// Writes the cached counters; returns the sealed segments this
    /// transaction drained.
    pub(super) fn flush_counters(&mut self) -> StoreResult<Vec<u64>> {
        let txn = self.txn()?;
        if self.occupancy_dirty {
            put(
                txn,
                META,
                META_OCCUPANCY,
                &encode_occupancy(&self.occupancy),
            )?;
        }
        for (rkid, (meta, dirty)) in &self.queues {
            if *dirty {
                put(txn, QUEUES, rkid.as_bytes(), &encode_queue(meta))?;
            }
        }
        let active = self.state.active.id;
        let mut drained = Vec::new();
        for (&id, stat) in &self.segments {
            if id == active {
                let stat = SegStat {
                    end: self.state.active.end(),
                    ..*stat
                };
                put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(&stat))?;
            } else if stat.live == 0 {
                retire_segment(txn, id)?;
                drained.push(id);
            } else {
                put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(stat))?;
            }
        }
        Ok(drained)
    }
}

macro_rules! shared_reads {
    () => {
        fn binding(&self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
            query::binding(self.tables()?, rkid)
        }
        fn tombstone(&self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
            query::tombstone(self.tables()?, rkid)
        }
        fn oldest_tombstone(&self) -> StoreResult<Option<(Rkid, Tombstone)>> {
            query::oldest_tombstone(self.tables()?)
        }
        fn deposits(
            &self,
            rkid: &Rkid,
            after: Option<u64>,
            limit: usize,
        ) -> StoreResult<Vec<Deposit>> {
            query::deposits(self.tables()?, rkid, after, limit)
        }
        fn deposit_by_id(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<Deposit>> {
            query::deposit_by_id(self.tables()?, rkid, id)
        }
        fn departure(&self, rkid: &Rkid, id: &DepositId) -> StoreResult<Option<DepartureRecord>> {
            query::departure(self.tables()?, rkid, id)
        }
        fn due(&self, upto: Ms, limit: usize) -> StoreResult<Vec<(Ms, Due)>> {
            query::due(self.tables()?, upto, limit)
        }
        fn next_due(&self) -> StoreResult<Option<Ms>> {
            query::next_due(self.tables()?)
        }
        fn declaration(&self) -> StoreResult<Option<DeclarationRecord>> {
            query::declaration(self.tables()?)
        }
        fn quarantined(&self) -> StoreResult<u64> {
            self.tables()?.count(QUARANTINE)
        }
    };
}

impl RedbRead<'_> {
    pub(super) fn tables(&self) -> StoreResult<&ReadTransaction> {
        Ok(&self.txn)
    }
}

impl RedbWrite<'_> {
    pub(super) fn tables(&self) -> StoreResult<&WriteTransaction> {
        self.txn()
    }
}

impl ReadTxn for RedbRead<'_> {
    shared_reads!();
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        self.store.bytes_of(&self.txn, rkid, deposit, None)
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        Ok(query::queue(&self.txn, rkid)?.bytes)
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        query::occupancy(&self.txn)
    }
    fn binding_phases(&self) -> StoreResult<BindingPhases> {
        binding_phases(&self.txn)
    }
}

impl ReadTxn for RedbWrite<'_> {
    shared_reads!();
    fn deposit_bytes(&self, rkid: &Rkid, deposit: &Deposit) -> StoreResult<Vec<u8>> {
        self.store
            .bytes_of(self.txn()?, rkid, deposit, Some(&self.state.active))
    }
    fn queue_bytes(&self, rkid: &Rkid) -> StoreResult<u64> {
        match self.queues.get(rkid) {
            Some((meta, _)) => Ok(meta.bytes),
            None => Ok(query::queue(self.txn()?, rkid)?.bytes),
        }
    }
    fn occupancy(&self) -> StoreResult<Occupancy> {
        Ok(self.occupancy)
    }
}

/// Every mutation is logged first (`RedbWrite::log`, a no-op during
/// replay), then applied to redb.
impl WriteTxn for RedbWrite<'_> {
    fn put_binding(&mut self, rkid: &Rkid, binding: &Binding) -> StoreResult<()> {
        let value = encode_binding(binding);
        self.log(&[&[tag::PUT_BINDING], rkid.as_bytes(), &value])?;
        if put(self.txn()?, BINDINGS, rkid.as_bytes(), &value)?.is_none() {
            self.occupancy.binding_added();
            self.occupancy_dirty = true;
        }
        Ok(())
    }
    fn remove_binding(&mut self, rkid: &Rkid) -> StoreResult<Option<Binding>> {
        self.log(&[&[tag::REMOVE_BINDING], rkid.as_bytes()])?;
        let Some(old) = del(self.txn()?, BINDINGS, rkid.as_bytes())? else {
            return Ok(None);
        };
        self.occupancy.binding_removed();
        self.occupancy_dirty = true;
        decode_binding(&old).map(Some)
    }
    fn put_tombstone(&mut self, rkid: &Rkid, tombstone: &Tombstone) -> StoreResult<()> {
        let value = encode_tombstone(tombstone);
        self.log(&[&[tag::PUT_TOMBSTONE], rkid.as_bytes(), &value])?;
        if put_tombstone(self.txn()?, rkid, tombstone)? {
            self.occupancy.tombstone_added();
            self.occupancy_dirty = true;
        }
        Ok(())
    }
    fn remove_tombstone(&mut self, rkid: &Rkid) -> StoreResult<Option<Tombstone>> {
        self.log(&[&[tag::REMOVE_TOMBSTONE], rkid.as_bytes()])?;
        let Some(old) = remove_tombstone(self.txn()?, rkid)? else {
            return Ok(None);
        };
        self.occupancy.tombstone_removed();
        self.occupancy_dirty = true;
        Ok(Some(old))
    }
    /// The envelope bytes are written once, inside this transaction's log
    /// record; the deposit points at them there.
    fn append_identified(
        &mut self,
        rkid: &Rkid,
        bytes: &[u8],
        id: &DepositId,
        admitted_at: Ms,
        give_up_at: Ms,
    ) -> StoreResult<Deposit> {
        let len = crate::deposit_len(bytes)?;
        let end = self.log(&[
            &[tag::APPEND_DEPOSIT],
            rkid.as_bytes(),
            &admitted_at.to_be_bytes(),
            &give_up_at.to_be_bytes(),
            &len.to_be_bytes(),
            bytes,
        ])?;
        let offset = end.saturating_sub(u64::from(len));
        self.index_deposit(rkid, bytes, id, admitted_at, give_up_at, offset)
    }
    fn remove_deposit(&mut self, rkid: &Rkid, seq: u64) -> StoreResult<Option<Deposit>> {
        self.log(&[&[tag::REMOVE_DEPOSIT], rkid.as_bytes(), &seq.to_be_bytes()])?;
        let txn = self.txn()?;
        let Some(old) = del(txn, DEPOSITS, &key_seq(rkid, seq))? else {
            return Ok(None);
        };
        let stored = decode_deposit(seq, &old)?;
        del(txn, IDENTITY, &key_id(rkid, &stored.deposit.id))?;
        let len = u64::from(stored.deposit.len);
        let queue = self.queue_mut(rkid)?;
        queue.bytes = queue.bytes.saturating_sub(len);
        if stored.segment != INLINE {
            self.seg_adjust(stored.segment, -1, len)?;
        }
        self.occupancy.deposit_removed(stored.deposit.len);
        self.occupancy_dirty = true;
        Ok(Some(stored.deposit))
    }
    fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        let value = encode_departure(record);
        self.log(&[&[tag::PUT_DEPARTURE], rkid.as_bytes(), &id.0, &value])?;
        put(self.txn()?, DEPARTURES, &key_id(rkid, id), &value).map(drop)
    }
    fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        self.log(&[&[tag::REMOVE_DEPARTURE], rkid.as_bytes(), &id.0])?;
        del(self.txn()?, DEPARTURES, &key_id(rkid, id)).map(drop)
    }
    fn schedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = due_key(at, due);
        self.log(&[&[tag::SCHEDULE, key.len() as u8], &key])?;
        put(self.txn()?, DUE, &key, &[]).map(drop)
    }
    fn unschedule(&mut self, at: Ms, due: &Due) -> StoreResult<()> {
        let key = due_key(at, due);
        self.log(&[&[tag::UNSCHEDULE, key.len() as u8], &key])?;
        del(self.txn()?, DUE, &key).map(drop)
    }
    fn add_elastic_bytes(&mut self, delta: i64) -> StoreResult<()> {
        self.log(&[&[tag::ADD_ELASTIC], &delta.to_be_bytes()])?;
        self.occupancy.add_elastic(delta);
        self.occupancy_dirty = true;
        Ok(())
    }
    fn put_declaration(&mut self, record: &DeclarationRecord) -> StoreResult<()> {
        let value = cat(&[&record.revision.to_be_bytes(), &record.document]);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("declaration of {} bytes", value.len())))?;
        self.log(&[&[tag::PUT_DECLARATION], &len.to_be_bytes(), &value])?;
        put(self.txn()?, META, META_DECLARATION, &value).map(drop)
    }
    fn quarantine(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        at: Ms,
        reason: &str,
    ) -> StoreResult<()> {
        let (segment, offset) = query::stored(self.txn()?, rkid, deposit.seq)?
            .map_or((INLINE, 0), |s| (s.segment, s.offset));
        let value = quarantine_value(deposit, at, segment, offset, reason);
        let len = u32::try_from(value.len())
            .map_err(|_| corrupt(format!("quarantine record of {} bytes", value.len())))?;
        let seq = deposit.seq.to_be_bytes();
        self.log(&[
            &[tag::QUARANTINE],
            rkid.as_bytes(),
            &seq,
            &len.to_be_bytes(),
            &value,
        ])?;
        put(self.txn()?, QUARANTINE, &key_seq(rkid, deposit.seq), &value).map(drop)
    }
}
