//! The legacy store's operation log: replay after `applied`, voiding an
//! uncommitted record, rotation, and reclaiming drained segments.

use super::*;

impl RedbStore {
    /// Replays the operation-log records of the active segment that redb's
    /// state does not hold yet (those after `applied`), in one durable
    /// transaction; the log then continues after the last valid record
    /// (`src/oplog.rs`). Work is bounded by the checkpoint interval.
    /// Takes and returns the writer lock.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if a valid record holds an operation that
    /// cannot be decoded or applied; I/O and engine errors.
    pub(super) fn replay<'a>(
        &'a self,
        state: MutexGuard<'a, WriterState>,
    ) -> StoreResult<MutexGuard<'a, WriterState>> {
        let mut state = state;
        let txn = begin(self.db()?.as_ref(), self.options.quick_repair)?;
        let from = match applied(&txn)? {
            Some((segment, at)) if segment == state.active.id => at,
            // A rotation whose commit reported an error but landed: redb's
            // state already names the next segment (nothing was written to
            // it yet), so the log continues there.
            Some((segment, at)) if segment > state.active.id => {
                let active =
                    ActiveSegment::reopen(&*self.options.fs, &self.segments_dir, segment, at)?;
                lock(&self.files).insert(active.id, Arc::clone(&active.file));
                self.log.set_durable((active.id, at));
                state.active = active;
                at
            }
            _ => return Ok(state),
        };
        // The rows of segments unlinked since the last commit go in this
        // one (as in every write transaction, `begin_write`).
        for id in &state.unlinked {
            del(&txn, SEGMENT_GC, &id.to_be_bytes())?;
        }
        let mut w = self.write_with(state, txn, false)?;
        let file = Arc::clone(&w.state.active.file);
        let len = file.len()?;
        let (mut at, mut records, mut ops) = (from, 0u64, 0u64);
        while let Some(record) = oplog::read_record(&*file, len, at)? {
            if record.kind == oplog::BATCH {
                ops += w.apply_record(&record)?;
            }
            records += 1;
            at = record.end;
        }
        w.state.active.resume_at(at);
        w.force_durable = true;
        self.commit(w)?;
        if records > 0 {
            tracing::info!(records, ops, from, to = at, "replayed the operation log");
        }
        *lock(&self.last_replay) = ReplayReport {
            records,
            ops,
            bytes: at - from,
        };
        Ok(lock(&self.writer))
    }

    /// If a batch or commit failed since the last transaction, replaces the
    /// redb handle by a freshly opened one (module docs, "After an I/O
    /// error"). Call with the writer lock held.
    ///
    /// # Errors
    /// [`StoreError`] if the reopen fails (a snapshot of the old handle
    /// still holds the file, or the file cannot be read); the next write
    /// transaction tries again.
    pub(super) fn reopen_if_failed(&self) -> StoreResult<bool> {
        if !self.db_failed.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let mut slot = self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The old handle goes first: redb refuses a second open of a file.
        drop(slot.take());
        let db =
            open_db(&*self.options.fs, &self.db_path, self.options.cache_bytes).map_err(|e| {
                StoreError::Redb(Context::new("reopening the database after a failure", e))
            })?;
        *slot = Some(Arc::new(db));
        self.db_failed.store(false, Ordering::SeqCst);
        tracing::warn!("the database was reopened after a failed batch");
        Ok(true)
    }

    /// Writes the void header over a log record that reached the file but
    /// did not commit, and syncs it (module docs of `src/oplog.rs`).
    /// Until that succeeds no write transaction may begin.
    pub(super) fn void_if_pending(&self, state: &mut WriterState) -> StoreResult<()> {
        let Some((start, end)) = state.void_pending else {
            return Ok(());
        };
        let body = end.saturating_sub(start + oplog::HEADER as u64);
        if end >= start + oplog::HEADER as u64 {
            state
                .active
                .overwrite_in_file(start, &oplog::void_header(start, body))
                .inspect_err(|error| {
                    tracing::error!(%error, start, end, "voiding an uncommitted log record failed; will retry");
                })?;
            // A failed sync may have dropped the page: as for any log sync.
            if let Err(error) = state.active.file.sync_data() {
                fatal_sync_failure(&error);
            }
        }
        state.void_pending = None;
        Ok(())
    }

    /// `fdatasync`s the active segment under the durable lock (before a
    /// durable redb commit, which must never reference log bytes that are
    /// not durable). A failure stops the process (`fatal_sync_failure`).
    pub(super) fn sync_active(&self, state: &mut WriterState) -> StoreResult<()> {
        self.log.sync_active(&mut state.active)
    }

    /// After a durable commit at `generation`: segments drained since the
    /// last one may be unlinked once no older snapshot reads them, and the
    /// checkpoint counters start again.
    pub(super) fn durable_done(state: &mut WriterState, generation: u64) {
        let drained = std::mem::take(&mut state.drained_undurable);
        state
            .deferred
            .extend(drained.into_iter().map(|id| (id, generation)));
        state.unchecked_ops = 0;
        state.unchecked_bytes = 0;
    }

    /// Seals the active segment and starts `next_segment` (one small
    /// durable transaction; the file is created first).
    pub(super) fn rotate(&self, state: &mut WriterState) -> StoreResult<()> {
        // Its durable commit makes every earlier non-durable one durable:
        // their log records must be durable first.
        self.sync_active(state)?;
        let txn = begin(self.db()?.as_ref(), self.options.quick_repair)?;
        let next = get_u64(&txn, META, META_NEXT_SEGMENT)?.unwrap_or(1);
        let old = state.active.id;
        let drained = query::seg_stat(&txn, old)?.is_none_or(|s| s.live == 0);
        if drained {
            retire_segment(&txn, old)?;
        }
        let active = ActiveSegment::create(&*self.options.fs, &self.segments_dir, next)?;
        record_active(&txn, next)?;
        txn.commit().map_err(db_error)?;
        lock(&self.files).insert(active.id, Arc::clone(&active.file));
        self.log.set_durable((active.id, active.end()));
        state.active = active;
        let generation = self.bump_generation();
        if drained {
            state.drained_undurable.push(old);
        }
        RedbStore::durable_done(state, generation);
        Ok(())
    }

    pub(super) fn bump_generation(&self) -> u64 {
        let mut readers = lock(&self.readers);
        readers.committed += 1;
        readers.committed
    }

    /// Unlinks deferred segments that no live read snapshot can reference.
    pub(super) fn collect_garbage(&self, state: &mut WriterState) {
        if state.deferred.is_empty() {
            return;
        }
        let oldest_reader = lock(&self.readers).live.keys().next().copied();
        let mut removed = Vec::new();
        state.deferred.retain(|&(id, generation)| {
            if oldest_reader.is_some_and(|oldest| oldest < generation) {
                return true;
            }
            lock(&self.files).remove(&id);
            match segment::remove(&*self.options.fs, &self.segments_dir, id) {
                Ok(()) => {
                    removed.push(id);
                    false
                }
                Err(error) => {
                    tracing::warn!(%error, segment = id, "segment unlink failed; will retry");
                    true
                }
            }
        });
        if removed.is_empty() {
            return;
        }
        // The `segment_gc` rows are dropped only once the unlinks are durable.
        match self.options.fs.sync_dir(&self.segments_dir) {
            Ok(()) => state.unlinked.extend(removed),
            Err(error) => tracing::warn!(%error, "segment directory sync failed"),
        }
    }

    /// The file of segment `id` (cached).
    pub(super) fn file(&self, id: u64) -> StoreResult<Arc<dyn StoreFile>> {
        segment::cached_file(&self.files, id, || {
            segment::open_for_read(&*self.options.fs, &self.segments_dir, id)
        })
    }

    /// Reads and verifies the bytes of `deposit` of `rkid`, looking in the
    /// open write transaction's buffer first when `active` is given.
    pub(super) fn bytes_of(
        &self,
        t: &impl Tables,
        rkid: &Rkid,
        deposit: &Deposit,
        active: Option<&ActiveSegment>,
    ) -> StoreResult<Vec<u8>> {
        let found = t.get_with(DEPOSITS, &key_seq(rkid, deposit.seq), |v| {
            let stored = decode_deposit(deposit.seq, v)?;
            let inline = (stored.segment == INLINE)
                .then(|| v.get(DEPOSIT_HEADER..).unwrap_or_default().to_vec());
            Ok((stored, inline))
        })?;
        let Some((stored, inline)) = found else {
            return Err(corrupt(format!("no bytes for deposit {}", deposit.seq)));
        };
        let bytes = match inline {
            Some(bytes) => bytes,
            None => match active
                .filter(|a| a.id == stored.segment)
                .and_then(|a| a.buffered(stored.offset, stored.deposit.len))
            {
                Some(bytes) => bytes,
                None => segment::read_at(
                    &*self.file(stored.segment)?,
                    stored.offset,
                    stored.deposit.len,
                )
                .map_err(|e| {
                    // A short segment is damage; any other read error is
                    // the disk's, and may pass.
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        corrupt(format!(
                            "deposit {} of segment {:016x} offset {}: the segment is cut short ({e})",
                            deposit.seq, stored.segment, stored.offset
                        ))
                    } else {
                        StoreError::Io(e)
                    }
                })?,
            },
        };
        if bytes.len() != stored.deposit.len as usize || DepositId::of(&bytes) != stored.deposit.id
        {
            return Err(corrupt(format!(
                "deposit {} of segment {:016x} offset {}: bytes do not match their id",
                deposit.seq, stored.segment, stored.offset
            )));
        }
        Ok(bytes)
    }
}

