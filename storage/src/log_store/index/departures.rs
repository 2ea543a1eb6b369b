//! Departure records: how a deposit left its queue, for the status path,
//! until its forget instant.
use super::*;

impl Index {
    pub(crate) fn find_departure(&self, qid: u32, id: &[u8; 32]) -> Option<u32> {
        self.depart_by_id.find(self.hash_qid(qid, id), |&s| {
            let d = self.departs.get(s);
            d.qid == qid && d.id == *id
        })
    }

    /// Turns the compact forget entry of departure `slot` into a spilled
    /// one (before its record changes or goes).
    pub(super) fn unflag_departure(&mut self, slot: u32) -> StoreResult<()> {
        let d = *self.departs.get(slot);
        if d.flagged() {
            let rkid = self.queues.get(d.qid).rkid();
            self.due_remove_ref(d.forget_at, mkref(FORGET, slot));
            self.due_add_spill(d.forget_at, Due::Forget(rkid, DepositId(d.id)))?;
        }
        Ok(())
    }

    pub(crate) fn put_departure(
        &mut self,
        rkid: &Rkid,
        id: &DepositId,
        record: &DepartureRecord,
    ) -> StoreResult<()> {
        let qid = self.queue_or_create(rkid)?;
        let meta = LIVE
            | match record.departure {
                crate::Departure::GivenUp => GIVEN_UP,
                crate::Departure::Concluded => 0,
            };
        if let Some(slot) = self.find_departure(qid, &id.0) {
            self.unflag_departure(slot)?;
            let before = *self.departs.get(slot);
            let r = self.departs.get_mut(slot);
            r.forget_at = record.forget_at;
            r.meta = meta;
            self.undo_push(Undo::DepartChanged { slot, before });
            return Ok(());
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
        self.undo_push(Undo::DepartAdded(slot));
        self.add_refs(qid, 1);
        Ok(())
    }

    pub(crate) fn remove_departure(&mut self, rkid: &Rkid, id: &DepositId) -> StoreResult<()> {
        let Some(qid) = self.queue(rkid) else {
            return Ok(());
        };
        let Some(slot) = self.find_departure(qid, &id.0) else {
            return Ok(());
        };
        self.unflag_departure(slot)?;
        let hash = self.hash_qid(qid, &id.0);
        self.depart_by_id.remove(hash, slot);
        self.departs.get_mut(slot).meta &= !LIVE;
        self.deferred.push((K_DEPART, slot));
        self.undo_push(Undo::DepartRemoved(slot));
        self.add_refs(qid, -1);
        self.maybe_free_queue(qid);
        Ok(())
    }

    pub(crate) fn departure(&self, rkid: &Rkid, id: &DepositId) -> Option<DepartureRecord> {
        let qid = self.queue(rkid)?;
        self.find_departure(qid, &id.0)
            .map(|s| self.departs.get(s).record())
    }
}
