//! The legacy store's full integrity check (tests, crash harnesses,
//! restores; never at start-up).

use super::*;

impl RedbStore {
    /// Runs redb's integrity check, then verifies every counter against the
    /// data it counts: occupancy = Σ deposit lengths and counts, per-queue
    /// indexes, every referenced segment file, and every deposit's SHA-256.
    /// Reads everything (O(data)): for tests, the crash harnesses and
    /// restores, never at start-up. Needs exclusive access (no open
    /// transactions). Held deposits whose bytes fail their check are named
    /// in [`IntegrityReport::damaged`], quarantine records in
    /// [`IntegrityReport::quarantined`] ([`IntegrityReport::is_clean`]).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first mismatch of a counter or an
    /// index; [`crate::OpenError::Damaged`] (in [`StoreError::Open`]) if redb
    /// panics on a damaged page;
    /// other [`StoreError`]s for I/O or engine failures.
    pub fn integrity_check(&mut self) -> StoreResult<IntegrityReport> {
        let what = format!("checking the store in {}", self.segments_dir.display());
        crate::contain::contain(&what, || self.check_everything())
    }

    pub(super) fn check_everything(&mut self) -> StoreResult<IntegrityReport> {
        let db = self
            .db
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
            .and_then(Arc::get_mut)
            .ok_or_else(|| StoreError::Unavailable("the database is in use or reopening"))?;
        match db.check_integrity().map_err(db_error)? {
            true => {}
            false => return Err(corrupt("redb integrity check had to repair the file")),
        }
        let txn = db.begin_read().map_err(db_error)?;
        let mut report = IntegrityReport::default();
        let occupancy = query::occupancy(&txn)?;

        check_bindings(&txn, &mut report)?;
        let per_segment = self.check_deposits(&txn, &mut report)?;
        let counted = Occupancy {
            total_bytes: report.bytes,
            bindings: report.bindings,
            deposits: report.deposits,
            tombstones: report.tombstones,
            elastic_bytes: occupancy.elastic_bytes,
        };
        if counted != occupancy {
            return Err(corrupt(format!(
                "occupancy counters {occupancy:?} vs held {counted:?}"
            )));
        }

        self.check_segments(&txn, per_segment, &mut report)?;
        txn.scan(DUE, (Bound::Unbounded, Bound::Unbounded), |k, _| {
            decode_due(k)?;
            Ok(true)
        })?;
        Ok(report)
    }

