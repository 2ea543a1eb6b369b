//! Background compaction of sparse sealed segments, in bounded steps.

use super::*;

impl RedbStore {
    /// One bounded step of background compaction: examines up to
    /// step stopped) and copies the live deposits of *sparse* sealed
    /// segments (live bytes below `compact_below_percent` of their extent,
    /// or of `segment_bytes` when they were sealed early by a restart)
    /// into the active segment, re-pointing their index entries, in one
    /// short write transaction with the usual commit order. A segment whose
    /// last deposit moves out is reclaimed by that commit. Serialized with
    /// the group-commit writer (it takes the same write lock), so it never
    /// pauses the carrier for longer than one step. Call it periodically
    /// until `pass_complete`.
    ///
    /// # Errors
    /// [`StoreError`] as for a commit. A deposit whose bytes do not match
    /// its id is never copied: it is skipped (and stays where it is until
    /// the engine quarantines it or it is given up).
    pub fn compact_step(&self, max_scan: usize) -> StoreResult<CompactionStep> {
        let mut w = self.begin_write()?;
        let mut step = CompactionStep::default();
        let active = w.state.active.id;
        let percent = u64::from(self.options.compact_below_percent);
        let bound = self.options.segment_bytes;
        let mut sparse = HashSet::new();
        w.txn()?
            .scan(SEGMENTS, (Bound::Unbounded, Bound::Unbounded), |k, v| {
                let id = u64_at(k, 0)?;
                let stat = decode_seg(v)?;
                // Judged against the full segment size, so that the small
                // segments sealed at each restart are merged too.
                let size = stat.end.max(bound).saturating_sub(segment::HEADER_LEN);
                if id != active && stat.bytes.saturating_mul(100) < size.saturating_mul(percent) {
                    sparse.insert(id);
                }
                Ok(true)
            })?;
        if sparse.is_empty() {
            w.state.compaction_cursor = None;
            step.pass_complete = true;
            return Ok(step);
        }
        let cursor = w.state.compaction_cursor.take();
        let start = cursor.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut to_move = Vec::new();
        let mut last = None;
        w.txn()?.scan(DEPOSITS, (start, Bound::Unbounded), |k, v| {
            step.scanned += 1;
            last = Some(k.to_vec());
            let stored = decode_deposit(seq_of_key(k)?, v)?;
            if sparse.contains(&stored.segment) {
                to_move.push((Rkid::from_bytes(arr32_at(k, 0)?), stored));
            }
            Ok(step.scanned < max_scan.max(1))
        })?;
        for (rkid, stored) in to_move {
            let bytes = match self.bytes_of(w.txn()?, &rkid, &stored.deposit, None) {
                Ok(bytes) => bytes,
                // Never copied: the engine quarantines it when it meets it.
                Err(StoreError::Corrupt(what)) => {
                    tracing::warn!(%what, "compaction skips a damaged deposit");
                    continue;
                }
                Err(other) => return Err(other),
            };
            let seq = stored.deposit.seq;
            let end = w.log(&[
                &[tag::MOVE_DEPOSIT],
                rkid.as_bytes(),
                &seq.to_be_bytes(),
                &stored.deposit.len.to_be_bytes(),
                &bytes,
            ])?;
            w.move_deposit(&rkid, seq, end - bytes.len() as u64)?;
            step.moved += 1;
            step.moved_bytes += u64::from(stored.deposit.len);
        }
        step.pass_complete = step.scanned < max_scan.max(1);
        let resume = if step.pass_complete { None } else { last };
        self.commit(w)?;
        lock(&self.writer).compaction_cursor = resume;
        Ok(step)
    }
}
