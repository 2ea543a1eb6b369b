//! Held deposits: adding, removing and moving one, with the identity
//! hash, the queue's counters and the per-segment statistics.
use super::*;

impl Index {
    pub(super) fn seg_adjust(&mut self, seg: u32, len: u32, add: bool) {
        let stat = self.segs.entry(seg).or_default();
        if add {
            stat.live += 1;
            stat.bytes += u64::from(len);
        } else {
            stat.live = stat.live.saturating_sub(1);
            stat.bytes = stat.bytes.saturating_sub(u64::from(len));
        }
    }

    pub(super) fn hash_dep(&mut self, slot: u32) {
        let d = *self.deps.get(slot);
        let (h, ds) = (&self.hasher, &self.deps);
        self.by_id.insert(h.hash_one((d.qid, d.id)), slot, |&s| {
            let d = ds.get(s);
            h.hash_one((d.qid, d.id))
        });
    }

    /// Adds a held deposit (its `seq` is new to the queue); returns its slot.
    pub(crate) fn add_deposit(
        &mut self,
        rkid: &Rkid,
        deposit: &Deposit,
        seg: u32,
        off: u32,
    ) -> StoreResult<u32> {
        if deposit.len > LEN_MASK {
            return Err(StoreError::Corrupt(format!(
                "a deposit of {} bytes (the index holds at most {LEN_MASK})",
                deposit.len
            )));
        }
        let qid = self.queue_or_create(rkid)?;
        let bytes = fits_queue(self.queues.get(qid), deposit.len)?;
        let slot = self.deps.alloc(DepRec {
            id: deposit.id.0,
            seq: deposit.seq,
            admitted_at: deposit.admitted_at,
            give_up_at: deposit.give_up_at,
            seg,
            off,
            len: deposit.len | LIVE,
            qid,
            prev: NIL,
            next: NIL,
        })?;
        self.link(qid, slot);
        self.hash_dep(slot);
        self.seg_adjust(seg, deposit.len, true);
        self.queue_update(qid, |q| {
            q.bytes = bytes;
            q.next_seq = q.next_seq.max(deposit.seq);
        });
        self.occupancy_mut().deposit_added(deposit.len);
        self.undo_push(Undo::DepAdded(slot));
        self.set_finger(qid, slot);
        Ok(slot)
    }

    /// Removes held deposit `slot` (its give-up entry, if it is one, stays:
    /// the due index is the engine's to change; it becomes a spilled entry
    /// at commit unless unscheduled before).
    pub(crate) fn remove_deposit(&mut self, slot: u32) -> StoreResult<Deposit> {
        let d = *self.deps.get(slot);
        if d.flagged() {
            self.removed_flagged.insert((d.qid, d.seq), slot);
        }
        self.unlink(slot);
        let hash = self.hash_qid(d.qid, &d.id);
        self.by_id.remove(hash, slot);
        self.seg_adjust(d.seg, d.len(), false);
        self.queue_update(d.qid, |q| q.bytes = q.bytes.saturating_sub(d.len()));
        self.occupancy_mut().deposit_removed(d.len());
        self.deps.get_mut(slot).len &= !LIVE;
        self.deferred.push((K_DEP, slot));
        self.undo_push(Undo::DepRemoved(slot));
        self.maybe_free_queue(d.qid);
        Ok(d.deposit())
    }

    /// Points held deposit `slot` at a copy of its bytes.
    pub(crate) fn move_deposit(&mut self, slot: u32, seg: u32, off: u32) {
        let d = *self.deps.get(slot);
        self.seg_adjust(d.seg, d.len(), false);
        self.seg_adjust(seg, d.len(), true);
        let r = self.deps.get_mut(slot);
        r.seg = seg;
        r.off = off;
        self.undo_push(Undo::DepMoved {
            slot,
            seg: d.seg,
            off: d.off,
        });
    }
}
