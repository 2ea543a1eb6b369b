//! The open transaction's undo log: every mutation records how to take
//! it back; commit, rollback and pruning (module docs, "Transactions and
//! snapshots").
use super::*;

/// How to take one mutation back (module docs).
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    DepAdded(u32),
    DepRemoved(u32),
    DepMoved {
        slot: u32,
        seg: u32,
        off: u32,
    },
    QueueCreated(u32),
    QueueFreed(u32),
    QueueFields {
        qid: u32,
        next_seq: u64,
        bytes: u32,
        meta: u32,
    },
    DueAdded {
        at: Ms,
        r: u32,
    },
    DueRemoved {
        at: Ms,
        r: u32,
    },
    DepartAdded(u32),
    DepartRemoved(u32),
    DepartChanged {
        slot: u32,
        before: DepartRec,
    },
    Occupancy(Occupancy),
    Quarantine {
        key: (Rkid, u64),
        before: Option<Vec<u8>>,
    },
}

impl Index {
    pub(super) fn undo_push(&mut self, undo: Undo) {
        if !self.loading {
            self.open.push(undo);
        }
    }

    /// Commits the open transaction as version `committed + 1`; keeps its
    /// before-images if a snapshot older than it lives (`keep`), and drops
    /// history no live snapshot needs (`oldest`: the oldest live
    /// snapshot's version).
    /// Spills the give-up entries of deposits the open transaction removed
    /// and did not unschedule (part of its commit; may be called before).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] if the index is full.
    pub(crate) fn settle(&mut self) -> StoreResult<()> {
        for (_, slot) in std::mem::take(&mut self.removed_flagged) {
            let d = *self.deps.get(slot);
            if d.flagged() {
                let rkid = self.queues.get(d.qid).rkid();
                self.due_remove_ref(d.give_up_at, mkref(GIVE_UP, slot));
                self.due_add_spill(d.give_up_at, Due::GiveUp(rkid, d.seq))?;
            }
        }
        Ok(())
    }

    pub(crate) fn commit(&mut self, keep: bool, oldest: Option<u64>) -> StoreResult<u64> {
        self.settle()?;
        let version = self.committed + 1;
        if keep && !self.open.is_empty() {
            let images = self.images(&self.open);
            self.history
                .push_back((version, std::sync::Arc::new(images)));
        }
        self.open.clear();
        self.occupancy_saved = false;
        for (kind, slot) in std::mem::take(&mut self.deferred) {
            match kind {
                K_DEP if !self.deps.get(slot).live() => self.deps.release(slot),
                K_QUEUE if !self.queues.get(slot).live() => self.queues.release(slot),
                K_DEPART if !self.departs.get(slot).live() => self.departs.release(slot),
                K_SPILL if !self.spill.get(slot).live() => self.spill.release(slot),
                _ => {}
            }
        }
        self.committed = version;
        self.prune(oldest);
        Ok(version)
    }

    /// Drops history that no snapshot at `oldest` or later needs.
    pub(crate) fn prune(&mut self, oldest: Option<u64>) {
        while let Some((version, _)) = self.history.front() {
            if oldest.is_some_and(|v| v < *version) {
                break;
            }
            self.history.pop_front();
        }
    }

    /// Takes the open transaction back.
    pub(crate) fn rollback(&mut self) {
        while let Some(undo) = self.open.pop() {
            self.undo(undo);
        }
        self.occupancy_saved = false;
        self.deferred.clear();
        self.removed_flagged.clear();
    }

