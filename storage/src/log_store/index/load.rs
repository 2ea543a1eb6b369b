//! Bulk loading of a snapshot: no undo, no lookup its format makes
//! needless; due entries gathered and built at once.
use super::*;

impl Index {
    /// Begins or ends a bulk load (the due entries gathered meanwhile are
    /// sorted and built into the index at once: no tree rebalancing).
    pub(crate) fn set_loading(&mut self, loading: bool) {
        self.loading = loading;
        if loading {
            return;
        }
        let mut staged = std::mem::take(&mut self.staged);
        staged.sort_unstable_by_key(|e| e.0);
        let mut buckets: Vec<(Ms, Bucket)> = Vec::new();
        for (at, r) in staged {
            match buckets.last_mut() {
                Some((a, b)) if *a == at => b.push(r),
                _ => buckets.push((at, Bucket::one(r))),
            }
        }
        for (at, bucket) in std::mem::take(&mut self.due) {
            for r in bucket.refs() {
                buckets.push((at, Bucket::one(r)));
            }
        }
        buckets.sort_by_key(|b| b.0);
        let mut merged: Vec<(Ms, Bucket)> = Vec::with_capacity(buckets.len());
        for (at, bucket) in buckets {
            match merged.last_mut() {
                Some((a, b)) if *a == at => bucket.refs().for_each(|r| b.push(r)),
                _ => merged.push((at, bucket)),
            }
        }
        self.due = merged.into_iter().collect();
    }

    /// The queue a snapshot's entry names by its slot there (`hint`),
    /// if that slot of `map` holds this rkid; else found by its rkid.
    pub(crate) fn hinted_queue(&mut self, rkid: &Rkid, hint: Option<u32>) -> StoreResult<u32> {
        if let Some(qid) = hint
            && self
                .queues
                .live_at(qid)
                .is_some_and(|q| q.rkid == *rkid.as_bytes())
        {
            return Ok(qid);
        }
        self.queue_or_create(rkid)
    }

    /// A queue of a snapshot: created (or found, when a long queue's copy
    /// was continued), its last seq and its binding set.
    pub(crate) fn load_queue(
        &mut self,
        rkid: &Rkid,
        next_seq: u64,
        bound: bool,
    ) -> StoreResult<u32> {
        let qid = self.queue_or_create(rkid)?;
        let q = self.queues.get_mut(qid);
        q.next_seq = q.next_seq.max(next_seq);
        if bound {
            q.meta |= BOUND;
        } else {
            q.meta &= !BOUND;
        }
        Ok(qid)
    }

    /// A deposit of a snapshot, of queue `qid` (`flagged`: its give-up
    /// entry at its own instant).
    pub(crate) fn load_deposit(
        &mut self,
        qid: u32,
        deposit: &Deposit,
        seg: u32,
        off: u32,
        flagged: bool,
    ) -> StoreResult<()> {
        if deposit.len > LEN_MASK {
            return Err(StoreError::Corrupt(format!(
                "a deposit of {} bytes (the index holds at most {LEN_MASK})",
                deposit.len
            )));
        }
        let bytes = fits_queue(self.queues.get(qid), deposit.len)?;
        let slot = self.deps.alloc(DepRec {
            id: deposit.id.0,
            seq: deposit.seq,
            admitted_at: deposit.admitted_at,
            give_up_at: deposit.give_up_at,
            seg,
            off,
            len: deposit.len | LIVE | if flagged { FLAG } else { 0 },
            qid,
            prev: NIL,
            next: NIL,
        })?;
        self.link(qid, slot);
        let hash = self.hash_qid(qid, &deposit.id.0);
        self.id_pending.push((hash, slot));
        self.seg_adjust(seg, deposit.len, true);
        let q = self.queues.get_mut(qid);
        q.bytes = bytes;
        q.next_seq = q.next_seq.max(deposit.seq);
        self.occupancy.deposit_added(deposit.len);
        self.set_finger(qid, slot);
        if flagged {
            self.due_push(deposit.give_up_at, mkref(GIVE_UP, slot));
        }
        Ok(())
    }

    /// A departure of a snapshot (`flagged`: its forget entry at its own
    /// instant).
    pub(crate) fn load_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
        flagged: bool,
    ) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        let mut meta = LIVE
            | match record.departure {
                crate::Departure::GivenUp => GIVEN_UP,
                crate::Departure::Concluded => 0,
            };
        if flagged {
            meta |= FLAG;
        }
        let slot = self.departs.alloc(DepartRec {
            id: id.0,
            forget_at: record.forget_at,
            qid,
            meta,
        })?;
        let (h, ps) = (&self.hasher, &self.departs);
        self.depart_by_id
            .insert(h.hash_one((qid, id.0)), slot, |&s| {
                let d = ps.get(s);
                h.hash_one((d.qid, d.id))
            });
        let q = self.queues.get_mut(qid);
        q.meta = (q.meta & !REFS_MASK) | ((q.refs() + 1) & REFS_MASK);
        if flagged {
            self.due_push(record.forget_at, mkref(FORGET, slot));
        }
        Ok(())
    }

    /// A due entry of a snapshot that no record carries: an orphan expiry
    /// or deadline straight in (each is copied once), anything else the
    /// general way (it may repeat a record's).
    pub(crate) fn load_due(&mut self, at: Ms, due: &Due, hint: Option<u32>) -> StoreResult<()> {
        let kind = match due {
            Due::OrphanExpiry(_) => ORPHAN,
            Due::Deadline(_) => DEADLINE,
            _ => return self.schedule(at, due),
        };
        let (Due::OrphanExpiry(rkid) | Due::Deadline(rkid)) = due else {
            return self.schedule(at, due);
        };
        let qid = self.hinted_queue(rkid, hint)?;
        let q = self.queues.get_mut(qid);
        q.meta = (q.meta & !REFS_MASK) | ((q.refs() + 1) & REFS_MASK);
        self.due_push(at, mkref(kind, qid));
        Ok(())
    }
}