/// Drops a segment's row and lists it for deletion (same transaction).
pub(super) fn retire_segment(txn: &WriteTransaction, id: u64) -> StoreResult<()> {
    del(txn, SEGMENTS, &id.to_be_bytes())?;
    put(txn, SEGMENT_GC, &id.to_be_bytes(), &[])?;
    Ok(())
}

/// Records `id` as the (empty) active segment and bumps `next_segment`.
pub(super) fn record_active(txn: &WriteTransaction, id: u64) -> StoreResult<()> {
    let fresh = SegStat {
        live: 0,
        bytes: 0,
        end: segment::HEADER_LEN,
    };
    put(txn, SEGMENTS, &id.to_be_bytes(), &encode_seg(&fresh))?;
    put(txn, META, META_ACTIVE, &id.to_be_bytes())?;
    put(txn, META, META_NEXT_SEGMENT, &(id + 1).to_be_bytes())?;
    put_applied(txn, id, segment::HEADER_LEN)
}

/// Records that redb's state holds every log record of `segment` before
/// offset `at` (`src/oplog.rs`).
pub(super) fn put_applied(txn: &WriteTransaction, segment: u64, at: u64) -> StoreResult<()> {
    let value = cat(&[&segment.to_be_bytes(), &at.to_be_bytes()]);
    put(txn, META, META_APPLIED, &value).map(drop)
}