    pub(super) fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::DepAdded(slot) => {
                let d = *self.deps.get(slot);
                self.unlink(slot);
                let hash = self.hash_qid(d.qid, &d.id);
                self.by_id.remove(hash, slot);
                self.seg_adjust(d.seg, d.len(), false);
                self.deps.get_mut(slot).len &= !LIVE;
                self.deps.release(slot);
            }
            Undo::DepRemoved(slot) => self.restore_deposit(slot),
            Undo::DepMoved { slot, seg, off } => {
                let d = *self.deps.get(slot);
                self.seg_adjust(d.seg, d.len(), false);
                self.seg_adjust(seg, d.len(), true);
                let r = self.deps.get_mut(slot);
                r.seg = seg;
                r.off = off;
            }
            Undo::QueueCreated(qid) => {
                let hash = self.hash_rkid(&self.queues.get(qid).rkid);
                self.by_rkid.remove(hash, qid);
                self.queues.get_mut(qid).meta &= !LIVE;
                self.queues.release(qid);
            }
            Undo::QueueFreed(qid) => {
                self.queues.get_mut(qid).meta |= LIVE;
                let (h, qs) = (&self.hasher, &self.queues);
                self.by_rkid
                    .insert(h.hash_one(qs.get(qid).rkid), qid, |&s| {
                        h.hash_one(qs.get(s).rkid)
                    });
            }
            Undo::QueueFields {
                qid,
                next_seq,
                bytes,
                meta,
            } => {
                let q = self.queues.get_mut(qid);
                q.next_seq = next_seq;
                q.bytes = bytes;
                q.meta = meta;
            }
            Undo::DueAdded { at, r } => {
                self.due_take(at, r);
                self.set_due_flag(r, false);
            }
            Undo::DueRemoved { at, r } => {
                self.set_due_flag(r, true);
                self.due_push(at, r);
            }
            Undo::DepartAdded(slot) => {
                let d = *self.departs.get(slot);
                let hash = self.hash_qid(d.qid, &d.id);
                self.depart_by_id.remove(hash, slot);
                self.departs.get_mut(slot).meta &= !LIVE;
                self.departs.release(slot);
            }
            Undo::DepartRemoved(slot) => {
                self.departs.get_mut(slot).meta |= LIVE;
                let (h, ps) = (&self.hasher, &self.departs);
                let d = *ps.get(slot);
                self.depart_by_id
                    .insert(h.hash_one((d.qid, d.id)), slot, |&s| {
                        let d = ps.get(s);
                        h.hash_one((d.qid, d.id))
                    });
            }
            Undo::DepartChanged { slot, before } => {
                *self.departs.get_mut(slot) = before;
            }
            Undo::Occupancy(before) => self.occupancy = before,
            Undo::Quarantine { key, before } => match before {
                Some(value) => {
                    self.quarantine.insert(key, value);
                }
                None => {
                    self.quarantine.remove(&key);
                }
            },
        }
    }

    /// Puts removed deposit `slot` back where it was: every later change
    /// is undone, so its neighbours are the ones it had.
    fn restore_deposit(&mut self, slot: u32) {
        self.deps.get_mut(slot).len |= LIVE;
        let d = *self.deps.get(slot);
        let q = self.queues.get_mut(d.qid);
        if q.head == NIL {
            q.head = slot;
        } else {
            self.deps.get_mut(d.prev).next = slot;
            self.deps.get_mut(d.next).prev = slot;
            let head = self.queues.get(d.qid).head;
            if head == d.next && self.deps.get(head).seq > d.seq {
                self.queues.get_mut(d.qid).head = slot;
            }
        }
        self.hash_dep(slot);
        self.seg_adjust(d.seg, d.len(), true);
    }

    /// Marks the record a due reference `r` names as scheduled (or not);
    /// a spilled entry is revived (or released).
    fn set_due_flag(&mut self, r: u32, on: bool) {
        let slot = slot_of(r);
        match (kind_of(r), on) {
            (GIVE_UP, true) => self.deps.get_mut(slot).len |= FLAG,
            (GIVE_UP, false) => self.deps.get_mut(slot).len &= !FLAG,
            (FORGET, true) => self.departs.get_mut(slot).meta |= FLAG,
            (FORGET, false) => self.departs.get_mut(slot).meta &= !FLAG,
            (SPILL, true) => self.spill.get_mut(slot).live = true,
            (SPILL, false) => {
                self.spill.get_mut(slot).live = false;
                self.spill.release(slot);
            }
            _ => {}
        }
    }
}