    /// Every deposit read back and counted, its identity entry, the
    /// quarantine records and the per-queue counters; returns what each
    /// segment holds.
    fn check_deposits(
        &self,
        txn: &ReadTransaction,
        report: &mut IntegrityReport,
    ) -> StoreResult<HashMap<u64, SegStat>> {
        let mut per_queue: HashMap<[u8; 32], (u64, u64)> = HashMap::new();
        let mut per_segment: HashMap<u64, SegStat> = HashMap::new();
        let mut deposits = Vec::new();
        txn.scan(DEPOSITS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let rkid = arr32_at(k, 0)?;
            let stored = decode_deposit(seq_of_key(k)?, v)?;
            let len = u64::from(stored.deposit.len);
            let queue = per_queue.entry(rkid).or_default();
            queue.0 += len;
            queue.1 = queue.1.max(stored.deposit.seq);
            if stored.segment != INLINE {
                let seg = per_segment.entry(stored.segment).or_default();
                seg.live += 1;
                seg.bytes += len;
                seg.end = seg.end.max(stored.offset + len);
            }
            deposits.push((Rkid::from_bytes(rkid), stored.deposit));
            Ok(true)
        })?;
        for (rkid, deposit) in &deposits {
            match get_u64(txn, IDENTITY, &key_id(rkid, &deposit.id))? {
                Some(seq) if seq == deposit.seq => {}
                other => {
                    return Err(corrupt(format!(
                        "identity of deposit {} points to {other:?}",
                        deposit.seq
                    )));
                }
            }
            match self.bytes_of(txn, rkid, deposit, None) {
                Ok(_) => {}
                Err(StoreError::Corrupt(what)) => report.damaged.push(what),
                Err(other) => return Err(other),
            }
            report.deposits += 1;
            report.bytes += u64::from(deposit.len);
        }
        txn.scan(QUARANTINE, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            report.quarantined.push(describe_quarantine(k, v)?);
            Ok(true)
        })?;
        let mut identities = 0u64;
        txn.scan(IDENTITY, (Bound::Unbounded, Bound::Unbounded), |_, _| {
            identities += 1;
            Ok(true)
        })?;
        if identities != report.deposits {
            return Err(corrupt(format!(
                "{identities} identity entries for {} deposits",
                report.deposits
            )));
        }
        txn.scan(QUEUES, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let queue = decode_queue(v)?;
            let (bytes, max_seq) = per_queue.remove(&arr32_at(k, 0)?).unwrap_or_default();
            if queue.bytes != bytes || queue.next_seq < max_seq {
                return Err(corrupt(format!(
                    "queue counter {} bytes next {} vs held {bytes} bytes max seq {max_seq}",
                    queue.bytes, queue.next_seq
                )));
            }
            Ok(true)
        })?;
        if !per_queue.is_empty() {
            return Err(corrupt("deposits of a queue without a queue record"));
        }
        Ok(per_segment)
    }

    /// Every recorded segment against what its deposits hold, and every
    /// file in `segments/` recorded or pending deletion.
    fn check_segments(
        &self,
        txn: &ReadTransaction,
        mut per_segment: HashMap<u64, SegStat>,
        report: &mut IntegrityReport,
    ) -> StoreResult<()> {
        let active = get_u64(txn, META, META_ACTIVE)?;
        let mut gc = HashSet::new();
        txn.scan(SEGMENT_GC, (Bound::Unbounded, Bound::Unbounded), |k, _| {
            gc.insert(u64_at(k, 0)?);
            Ok(true)
        })?;
        let mut recorded = HashSet::new();
        txn.scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
            let id = u64_at(k, 0)?;
            let stat = decode_seg(v)?;
            let held = per_segment.remove(&id).unwrap_or_default();
            if stat.live != held.live || stat.bytes != held.bytes || stat.end < held.end {
                return Err(corrupt(format!(
                    "segment {id:016x} counters {stat:?} vs held {held:?}"
                )));
            }
            if stat.live == 0 && Some(id) != active {
                return Err(corrupt(format!("drained segment {id:016x} not reclaimed")));
            }
            // A file shorter than its extent shows as the damaged deposits
            // past its end (named above).
            self.options
                .fs
                .file_len(&segment::segment_path(&self.segments_dir, id))?
                .ok_or_else(|| corrupt(format!("segment {id:016x} is missing")))?;
            recorded.insert(id);
            report.segments += 1;
            Ok(true)
        })?;
        if let Some((id, _)) = per_segment.iter().next() {
            return Err(corrupt(format!("deposits in unrecorded segment {id:016x}")));
        }
        for name in self.options.fs.list(&self.segments_dir)? {
            let Some(id) = segment::parse_segment_name(&name) else {
                return Err(corrupt(format!("stray file {name:?} in segments")));
            };
            if !recorded.contains(&id) && !gc.contains(&id) {
                return Err(corrupt(format!("unreferenced segment file {id:016x}")));
            }
        }
        Ok(())
    }
}

/// Bindings, tombstones and their eviction entries, counted.
fn check_bindings(txn: &ReadTransaction, report: &mut IntegrityReport) -> StoreResult<()> {
    let mut bound = HashSet::new();
    txn.scan(BINDINGS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        decode_binding(v)?;
        bound.insert(arr32_at(k, 0)?);
        Ok(true)
    })?;
    report.bindings = bound.len() as u64;
    let mut eviction_entries = 0u64;
    txn.scan(TOMBSTONES, (Bound::Unbounded, Bound::Unbounded), |k, v| {
        let rkid = arr32_at(k, 0)?;
        let t = decode_tombstone(v)?;
        report.tombstones += 1;
        if bound.contains(&rkid) {
            report.binding_and_tombstone += 1;
        }
        let key = eviction_key(t.released_at, &Rkid::from_bytes(rkid));
        if txn.get_with(EVICTION, &key, |_| Ok(()))?.is_none() {
            return Err(corrupt("tombstone without eviction entry"));
        }
        Ok(true)
    })?;
    txn.scan(EVICTION, (Bound::Unbounded, Bound::Unbounded), |_, _| {
        eviction_entries += 1;
        Ok(true)
    })?;
    if eviction_entries != report.tombstones {
        return Err(corrupt(format!(
            "{eviction_entries} eviction entries for {} tombstones",
            report.tombstones
        )));
    }

    Ok(())
}
